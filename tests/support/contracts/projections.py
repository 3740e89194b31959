"""Contracts of the copies: the search projection and the tagged cache."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from govindex.core.ports import PurgeIndex, PurgeTarget, SearchIndex, TaggedCache
from tests.support.builders import TEXT, manifest, unique, version_plan


class SearchIndexContract:
    """SearchIndex and PurgeIndex: writes ordered by sequence, deletions that stick.

    Needs the fixture `index`.
    """

    async def test_an_older_write_never_replaces_a_newer_one(self, index: Any) -> None:
        projection: SearchIndex = index
        source = manifest(unique("s"), unique("t"))
        newer = version_plan(source, "x.md", 3, TEXT)
        older = [c.model_copy(update={"sequence": 2, "text": "stale"}) for c in newer.chunks]
        await projection.upsert(newer.chunks)
        await projection.upsert(older)  # a 409 for each: a no-op, not an error
        await index.refresh()

        async def hits(text: str) -> list[str]:
            found = await index.search(
                text=text,
                tenant_id=source.tenant,
                principals=["group:eng"],
                purpose=None,
                as_of=newer.valid_from,
                size=10,
            )
            return [hit["chunk_id"] for hit in found]

        assert set(await hits("replica")) <= {c.chunk_id for c in newer.chunks}
        assert await hits("replica") and await hits("stale") == []

    async def test_a_deleted_document_is_gone_and_counted_as_gone(self, index: Any) -> None:
        purge: PurgeIndex = index
        source = manifest(unique("s"), unique("t"))
        plan = version_plan(source, "y.md", 1, TEXT)
        await index.upsert(plan.chunks)
        ids: Sequence[str] = [c.chunk_id for c in plan.chunks]
        key = (source.tenant, source.source_id, "y.md")
        deleted = PurgeTarget(*key, 1, ids)
        every_version = PurgeTarget(*key, 2**63 - 1, ids)  # as far as a sequence goes
        assert await purge.count_documents([every_version], refresh=True) == [len(ids)]
        [removed] = await purge.delete_documents([deleted])
        await purge.sweep_documents([deleted])
        assert removed >= len(ids)
        assert await purge.count_documents([deleted], refresh=True) == [0]
        await index.upsert(plan.chunks)  # a replay of the old write cannot bring it back
        assert await purge.count_documents([every_version], refresh=True) == [0]


class TaggedCacheContract:
    """TaggedCache

    Needs the fixture `cache`.
    """

    async def test_eviction_by_document_chunk_and_principal(self, cache: Any) -> None:
        tagged: TaggedCache = cache
        doc, other = unique("t/s/doc"), unique("t/s/other")
        await cache.put("by-doc", "a", documents=[doc], principals=["group:sre"])
        await cache.put("by-chunk", "b", documents=[], chunks=["c" * 32])
        await cache.put("for-eng", "c", documents=[doc], principals=["group:eng"])
        await cache.put("unrelated", "d", documents=[other])
        assert await tagged.count_document(doc, ["c" * 32]) == 3
        assert await tagged.evict_for(doc, ["group:sre"]) == 1
        assert await cache.get("by-doc") is None and await cache.get("for-eng") == b"c"
        assert await tagged.evict_chunks(["c" * 32]) == 1
        assert await tagged.evict_document(doc) == 1
        assert await tagged.count_document(doc) == 0
        assert await cache.get("unrelated") == b"d"
