"""The Redis sink: cached results tagged with the document or any of its chunks."""

from __future__ import annotations

from collections.abc import Sequence

from govindex.core.ports import Deletion, Purged, TaggedCache


class CacheSink:
    """Evicted in both deletion modes: what an entry holds was current content, and it no
    longer is."""

    name = "redis"

    def __init__(self, cache: TaggedCache | None) -> None:
        self._cache = cache

    async def purge(self, deletions: Sequence[Deletion]) -> list[Purged]:
        if self._cache is None:
            return [Purged(removed=0, remaining=0, detail="no cache configured")] * len(deletions)
        results = []
        for deletion in deletions:
            evicted = await self._cache.evict_document(deletion.doc_key, deletion.chunk_ids)
            left = await self._cache.count_document(deletion.doc_key, deletion.chunk_ids)
            results.append(Purged(removed=evicted, remaining=left))
        return results
