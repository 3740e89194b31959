"""What the purger fans out to: the purge sinks, and (besides the projection) the ports
behind them: tombstones and receipts, retention, caches and the lineage of derived
artifacts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from govindex.core.events import document_key
from govindex.core.ports.values import (
    DocumentKey,
    ExpiredVersion,
    Invalidated,
    OutboxMessage,
    TombstoneRow,
)


@dataclass(frozen=True)
class Deletion:
    """One document's deletion as every purge sink sees it."""

    key: DocumentKey
    sequence: int
    chunk_ids: Sequence[str]
    keeps_history: bool  # deletion_mode tombstone: content stays for as_of; copies still go
    reason: str  # why the source deleted it

    @property
    def doc_key(self) -> str:
        return document_key(self.key.tenant_id, self.key.source_id, self.key.doc_id)


@dataclass(frozen=True)
class Purged:
    """What one sink removed of one deletion, and what its read-back found left."""

    removed: int
    remaining: int
    detail: str = ""
    # Derived artifacts invalidated on the way, for the receipt to announce.
    invalidated: Sequence[Invalidated] = ()


class PurgeSink(Protocol):
    """One place a deleted document's content lives (Postgres, the index, caches, stored
    summaries), purged a batch at a time: a single deletion is a batch of one.

    `purge` removes what each deletion covers and reads it back in the same call (the
    read-back may decide a second pass, and belongs inside the same hold on the sink):
    one `Purged` per deletion, in order. Idempotent; `remaining > 0` means content
    survived and the purge must be retried, never reported done.
    """

    name: str  # as the receipt names it

    async def purge(self, deletions: Sequence[Deletion]) -> list[Purged]: ...


class PurgeStore(Protocol):
    """Tombstones, content removal with read-back, and receipts."""

    async def tombstone(self, key: DocumentKey, sequence: int) -> TombstoneRow | None: ...

    async def purge_content(self, key: DocumentKey, sequence: int) -> tuple[int, int]: ...

    async def content_remaining(self, key: DocumentKey, sequence: int) -> int: ...

    async def complete(
        self,
        consumer: str,
        event_id: str,
        tombstone: TombstoneRow,
        receipt: dict[str, Any],
        announce: Sequence[OutboxMessage],
    ) -> bool: ...

    async def note_failure(self, tombstone: TombstoneRow, error: str) -> None: ...

    async def mark_processed(self, consumer: str, event_id: str) -> None: ...


class RetentionStore(Protocol):
    async def expired_versions(
        self, tenant_id: str, source_id: str, superseded_before: datetime
    ) -> list[ExpiredVersion]: ...

    async def purge_version(self, version_id: str, receipt: dict[str, Any]) -> list[str]: ...


class TaggedCache(Protocol):
    """Cached results tagged with the documents, chunks and principals they hold."""

    async def evict_document(self, doc_key: str, chunk_ids: Iterable[str] = ()) -> int: ...

    async def evict_documents(self, doc_keys: Iterable[str]) -> int: ...

    async def evict_for(self, doc_key: str, principals: Iterable[str]) -> int: ...

    async def evict_chunks(self, chunk_ids: Iterable[str]) -> int: ...

    async def evict_source(self, tenant_id: str, source_id: str) -> int: ...

    async def count_document(self, doc_key: str, chunk_ids: Iterable[str] = ()) -> int: ...


class Lineage(Protocol):
    """Stored summaries and memories, and what they were built from."""

    async def invalidate(
        self,
        tenant_id: str,
        doc_key: str,
        chunk_ids: Sequence[str],
        reason: str,
        *,
        whole_document: bool = True,
    ) -> list[Invalidated]: ...

    async def remaining(self, tenant_id: str, doc_key: str, chunk_ids: Sequence[str]) -> int: ...


class LineageRegistry(Protocol):
    async def register_derived(
        self,
        kind: str,
        artifact_id: str,
        built_from: Sequence[str],
        location: str,
        *,
        tenant_id: str,
        text: str | None = None,
    ) -> None: ...


class PurgeReadBack(Protocol):
    """What `govindex verify-purge` reads back of a deletion in Postgres."""

    async def latest_tombstone(self, key: DocumentKey) -> TombstoneRow | None: ...

    async def remaining(
        self, key: DocumentKey, sequence: int, *, current_only: bool
    ) -> tuple[int, int]: ...
