"""Index generations: one created by an older release learns new fields at start-up; a
rebuild resumed early keeps the generation it registered."""

from __future__ import annotations

from typing import Any

import pytest
from opensearchpy import OpenSearch

from govindex.adapters.opensearch import MAPPING, OpenSearchIndex
from govindex.control.reindex import run_reindex
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime

pytestmark = pytest.mark.integration


async def test_an_older_generation_gets_the_new_fields_without_a_rebuild(
    settings: Settings,
) -> None:
    assert settings.opensearch_url
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
    # The older release indexed every field and had neither labels nor context.
    old: dict[str, Any] = {
        **MAPPING,
        "properties": {
            k: {p: x for p, x in v.items() if p not in ("index", "doc_values")}
            for k, v in MAPPING["properties"].items()
            if k not in ("labels", "context")
        },
    }
    client = OpenSearch(hosts=[settings.opensearch_url])
    client.indices.create(index=index.index_name(1), body={"mappings": old})
    await index.point_alias(1)
    try:
        await index.ensure_template()
        fields = client.indices.get_mapping(index=index.index_name(1))
        props = fields[index.index_name(1)]["mappings"]["properties"]
        assert props["labels"] == {"type": "keyword"}
        assert props["context"] == {"type": "text", "index": False}
        assert props["locator"] == {"type": "keyword"}  # unchanged in place
        client.index(index=settings.index_alias, id="x", body={"labels": ["step:1"]})
    finally:
        client.close()
        await index.close()


async def test_a_rebuild_resumed_before_its_first_checkpoint_keeps_its_generation(
    runtime: Runtime,
) -> None:
    """The job died after registering its generation and before recording it: the resumed
    job builds that generation, and no second one is left building."""
    rt = runtime
    await rt.index.ensure_template()
    live = await rt.generations.begin(rt.index.index_name)
    await rt.index.create_generation(live)
    await rt.index.point_alias(live)
    await rt.generations.go_live(live)
    job = await rt.jobs.create(
        "reindex",
        {"mode": "build", "switch": False},
        requested_by="t",
        dry_run=False,
        rate=None,
        runner="t",
    )
    registered = await rt.generations.begin(rt.index.index_name, job.id)  # then it died
    finished = await run_reindex(rt, job, lambda done, total: None)
    assert finished.state.value == "succeeded", finished
    assert finished.checkpoint["generation"] == registered
    assert await rt.generations.building() == [(registered, rt.index.index_name(registered))]
    assert await rt.generations.begin(rt.index.index_name) == registered + 1  # unrelated: new
