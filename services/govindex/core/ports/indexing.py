"""What the indexer's side stands on: the source registry, the unit of work over a batch
of documents (the order guard's home), chunks, blobs and stored versions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Literal, Protocol

from govindex.core.ports.values import (
    ApplyResult,
    DocumentKey,
    DocumentState,
    OutboxMessage,
    StoredVersion,
    TombstonePlan,
    VersionPlan,
)
from govindex.core.records import Chunk, SourceManifest


class SourceRegistry(Protocol):
    """Registered source manifests (source ids are global; tenants own them)."""

    async def get(self, tenant_id: str, source_id: str) -> SourceManifest | None: ...

    async def find(self, source_id: str) -> SourceManifest | None: ...

    async def register(self, manifest: SourceManifest) -> Literal["created", "updated"]: ...

    async def set_enabled(self, source_id: str, enabled: bool) -> SourceManifest | None: ...


class SourceCatalog(Protocol):
    """Queries across sources: by repository, by kind, and what the index holds of one."""

    async def all(self) -> list[SourceManifest]: ...

    async def find_by_repository(self, repository: str) -> list[SourceManifest]: ...

    async def cdc_sources(self) -> list[SourceManifest]: ...

    async def held_documents(self, source_id: str) -> dict[str, int]: ...

    async def document_sequence(self, tenant_id: str, source_id: str, doc_id: str) -> int | None:
        """The last sequence the index applied to one document, in any state (None: never
        held)."""
        ...

    async def index_state(self, source_id: str) -> tuple[dict[str, str], dict[str, int]]: ...


# --- the indexer's unit of work -------------------------------------------------------


class DocumentTransaction(Protocol):
    """One Postgres transaction over a batch of documents: the order guard's home
    (docs/design/guarantees.md#order-guard).

    A handler claims the events, locks the documents (existing or not) in one sorted order
    and reads their states, decides (pure), then executes the steps of its decisions;
    everything commits together with the outbox messages that announce it, or nothing does.
    A single document is a batch of one.
    """

    async def claim_all(self, consumer: str, event_ids: Sequence[str]) -> set[str]: ...

    async def lock_all(self, keys: Sequence[DocumentKey]) -> dict[DocumentKey, DocumentState]: ...

    async def states(self, keys: Sequence[DocumentKey]) -> dict[DocumentKey, DocumentState]: ...

    async def insert_versions(self, plans: Sequence[VersionPlan]) -> list[ApplyResult]: ...

    async def mark_active_all(self, applied: Sequence[tuple[VersionPlan, str | None]]) -> None: ...

    async def revoke_principals(
        self, key: DocumentKey, principals: Sequence[str], sequence: int
    ) -> None: ...

    async def update_metadata(self, plan: VersionPlan, version_id: str) -> ApplyResult: ...

    async def record_tombstone(self, plan: TombstonePlan) -> ApplyResult: ...

    async def enqueue(self, messages: Sequence[OutboxMessage]) -> None: ...


class ChunkStore(Protocol):
    """The system of record for chunks (Postgres)."""

    def transaction(self) -> AbstractAsyncContextManager[DocumentTransaction]: ...

    async def chunks_changed_by(self, key: DocumentKey, sequence: int) -> list[Chunk]: ...

    async def chunks_changed_by_many(
        self, changes: Sequence[tuple[DocumentKey, int]]
    ) -> list[Chunk]: ...

    async def chunks_present(self, chunk_ids: Sequence[str]) -> set[str]: ...

    async def chunks_by_id(self, chunk_ids: Sequence[str]) -> list[Chunk]: ...

    async def chunks_of_version(self, version_id: str) -> list[Chunk]: ...

    async def last_sequence(self, key: DocumentKey) -> int: ...

    async def peek(
        self, consumer: str, event_ids: Sequence[str], keys: Sequence[DocumentKey]
    ) -> tuple[set[str], dict[DocumentKey, DocumentState]]:
        """Read-only, no lock: which of the ids `consumer` processed, and the documents'
        states (what a batch of those events would find now)."""
        ...

    def iter_all_chunks(self, batch: int = 500, after: str = "") -> AsyncIterator[list[Chunk]]: ...


class BlobStore(Protocol):
    """Content-addressed claim-check blobs (docs/design/events.md); written by
    ConnectorTransaction."""

    async def blob(self, content_hash: str) -> str | None: ...


class VersionStore(Protocol):
    """Stored versions for re-chunking (reparse)."""

    async def current_versions(
        self, source_id: str | None, parser: str | None
    ) -> list[StoredVersion]: ...

    async def replace_version_chunks(
        self,
        version_id: str,
        expected: tuple[str, str],
        chunks: Sequence[Chunk],
        content: str | None = None,
    ) -> list[str] | None: ...
