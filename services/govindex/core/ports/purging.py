"""What the purger fans out to besides the projection: tombstones and receipts, retention,
caches and the lineage of derived artifacts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from govindex.core.ports.values import (
    DocumentKey,
    ExpiredVersion,
    Invalidated,
    OutboxMessage,
    TombstoneRow,
)


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
