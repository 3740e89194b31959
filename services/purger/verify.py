"""`govindex verify-purge`: re-check every sink for the latest deletion of a document."""

from __future__ import annotations

from dataclasses import dataclass, field

from govindex.core.errors import GovindexError
from govindex.core.events import document_key
from govindex.core.ports import (
    DocumentKey,
    Lineage,
    PurgeIndex,
    PurgeReadBack,
    PurgeTarget,
    TaggedCache,
)
from govindex.core.records import DeletionMode


@dataclass
class Verification:
    sequence: int
    mode: str
    state: str
    sinks: list[tuple[str, int, str]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.state == "purged" and all(left == 0 for _, left, _ in self.sinks)


async def verify_purge(
    key: DocumentKey,
    *,
    store: PurgeReadBack,
    index: PurgeIndex,
    cache: TaggedCache | None,
    lineage: Lineage,
) -> Verification:
    """What each sink still holds of the latest deletion of a document.

    Purge mode: nothing of versions ≤ the tombstone's sequence may remain. Tombstone mode
    keeps history, so only what is still current counts.
    """
    tombstone = await store.latest_tombstone(key)
    if tombstone is None:
        raise GovindexError(f"{key.source_id}/{key.doc_id} has no recorded deletion")
    sequence, mode = tombstone.sequence, tombstone.deletion_mode
    report = Verification(sequence, mode, tombstone.purge_state)
    purge = mode == DeletionMode.TOMBSTONE_AND_PURGE.value
    chunks_left, versions_left = await store.remaining(key, sequence, current_only=not purge)
    report.sinks.append(
        (
            "postgres",
            chunks_left + (versions_left if purge else 0),
            "chunks and raw content" if purge else "current chunks",
        )
    )
    ids = (key.tenant_id, key.source_id, key.doc_id)
    target = PurgeTarget(*ids, sequence, tombstone.chunk_ids)
    [os_left] = await index.count_documents([target], current_only=not purge, refresh=True)
    report.sinks.append(("opensearch", os_left, "every generation"))
    doc = document_key(*ids)
    if cache is not None:
        left = await cache.count_document(doc, tombstone.chunk_ids)
        report.sinks.append(("redis", left, "entries tagged with the document or its chunks"))
    left = await lineage.remaining(key.tenant_id, doc, tombstone.chunk_ids)
    report.sinks.append(("summaries", left, "stored summaries still holding text"))
    return report
