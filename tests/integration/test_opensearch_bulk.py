"""A batch's chunks go to OpenSearch in bounded requests; a re-send after a partial write
is a no-op for what already landed."""

from __future__ import annotations

import asyncio
import json

import pytest

from govindex.adapters.opensearch import BulkPolicy, OpenSearchIndex
from govindex.control.bootstrap import prepare
from govindex.core.ports import PurgeTarget
from govindex.core.settings import Settings
from tests.support.builders import TEXT, manifest, unique, version_plan

pytestmark = pytest.mark.integration


async def test_a_large_batch_is_sent_in_bounded_requests_and_lands_whole(
    settings: Settings,
) -> None:
    assert settings.opensearch_url
    await prepare(settings)
    source = manifest(unique("s"), unique("t"))
    chunks = [c for n in range(7) for c in version_plan(source, f"d{n}.md", 1, TEXT).chunks]
    policy = BulkPolicy(max_chunks=4, max_bytes=64 * 1024, concurrency=1, timeout_s=30)
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias, bulk=policy)
    try:
        bodies = list(index._bulk_bodies(chunks, settings.index_alias))
        assert len(bodies) == -(-len(chunks) // 4) > 1
        sent = [json.loads(a)["index"]["_id"] for b in bodies for a in b.splitlines()[::2]]
        assert sent == [c.chunk_id for c in chunks]  # every chunk once, in order

        first = await index.project(chunks[:5])  # as if the batch failed after a request
        assert (first.taken, dict(first.rejected)) == (5, {})
        again = await index.project(chunks)  # the retry re-sends the whole batch
        assert (again.taken, dict(again.rejected)) == (len(chunks) - 5, {})
        await index.refresh()
        assert await index.count() == len(chunks)
    finally:
        await index.close()


async def test_requests_stay_under_the_byte_bound_and_a_huge_chunk_goes_alone(
    settings: Settings,
) -> None:
    assert settings.opensearch_url
    source = manifest(unique("s"), unique("t"))
    small = version_plan(source, "a.md", 1, TEXT).chunks
    big = version_plan(source, "b.md", 1, "# Big\n" + "word " * 5000 + "\n").chunks
    chunks = [*small, *big, *small]
    policy = BulkPolicy(max_chunks=1000, max_bytes=3000)  # two small chunks fit, not a 3.5 KB one
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias, bulk=policy)
    bodies = list(index._bulk_bodies(chunks, "x"))
    await index.close()
    sizes = [(len(b), len(b.splitlines()) // 2) for b in bodies]
    assert any(n == 2 for _, n in sizes)  # small ones still share a request
    assert sum(n for _, n in sizes) == len(chunks)
    for size, n in sizes:
        assert size <= policy.max_bytes or n == 1, sizes
    assert any(size > policy.max_bytes and n == 1 for size, n in sizes)  # the big one, alone


async def test_no_bulk_write_starts_while_a_purge_goes_first(settings: Settings) -> None:
    """Deletions before updates: a purge holding `first()` has the server to itself; the
    documents lanes' bulks wait, then land whole."""
    assert settings.opensearch_url
    await prepare(settings)
    source = manifest(unique("s"), unique("t"))
    chunks = version_plan(source, "held.md", 1, TEXT).chunks
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
    # Every version of the document: as far as a sequence goes.
    held = PurgeTarget(source.tenant, source.source_id, "held.md", 2**63 - 1, ())
    try:
        async with index.first():
            writing = asyncio.create_task(index.project(chunks))
            await asyncio.sleep(0.5)
            assert not writing.done()
            # nothing sent yet
            assert await index.count_documents([held], current_only=True, refresh=True) == [0]
        result = await asyncio.wait_for(writing, timeout=30)
        assert (result.taken, dict(result.rejected)) == (len(chunks), {})
        current = await index.count_documents([held], current_only=True, refresh=True)
        assert current == [len(chunks)]
    finally:
        await index.close()
