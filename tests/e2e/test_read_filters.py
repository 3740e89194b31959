"""The caller's narrowing (sources, kinds, labels, a path prefix) holds for every channel on
the real servers, the OpenSearch one included, whose index query does not take it."""

from __future__ import annotations

import pytest

from reader.app import read_service
from reader.models import SearchRequest
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

TEXT = "# Replica failover\n\nPromote the replica when the primary stops answering.\n"


async def test_filters_narrow_every_channel_bm25_included(shared_pipeline: Pipeline) -> None:
    p = shared_pipeline
    other = f"{p.source}-other"
    await p.register(source_id=other)
    ids = p.publish(
        p.change("runbooks/a.md", 1, TEXT),
        p.change("notes/b.md", 1, TEXT.replace("Replica", "Standby replica")),
        p.change("runbooks/c.md", 1, TEXT.replace("Replica", "Old replica"), source=other),
    )
    await p.wait_processed(ids)
    await p.rt.index.refresh()
    service = read_service(p.rt)

    async def docs(channel: str, **filters: object) -> set[tuple[str, str]]:
        request = SearchRequest.model_validate(
            {
                "tenant": p.tenant,
                "subject": {"principals": ["group:eng"]},
                "purpose": "support",
                "query": "replica failover promote primary",
                "channels": [channel],
                "filters": filters,
                "cache": "bypass",
            }
        )
        hits = (await service.search(request)).hits
        return {(h.anchor.source_id, h.anchor.doc_id) for h in hits}

    everything = await docs("bm25")
    assert {d for _, d in everything} == {"runbooks/a.md", "notes/b.md", "runbooks/c.md"}
    for channel in ("bm25", "fulltext"):
        assert await docs(channel, sources=[other]) == {(other, "runbooks/c.md")}, channel
        assert {d for _, d in await docs(channel, path_prefix="runbooks/")} == {
            "runbooks/a.md",
            "runbooks/c.md",
        }, channel
        assert await docs(channel, kinds=["step"]) == set(), channel
