"""The embedded index keeps nothing on disk: a restart rebuilds the projection from Postgres."""

from __future__ import annotations

import pytest
from opensearchpy import OpenSearch

from govindex.control.bootstrap import prepare
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e


async def test_an_empty_index_is_rebuilt_from_postgres_into_a_new_generation(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    await p.wait_processed(
        p.publish(
            p.change("r.md", 1, "# R\nfirst\n"),
            p.change("r.md", 2, "# R\nsecond\n"),
            p.change("s.md", 1, "# S\nother\n"),
        )
    )
    before = [{k: v for k, v in d.items() if k != "index_generation"} for d in p.os_chunks()]
    await p.stop_workers()
    assert p.settings.opensearch_url
    client = OpenSearch(hosts=[p.settings.opensearch_url])
    client.indices.delete(index=f"{p.settings.index_alias}-g*")  # what a restart loses
    client.close()
    generation = await prepare(p.settings)
    assert generation == 2
    after = p.os_chunks()
    assert [{k: v for k, v in d.items() if k != "index_generation"} for d in after] == before
    assert {d["index_generation"] for d in after} == {2}
    await p.assert_sinks_agree()
