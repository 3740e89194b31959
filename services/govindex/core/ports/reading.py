"""The governed read path: the access a read is judged by, the snapshot it reads, the
embedder, the answer cache, the vectors and the audit of answered reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from govindex.core.ports.values import AuditEntry, AuditRow
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
