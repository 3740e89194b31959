"""Every port (a Protocol per capability) and the plain records that cross them.

Handlers depend on these, never on an adapter; adapters implement them and are wired only
by the composition root (`govindex.runtime.composition`). Records here are frozen
dataclasses: they carry decided facts between layers, they are not wire models.
(Over 400 lines on purpose: one file a newcomer reads to know every seam of the system.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from govindex.core.envelope import KafkaRecord
from govindex.core.records import Chunk, SourceManifest

Outcome = Literal["indexed", "metadata_updated", "tombstoned", "duplicate", "stale"]


# --- records crossing the ports -------------------------------------------------------


@dataclass(frozen=True)
class DocumentKey:
    tenant_id: str
    source_id: str
    doc_id: str


@dataclass(frozen=True)
class DocumentState:
    """What the index holds for a document, read under its row lock."""

    active: bool
    last_sequence: int
    current_version_id: str | None
    current_content_hash: str | None
    current_parser: tuple[str, str] | None
    current_principals: frozenset[str]


@dataclass(frozen=True)
class OutboxMessage:
    """An event to publish after the transaction that decided it commits.

    With `awaits`, the event stays pending (and is re-published) until that consumer has
    processed or dead-lettered it: the broker is a transport, never the only copy.
    """

    topic: str
    record: KafkaRecord
    awaits: str | None = None
    tenant_id: str | None = None
    source_id: str | None = None
    content_hash: str | None = None  # a claim-check blob the event needs until it settles
    sequence: int | None = None

    @property
    def event_id(self) -> str | None:
        value = dict(self.record.headers).get("ce_id")
        return value.decode() if value is not None else None


@dataclass(frozen=True)
class GraphEdge:
    subject: str
    relation: str
    object: str
    subject_alias: str
    object_alias: str


@dataclass(frozen=True)
class _AboutOneDocument:
    """Which document, and the event (sequence, source_version) a plan comes from."""

    tenant_id: str
    source_id: str
    doc_id: str
    sequence: int
    source_version: str

    @property
    def key(self) -> DocumentKey:
        return DocumentKey(self.tenant_id, self.source_id, self.doc_id)


@dataclass(frozen=True)
class _VersionStamps:
    """When a version is valid, when it was seen and recorded, which parser cut it."""

    valid_from: datetime
    valid_to: datetime | None
    observed_at: datetime
    recorded_at: datetime
    parser: str
    parser_version: str


@dataclass(frozen=True)
class VersionPlan(_AboutOneDocument, _VersionStamps):
    """A decided content revision (or metadata-only change), ready to execute."""

    content_hash: str
    content: str
    media_type: str
    title: str | None
    path: str | None
    metadata: dict[str, Any]
    chunks: Sequence[Chunk]
    version_id: str
    edges: Sequence[GraphEdge] = ()
    # One unit-length float32 vector per chunk (same order), and the model that made them.
    vectors: Sequence[bytes] = ()
    embedder: tuple[str, str] | None = None


@dataclass(frozen=True)
class TombstonePlan(_AboutOneDocument):
    event_id: str
    reason: str
    deletion_mode: str
    deleted_at: datetime
    recorded_at: datetime


@dataclass(frozen=True)
class ApplyResult:
    outcome: Outcome
    version_id: str | None = None
    chunk_count: int = 0
    revoked: tuple[str, ...] = ()


@dataclass(frozen=True)
class BulkResult:
    """What one bulk write did: how many chunks the index took (a 409, "already newer", is
    neither taken nor rejected), and the chunks it refused for good, with the reason."""

    taken: int
    rejected: Mapping[str, str]


@dataclass(frozen=True)
class DocumentRow:
    tenant_id: str
    source_id: str
    doc_id: str
    state: str
    last_sequence: int
    source_version: str
    content_hash: str | None
    last_indexed_at: datetime
    chunk_count: int
    valid_from: datetime | None
    valid_to: datetime | None


@dataclass(frozen=True)
class TombstoneRow:
    tenant_id: str
    source_id: str
    doc_id: str
    sequence: int
    event_id: str
    deletion_mode: str
    deleted_at: datetime
    recorded_at: datetime
    chunk_ids: list[str]
    purge_state: str
    purge_attempts: int
    purge_error: str | None


@dataclass(frozen=True)
class StoredVersion(_VersionStamps):
    """A current version with its raw content: what `reparse` re-chunks."""

    tenant_id: str
    source_id: str
    doc_id: str
    path: str | None
    version_id: str
    version_sequence: int
    sequence: int
    source_version: str
    content_hash: str
    content: str
    media_type: str


@dataclass(frozen=True)
class ExpiredVersion:
    version_id: str
    doc_id: str
    version_sequence: int
    superseded_at: datetime


@dataclass(frozen=True)
class Invalidated:
    kind: str
    artifact_id: str
    location: str


# --- sources --------------------------------------------------------------------------


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

    async def index_state(self, source_id: str) -> tuple[dict[str, str], dict[str, int]]: ...


# --- the indexer's unit of work -------------------------------------------------------


class DocumentTransaction(Protocol):
    """One Postgres transaction over a batch of documents: the order guard's home
    (DESIGN §5.1-2).

    A handler claims the events, locks the documents (existing or not) in one sorted order
    and reads their states, decides (pure), then executes the steps of its decisions;
    everything commits together with the outbox messages that announce it, or nothing does.
    The single-document verbs are the set-based ones for one document.
    """

    async def claim(self, consumer: str, event_id: str) -> bool: ...

    async def claim_all(self, consumer: str, event_ids: Sequence[str]) -> set[str]: ...

    async def lock(self, key: DocumentKey) -> DocumentState | None: ...

    async def lock_all(self, keys: Sequence[DocumentKey]) -> dict[DocumentKey, DocumentState]: ...

    async def states(self, keys: Sequence[DocumentKey]) -> dict[DocumentKey, DocumentState]: ...

    async def insert_versions(self, plans: Sequence[VersionPlan]) -> list[ApplyResult]: ...

    async def mark_active_all(self, applied: Sequence[tuple[VersionPlan, str | None]]) -> None: ...

    async def revoke_principals(
        self, key: DocumentKey, principals: Sequence[str], sequence: int
    ) -> None: ...

    async def insert_version(self, plan: VersionPlan) -> ApplyResult: ...

    async def update_metadata(self, plan: VersionPlan, version_id: str) -> ApplyResult: ...

    async def mark_active(self, plan: VersionPlan, version_id: str | None) -> None: ...

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
    """Content-addressed claim-check blobs (DESIGN §4); written by ConnectorTransaction."""

    async def blob(self, content_hash: str) -> str | None: ...


class VersionStore(Protocol):
    """Stored versions for re-chunking (reparse)."""

    async def current_versions(
        self, source_id: str | None, parser: str | None
    ) -> list[StoredVersion]: ...

    async def replace_version_chunks(
        self, version_id: str, expected: tuple[str, str], chunks: Sequence[Chunk]
    ) -> list[str] | None: ...


# --- the search projection ------------------------------------------------------------


class SearchIndex(Protocol):
    """The OpenSearch projection: written by sequence (external versioning)."""

    async def upsert(self, chunks: Sequence[Chunk], *, index: str | None = None) -> int: ...

    async def project(
        self, chunks: Sequence[Chunk], *, building: Sequence[tuple[int, str]] = ()
    ) -> BulkResult:
        """Write to the live generation and to every (generation, index) being built."""
        ...

    async def delete_chunks(self, chunk_ids: Sequence[str]) -> int: ...


class GenerationRegistry(Protocol):
    """Which index generations a rebuild is filling: writers must reach them too."""

    async def building(self) -> list[tuple[int, str]]: ...


@dataclass(frozen=True)
class PurgeTarget:
    """One document's content to remove from the index: versions up to a sequence."""

    tenant_id: str
    source_id: str
    doc_id: str
    up_to_sequence: int
    chunk_ids: Sequence[str]


class PurgeIndex(Protocol):
    def first(self) -> AbstractAsyncContextManager[None]:
        """While held, this process sends no new bulk write: a purge's requests go ahead of
        the documents lanes' traffic instead of queueing behind it."""
        ...

    async def delete_documents(self, targets: Sequence[PurgeTarget]) -> list[int]: ...

    async def sweep_documents(self, targets: Sequence[PurgeTarget]) -> int: ...

    async def count_documents(self, targets: Sequence[PurgeTarget]) -> list[int]: ...

    async def delete_document(
        self,
        tenant_id: str,
        source_id: str,
        doc_id: str,
        up_to_sequence: int,
        chunk_ids: Sequence[str],
    ) -> int: ...

    async def count_document(
        self, tenant_id: str, source_id: str, doc_id: str, up_to_sequence: int | None = None
    ) -> int: ...

    async def count_current(self, tenant_id: str, source_id: str, doc_id: str) -> int: ...


class CandidateIndex(Protocol):
    """Lexical candidates for the read path, filtered inside the query."""

    async def search(
        self,
        *,
        text: str,
        tenant_id: str,
        principals: Sequence[str],
        purpose: str | None,
        as_of: datetime,
        size: int,
    ) -> list[dict[str, Any]]: ...


# --- the purger -----------------------------------------------------------------------


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


# --- connectors -----------------------------------------------------------------------


class IngestState(Protocol):
    """What a connector last emitted; it writes through a ConnectorTransaction."""

    async def known(self, tenant_id: str, source_id: str) -> dict[str, str]: ...


class ConnectorState(IngestState, Protocol):
    """What a connector that reconciles against the index also needs."""

    async def raise_sequences(
        self, tenant_id: str, source_id: str, at_least: dict[str, int]
    ) -> None: ...

    async def forget(self, tenant_id: str, source_id: str, doc_ids: Sequence[str]) -> None: ...

    async def assume_present(
        self, tenant_id: str, source_id: str, doc_ids: Sequence[str]
    ) -> None: ...

    async def set_checkpoint(self, tenant_id: str, source_id: str, position: str) -> None: ...

    async def checkpoint(self, tenant_id: str, source_id: str) -> str | None: ...


class CdcLedger(Protocol):
    """The CDC connector's per-document positions (written through a ConnectorTransaction)."""

    async def ledger(self, tenant_id: str, source_id: str, doc_id: str) -> tuple[int, bool]: ...

    async def live_documents(self, tenant_id: str, source_id: str, prefix: str) -> list[str]: ...

    async def truncated_at(self, tenant_id: str, source_id: str) -> int: ...


class Deliveries(Protocol):
    """Webhook deliveries already handled."""

    async def seen(self, provider: str, delivery_id: str) -> bool: ...

    async def record(self, provider: str, delivery_id: str, sources: str) -> None: ...


class ConnectorTransaction(Protocol):
    """A connector's decision and the events that announce it, committed together."""

    async def reserve_sequences(
        self, tenant_id: str, source_id: str, doc_ids: Sequence[str]
    ) -> dict[str, int]: ...

    async def raise_sequences(
        self, tenant_id: str, source_id: str, at_least: dict[str, int]
    ) -> None: ...

    async def record(
        self,
        tenant_id: str,
        source_id: str,
        seen: dict[str, str | None],
        *,
        at: Mapping[str, int] | None = None,
    ) -> None: ...

    async def record_position(
        self, tenant_id: str, source_id: str, doc_id: str, sequence: int, *, deleted: bool
    ) -> None: ...

    async def record_truncate(self, tenant_id: str, source_id: str, sequence: int) -> None: ...

    async def put_blob(self, content_hash: str, content: str) -> None: ...

    async def put_blobs(self, blobs: Sequence[tuple[str, str]]) -> None: ...

    async def emit(self, messages: Sequence[OutboxMessage]) -> None: ...


class Emitter(Protocol):
    """Opens connector transactions (durable emission through the outbox)."""

    def transaction(self) -> AbstractAsyncContextManager[ConnectorTransaction]: ...


class Outbox(Protocol):
    """Publishes committed outbox rows and keeps awaited events pending until applied."""

    async def relay(
        self,
        publish: Callable[[str, Sequence[KafkaRecord]], Awaitable[None]],
        limit: int = 1000,
    ) -> int: ...

    async def wait_for_rows(self, timeout_s: float) -> bool: ...

    async def close_listener(self) -> None: ...

    async def settle(self) -> int: ...

    async def republish(self, after_s: float | None) -> int: ...

    async def prune(self, older_than_s: float) -> int: ...


class DeadLetterLog(Protocol):
    """Dead-lettered events count as settled: never re-published."""

    async def dead_lettered(self, consumer: str, event_id: str, reason: str) -> None: ...


class EventPublisher(Protocol):
    """Puts records on a topic and waits for the broker's acknowledgement."""

    async def publish(self, topic: str, record: KafkaRecord) -> None: ...

    async def publish_many(self, topic: str, records: Sequence[KafkaRecord]) -> None: ...


# --- the read path --------------------------------------------------------------------


@dataclass(frozen=True)
class ReadAccess:
    """Who asks, why, and for which moment: every channel filters by this inside its query.

    `as_of` is valid time (what was true then); `known_at`, when given, is system time (what
    the index held then).
    """

    tenant_id: str
    principals: tuple[str, ...]
    scopes: tuple[str, ...]
    purpose: str
    as_of: datetime
    known_at: datetime | None = None


@dataclass(frozen=True)
class ReadFilters:
    """Narrowing a caller asks for; applied inside every channel's query with the access."""

    sources: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    path_prefix: str | None = None


@dataclass(frozen=True)
class ChunkFacts:
    """A chunk with everything the gates need, read in the request's snapshot."""

    chunk: Chunk
    source_enabled: bool
    purge_tombstoned: bool  # a purge-mode tombstone newer than this version is recorded
    tombstoned: bool  # any tombstone newer than this version (history kept or not)
    content_purged: bool
    superseded: bool  # a newer version of the document exists (or it was deleted)


@dataclass(frozen=True)
class GraphReach:
    """A chunk reached by walking edges from a seed; `path` names the edges walked."""

    chunk_id: str
    path: tuple[str, ...]


@dataclass(frozen=True)
class EdgeFact:
    """An edge valid at as_of whose evidence chunk passed the gates (for conflict flags)."""

    subject: str
    relation: str
    object: str
    doc_key: str
    evidence_chunk_id: str


class ReadSnapshot(Protocol):
    """One consistent, read-only view of Postgres for one request."""

    async def fulltext(
        self, access: ReadAccess, filters: ReadFilters, text: str, limit: int
    ) -> list[str]: ...

    async def structured(
        self, access: ReadAccess, filters: ReadFilters, keys: Sequence[str], limit: int
    ) -> list[str]: ...

    async def dense(
        self, access: ReadAccess, filters: ReadFilters, text: str, limit: int
    ) -> list[str]: ...

    async def graph(
        self,
        access: ReadAccess,
        filters: ReadFilters,
        seeds: Sequence[str],
        relations: Sequence[str],
        hops: int,
        limit: int,
    ) -> list[GraphReach]: ...

    async def facts(self, chunk_ids: Sequence[str]) -> dict[str, ChunkFacts]: ...

    async def edges_about(self, access: ReadAccess, doc_keys: Sequence[str]) -> list[EdgeFact]: ...

    async def generation(self) -> int | None: ...

    async def doc_sequences(self, doc_keys: Sequence[str]) -> dict[str, int]: ...


class ReadStore(Protocol):
    def snapshot(self) -> AbstractAsyncContextManager[ReadSnapshot]: ...

    async def still_current(self, doc_sequences: Mapping[str, int]) -> bool:
        """True if every document is still at that sequence, with its source enabled."""
        ...


class Embedder(Protocol):
    """A text embedding model: unit-length float32 vectors, stamped by name and version."""

    name: str
    version: str
    dims: int

    def embed(self, texts: Sequence[str]) -> list[bytes]: ...


class ReadCache(Protocol):
    """Cached responses, tagged with the documents, chunks and principals they hold."""

    async def get(self, name: str) -> bytes | None: ...

    async def put(
        self,
        name: str,
        value: bytes | str,
        *,
        documents: Iterable[str],
        chunks: Iterable[str] = (),
        principals: Iterable[str] = (),
        ttl_s: int = 3600,
    ) -> None: ...

    async def delete(self, name: str) -> None: ...


class VectorStore(Protocol):
    """Chunk vectors in the system of record: what lacks one, and storing them."""

    async def missing(self, embedder: str, version: str, limit: int) -> list[tuple[str, str]]: ...

    async def put(
        self, chunk_ids: Sequence[str], vectors: Sequence[bytes], embedder: tuple[str, str]
    ) -> None: ...

    async def count(self, embedder: str, version: str) -> tuple[int, int]: ...
