"""The OpenSearch sink: a batch's chunks out of every generation, one sweep and read-back."""

from __future__ import annotations

from collections.abc import Sequence

from govindex.core.ports import Deletion, Purged, PurgeIndex, PurgeTarget

VALIDITY_ENDED = "deletion_mode tombstone: validity ended at deleted_at"


class IndexSink:
    name = "opensearch"

    def __init__(self, index: PurgeIndex) -> None:
        self._index = index

    async def purge(self, deletions: Sequence[Deletion]) -> list[Purged]:
        """Versioned deletes of the known ids, then a read-back; only if it finds chunks
        the tombstones did not know does a sweep by query run, and a second read-back.
        All of it ahead of the documents lanes' bulks (`first`)."""
        results = [Purged(removed=0, remaining=0, detail=VALIDITY_ENDED)] * len(deletions)
        purging = [n for n, d in enumerate(deletions) if not d.keeps_history]
        if not purging:
            return results
        targets = [_target(deletions[n]) for n in purging]
        async with self._index.first():
            removed = await self._index.delete_documents(targets)
            # The deletes return after a refresh (`wait_for`) that shows every earlier
            # write; with no known id to delete there was none, so the read-back refreshes.
            unrefreshed = not any(t.chunk_ids for t in targets)
            remaining = await self._index.count_documents(targets, refresh=unrefreshed)
            if any(remaining):
                await self._index.sweep_documents(targets)
                remaining = await self._index.count_documents(targets)
        for n, gone, left in zip(purging, removed, remaining, strict=True):
            results[n] = Purged(removed=gone, remaining=left)
        return results


def _target(deletion: Deletion) -> PurgeTarget:
    key = deletion.key
    return PurgeTarget(
        key.tenant_id, key.source_id, key.doc_id, deletion.sequence, deletion.chunk_ids
    )
