"""A read whose answer cache is unreachable is answered fresh, through every gate, and the
entry is simply not kept: the cache is an optimisation, never a dependency of a read."""

from __future__ import annotations

import pytest

from govindex.adapters.redis_cache import RedisTaggedCache
from reader.models import PackRequest, SearchRequest
from reader.service import ReadPorts, ReadService
from tests.support.pipeline import Pipeline
from tests.support.proxy import free_port

pytestmark = pytest.mark.e2e


async def test_reads_are_answered_fresh_while_the_cache_is_down(pipeline: Pipeline) -> None:
    p = pipeline
    ids = p.publish(
        p.change("runbooks/failover.md", 1, "# Failover\n\nPromote the replica, then check.\n"),
        p.change("hr/salaries.md", 1, '---\nacl: ["group:hr"]\n---\n# Bands\n\nReplica bands.\n'),
    )
    await p.wait_processed(ids)
    # A real Redis client whose server is gone: nothing listens on this port.
    down = RedisTaggedCache(f"redis://127.0.0.1:{free_port()}/0", p.settings.namespace)
    service = ReadService(ReadPorts(store=p.rt.reads, index=p.rt.index, cache=down))
    body = {
        "tenant": p.tenant,
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "query": "replica",
        "cache": "use",
    }
    try:
        for _ in range(2):  # nothing was kept: the second answer is fresh too
            pack = await service.pack(PackRequest.model_validate(body))
            assert not pack.cached
            assert [i.anchor.doc_id for i in pack.items] == ["runbooks/failover.md"]
            found = await service.search(SearchRequest.model_validate(body))
            assert not found.cached
            assert {h.anchor.doc_id for h in found.hits} == {"runbooks/failover.md"}
    finally:
        await down.close()
