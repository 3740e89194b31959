"""The governed read path: the access a read is judged by, the snapshot it reads, the
embedder, the answer cache, the vectors and the audit of answered reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from govindex.core.graph_templates import GraphRoute
from govindex.core.ports.values import (
    AuditEntry,
    AuditRow,
    KeptItem,
    OutboxMessage,
    StoredItem,
    StoredPackRow,
)
from govindex.core.records import Chunk


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
    event_from: datetime | None = None  # event_time at or after
    event_to: datetime | None = None  # event_time before


@dataclass(frozen=True)
class ChunkFacts:
    """A chunk with everything the gates need, read in the request's snapshot."""

    chunk: Chunk
    source_enabled: bool
    purge_tombstoned: bool  # a purge-mode tombstone newer than this version is recorded
    tombstoned: bool  # any tombstone newer than this version (history kept or not)
    content_purged: bool
    superseded: bool  # a newer version of the document exists (or it was deleted)
    title: str | None = None  # the document version's title (gone once purged)
    web_url: str | None = None  # the source manifest's link template (core.links)
    stale_source: bool = False  # its source last synced longer ago than its refresh_sla


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


@dataclass(frozen=True)
class EdgeRow:
    """An edge valid at as_of (and held at known_at) touching one entity, with the chunk
    that states it; the caller gates that chunk before anything of the edge leaves."""

    edge_id: str
    subject: str
    relation: str
    object: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    source_version: str
    evidence_chunk_id: str
    event_time: datetime | None = None
    confidence: float = 1.0
    method: str = "frontmatter"
    unresolved: bool = False  # the other end is an id no fact entry declares


class ReadSnapshot(Protocol):
    """One consistent, read-only view of Postgres for one request."""

    async def fulltext(
        self, access: ReadAccess, filters: ReadFilters, text: str, limit: int
    ) -> list[str]: ...

    async def structured(
        self, access: ReadAccess, filters: ReadFilters, keys: Sequence[str], limit: int
    ) -> list[str]: ...

    async def outside_valid_time(
        self, access: ReadAccess, filters: ReadFilters, text: str, limit: int
    ) -> list[str]: ...

    async def relations(
        self,
        access: ReadAccess,
        entity: str,
        relation: str | None,
        outgoing: bool,
        incoming: bool,
        limit: int,
        other_type: str | None = None,
    ) -> list[EdgeRow]: ...

    async def with_evidence(
        self, access: ReadAccess, filters: ReadFilters, text: str, kinds: Sequence[str], limit: int
    ) -> dict[str, list[str]]: ...

    async def replacements(
        self, access: ReadAccess, left_out: Sequence[Chunk]
    ) -> dict[str, ChunkFacts]: ...

    async def dense(
        self, access: ReadAccess, filters: ReadFilters, text: str, limit: int
    ) -> list[str]: ...

    async def graph(
        self,
        access: ReadAccess,
        filters: ReadFilters,
        seeds: Sequence[str],
        routes: Sequence[GraphRoute],
        limit: int,
        *,
        statement_timeout_ms: int | None = None,
    ) -> list[GraphReach]:
        """Chunks reached by walking `routes` from the entities the seeds name, each edge
        only if its evidence is admissible; every statement of the walk under
        `statement_timeout_ms` (None: the server's), raising GraphWalkStopped past it,
        with the snapshot still usable."""
        ...

    async def facts(self, chunk_ids: Sequence[str]) -> dict[str, ChunkFacts]: ...

    async def facts_around(
        self, chunk_ids: Sequence[str], *, parent: bool, neighbours: int
    ) -> dict[str, ChunkFacts]:
        """In one statement, the facts of every chunk these chunks may be hydrated with: each
        one's parent (if `parent`) and up to `neighbours` chunks along its previous and next
        links. Ungated: the caller passes each one through the same gates as a hit."""
        ...

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

    async def missing_after(
        self, embedder: str, version: str, after: str, limit: int
    ) -> list[tuple[str, str]]: ...

    async def switch_generation(self, embedder: str, version: str) -> bool: ...

    async def claim_backlog(self, limit: int, lease_s: float) -> list[tuple[str, str]]:
        """(chunk id, text) of the oldest queued chunks no one else holds, now held by the
        caller for `lease_s` (then another may take them: the caller died or hangs)."""
        ...

    async def settle(
        self, chunk_ids: Sequence[str], made: Mapping[tuple[str, str], Sequence[bytes]]
    ) -> None:
        """Store claimed chunks' vectors, by model (of the chunks still there), and take
        the chunks off the backlog, in one transaction."""
        ...

    async def release(self, chunk_ids: Sequence[str]) -> None:
        """Give claimed chunks back to the backlog (they were not embedded)."""
        ...

    async def backlog_size(self) -> int: ...


class ReadAudit(Protocol):
    """Answered reads, one record each, kept for `audit_retention_days`."""

    async def record(self, entry: AuditEntry) -> None:
        """Keep one entry (its own transaction). Raises TransientError when Postgres is
        unavailable, RejectedByStore when the entry breaks the table's constraints (an
        endpoint outside `AUDIT_ENDPOINTS`, a status outside 100-599)."""
        ...

    async def entries(
        self,
        *,
        tenant: str | None = None,
        credential: str | None = None,
        principal: str | None = None,
        endpoint: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
    ) -> list[AuditRow]:
        """Entries matching every filter given, newest first: `credential` by name,
        `principal` among the principals, `since <= at < until`. At most `limit` rows, and
        never more than `AUDIT_LIST_MAX`; ValueError if `limit` is under 1."""
        ...

    async def prune(self, older_than_days: int) -> int:
        """Delete entries recorded more than `older_than_days` days ago (at least 1); the
        number deleted."""
        ...


class PackStore(Protocol):
    """Packs kept under an idempotency key: the row, its items in lineage, its audit record
    and its `pack.built` event, written in one transaction."""

    async def keyed(
        self, tenant_id: str, credential_name: str, idempotency_key: str
    ) -> StoredPackRow | None:
        """The pack kept under this key for this credential and tenant, if any."""
        ...

    async def keep(
        self,
        row: StoredPackRow,
        items: Sequence[KeptItem],
        audit: AuditEntry,
        event: OutboxMessage,
    ) -> bool:
        """Keep the pack, register its items in lineage, record its audit entry and queue
        its event, all or nothing. False (nothing written) when another request kept a pack
        under the same key first."""
        ...

    async def load(
        self, tenant_id: str, pack_id: str
    ) -> tuple[StoredPackRow, list[StoredItem]] | None:
        """A kept pack and its items in order (their text None once purged); None when
        there is no such pack for this tenant or it has expired."""
        ...

    async def expire(self) -> int:
        """Delete kept packs past their expiry, and their items' text; how many."""
        ...
