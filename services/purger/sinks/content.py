"""The Postgres sink: chunk text and raw content of every version up to the deletion."""

from __future__ import annotations

from collections.abc import Sequence

from govindex.core.ports import Deletion, Purged, PurgeStore

HISTORY_KEPT = "deletion_mode tombstone: history kept, document no longer current"


class ContentSink:
    """Keeps the version rows' ids, hashes and times (what the tombstone refers to)."""

    name = "postgres"

    def __init__(self, store: PurgeStore) -> None:
        self._store = store

    async def purge(self, deletions: Sequence[Deletion]) -> list[Purged]:
        return [await self._purge(deletion) for deletion in deletions]

    async def _purge(self, deletion: Deletion) -> Purged:
        if deletion.keeps_history:
            return Purged(removed=0, remaining=0, detail=HISTORY_KEPT)
        chunks, versions = await self._store.purge_content(deletion.key, deletion.sequence)
        left = await self._store.content_remaining(deletion.key, deletion.sequence)
        detail = f"{chunks} chunks deleted, {versions} versions emptied"
        return Purged(removed=chunks + versions, remaining=left, detail=detail)
