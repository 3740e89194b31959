"""Postgres adapters: the source registry, the chunk store (system of record) and the outbox.

Every write that decides something (apply a version, record a tombstone, purge) runs in one
transaction together with "this consumer processed event X" and the outbox rows announcing
it, so a crash anywhere leaves either all of it or none of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, LiteralString

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from govindex.core.envelope import KafkaRecord
from govindex.core.errors import TransientError, UnknownSource
from govindex.core.records import Chunk, SourceManifest

CHUNK_COLUMNS: tuple[str, ...] = tuple(Chunk.model_fields)

Outcome = Literal["indexed", "metadata_updated", "tombstoned", "duplicate", "stale"]


@asynccontextmanager
async def transaction(pool: AsyncConnectionPool) -> AsyncIterator[AsyncConnection[Any]]:
    """A transaction whose driver connection errors surface as TransientError."""
    try:
        async with pool.connection() as conn, conn.transaction():
            yield conn
    except (psycopg.OperationalError, psycopg.errors.SerializationFailure) as exc:
        raise TransientError(f"PostgreSQL is unavailable: {exc}") from exc


@dataclass(frozen=True)
class OutboxMessage:
    topic: str
    record: KafkaRecord


async def _enqueue(conn: AsyncConnection[Any], messages: Sequence[OutboxMessage]) -> None:
    for message in messages:
        await conn.execute(
            "INSERT INTO outbox (topic, key, value, headers) VALUES (%s, %s, %s, %s)",
            (
                message.topic,
                (message.record.key or b"").decode(),
                message.record.value,
                Jsonb([[name, value.decode()] for name, value in message.record.headers]),
            ),
        )


async def _claim_event(conn: AsyncConnection[Any], consumer: str, event_id: str) -> bool:
    """Record that `consumer` processed `event_id`; False if it already had."""
    cur = await conn.execute(
        "INSERT INTO processed_events (consumer, event_id) VALUES (%s, %s) "
        "ON CONFLICT DO NOTHING RETURNING 1",
        (consumer, event_id),
    )
    return await cur.fetchone() is not None


class PostgresSourceRegistry:
    """Registered source manifests."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def register(self, manifest: SourceManifest) -> Literal["created", "updated"]:
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT tenant_id FROM sources WHERE source_id = %s", (manifest.source_id,)
            )
            row = await cur.fetchone()
            if row is not None and row[0] != manifest.tenant:
                raise UnknownSource(
                    f"source id {manifest.source_id!r} is already registered for tenant "
                    f"{row[0]!r}; source ids are global, pick another one"
                )
            await conn.execute(
                "INSERT INTO sources (tenant_id, source_id, manifest, enabled) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, source_id) DO UPDATE SET "
                "manifest = EXCLUDED.manifest, enabled = EXCLUDED.enabled, updated_at = now()",
                (
                    manifest.tenant,
                    manifest.source_id,
                    Jsonb(manifest.model_dump(mode="json")),
                    manifest.enabled,
                ),
            )
        return "created" if row is None else "updated"

    async def get(self, tenant_id: str, source_id: str) -> SourceManifest | None:
        return await self._one("WHERE tenant_id = %s AND source_id = %s", (tenant_id, source_id))

    async def set_enabled(self, source_id: str, enabled: bool) -> SourceManifest | None:
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "UPDATE sources SET enabled = %s, manifest = jsonb_set(manifest, '{enabled}', "
                "to_jsonb(%s::boolean)), updated_at = now() WHERE source_id = %s "
                "RETURNING manifest",
                (enabled, enabled, source_id),
            )
            row = await cur.fetchone()
        return SourceManifest.model_validate(row[0]) if row else None

    async def held_documents(self, source_id: str) -> dict[str, int]:
        """Documents the index holds as active for a source, with their last sequence."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT doc_id, last_sequence FROM documents WHERE source_id = %s "
                "AND state = 'active'",
                (source_id,),
            )
            return {row[0]: int(row[1]) for row in await cur.fetchall()}

    async def find_by_repository(self, repository: str) -> list[SourceManifest]:
        """Git sources whose manifest names this provider repository (any branch)."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT manifest FROM sources WHERE lower(manifest->'git'->>'repository') = "
                "lower(%s) ORDER BY source_id",
                (repository,),
            )
            rows = await cur.fetchall()
        return [SourceManifest.model_validate(row[0]) for row in rows]

    async def find(self, source_id: str) -> SourceManifest | None:
        """By source id alone (ids are global): what operator commands name."""
        return await self._one("WHERE source_id = %s", (source_id,))

    async def _one(self, where: LiteralString, params: tuple[str, ...]) -> SourceManifest | None:
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                sql.SQL("SELECT manifest FROM sources ") + sql.SQL(where), params
            )
            row = await cur.fetchone()
        return SourceManifest.model_validate(row[0]) if row else None


@dataclass(frozen=True)
class GraphEdge:
    subject: str
    relation: str
    object: str
    subject_alias: str
    object_alias: str


@dataclass(frozen=True)
class VersionPlan:
    """A new content revision (or a metadata-only change) the indexer wants to apply."""

    consumer: str
    event_id: str
    tenant_id: str
    source_id: str
    doc_id: str
    sequence: int
    source_version: str
    content_hash: str
    content: str
    media_type: str
    title: str | None
    path: str | None
    metadata: dict[str, Any]
    valid_from: datetime
    valid_to: datetime | None
    observed_at: datetime
    recorded_at: datetime
    parser: str
    parser_version: str
    chunks: Sequence[Chunk]
    version_id: str
    edges: Sequence[GraphEdge] = ()


@dataclass(frozen=True)
class TombstonePlan:
    consumer: str
    event_id: str
    tenant_id: str
    source_id: str
    doc_id: str
    sequence: int
    source_version: str
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


NOBODY = "govindex:nobody"  # the ACL of a chunk every principal lost: matches no caller


Announce = Callable[[ApplyResult], Sequence[OutboxMessage]]


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


class PostgresChunkStore:
    """Documents, versions, chunks and tombstones: the order guard lives here (DESIGN §5.1-2)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def apply_version(self, plan: VersionPlan, announce: Announce) -> ApplyResult:
        """Apply a create/update if its sequence is newer than anything seen for the document.

        Duplicates (same event id) and stale events (sequence <= the document's last
        sequence, a tombstone's included) change nothing. When the content hash equals the
        current version's, only metadata is updated: ACL, validity, source_version.
        """
        async with transaction(self._pool) as conn:
            if not await _claim_event(conn, plan.consumer, plan.event_id):
                return ApplyResult("duplicate")
            doc = await self._lock_document(conn, plan.tenant_id, plan.source_id, plan.doc_id)
            if doc is not None and plan.sequence <= doc["last_sequence"]:
                return ApplyResult("stale")
            current = None
            if doc is not None and doc["state"] == "active" and doc["current_version_id"]:
                cur = await conn.execute(
                    "SELECT version_id, content_hash, parser, parser_version "
                    "FROM document_versions WHERE version_id = %s",
                    (doc["current_version_id"],),
                )
                current = await cur.fetchone()
            revoked = await self._revoke_lost_principals(conn, plan)
            if (
                current is not None
                and current[1] == plan.content_hash
                and (current[2], current[3]) == (plan.parser, plan.parser_version)
            ):
                result = await self._update_metadata(conn, plan, current[0])
            else:
                result = await self._insert_version(conn, plan)
            await conn.execute(
                "INSERT INTO documents (tenant_id, source_id, doc_id, state, last_sequence, "
                " current_version_id, source_version, content_hash, path, last_indexed_at) "
                "VALUES (%s, %s, %s, 'active', %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE SET state = 'active', "
                " last_sequence = EXCLUDED.last_sequence, "
                " current_version_id = EXCLUDED.current_version_id, "
                " source_version = EXCLUDED.source_version, "
                " content_hash = EXCLUDED.content_hash, path = EXCLUDED.path, "
                " last_indexed_at = EXCLUDED.last_indexed_at",
                (
                    plan.tenant_id,
                    plan.source_id,
                    plan.doc_id,
                    plan.sequence,
                    result.version_id,
                    plan.source_version,
                    plan.content_hash,
                    plan.path,
                    plan.recorded_at,
                ),
            )
            if revoked:
                result = replace(result, revoked=tuple(revoked))
            await _enqueue(conn, announce(result))
            return result

    async def _revoke_lost_principals(
        self, conn: AsyncConnection[Any], plan: VersionPlan
    ) -> list[str]:
        """Principals in the document's current ACL that the new version drops lose access
        to every version, history included: the chunks are re-stamped (not re-chunked)."""
        if not plan.chunks:
            return []
        cur = await conn.execute(
            "SELECT DISTINCT a FROM chunks, unnest(acl) a WHERE tenant_id = %s "
            "AND source_id = %s AND doc_id = %s AND superseded_at IS NULL",
            (plan.tenant_id, plan.source_id, plan.doc_id),
        )
        lost = sorted({row[0] for row in await cur.fetchall()} - set(plan.chunks[0].acl))
        if lost:
            # A chunk left with no principal is visible to no one (fail closed).
            await conn.execute(
                "UPDATE chunks SET sequence = %s, acl = coalesce(nullif(ARRAY(SELECT a FROM "
                "unnest(acl) a WHERE a <> ALL(%s)), '{}'), ARRAY[%s]) WHERE tenant_id = %s "
                "AND source_id = %s AND doc_id = %s AND acl && %s",
                (plan.sequence, lost, NOBODY, plan.tenant_id, plan.source_id, plan.doc_id, lost),
            )
        return lost

    async def _lock_document(
        self, conn: AsyncConnection[Any], tenant_id: str, source_id: str, doc_id: str
    ) -> dict[str, Any] | None:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            "SELECT state, last_sequence, current_version_id FROM documents "
            "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s FOR UPDATE",
            (tenant_id, source_id, doc_id),
        )
        return await cur.fetchone()

    async def _update_metadata(
        self, conn: AsyncConnection[Any], plan: VersionPlan, version_id: str
    ) -> ApplyResult:
        access = plan.chunks[0] if plan.chunks else None
        await conn.execute(
            "UPDATE document_versions SET sequence = %s, source_version = %s, valid_from = %s, "
            " declared_valid_to = %s, valid_to = %s, observed_at = %s, metadata = %s, "
            " title = %s WHERE version_id = %s",
            (
                plan.sequence,
                plan.source_version,
                plan.valid_from,
                plan.valid_to,
                plan.valid_to,
                plan.observed_at,
                Jsonb(plan.metadata),
                plan.title,
                version_id,
            ),
        )
        cur = await conn.execute(
            "UPDATE chunks SET sequence = %s, source_version = %s, valid_from = %s, "
            " valid_to = %s, observed_at = %s, indexed_at = %s, acl = %s, required_scopes = %s,"
            " allowed_purposes = %s, classification = %s WHERE version_id = %s",
            (
                plan.sequence,
                plan.source_version,
                plan.valid_from,
                plan.valid_to,
                plan.observed_at,
                plan.recorded_at,
                list(access.acl) if access else [],
                list(access.required_scopes) if access else [],
                list(access.allowed_purposes) if access else [],
                access.classification if access else "",
                version_id,
            ),
        )
        await conn.execute(
            "UPDATE graph_edges SET valid_from = %s, valid_to = %s, source_version = %s "
            "WHERE version_id = %s",
            (plan.valid_from, plan.valid_to, plan.source_version, version_id),
        )
        await self._end_older_validity(conn, plan, exclude=version_id)
        return ApplyResult("metadata_updated", version_id, cur.rowcount)

    async def _end_older_validity(
        self, conn: AsyncConnection[Any], plan: VersionPlan, *, exclude: str
    ) -> None:
        """A newer version ends older ones' validity at its valid_from (DESIGN §3)."""
        params = (
            plan.valid_from,
            plan.tenant_id,
            plan.source_id,
            plan.doc_id,
            exclude,
            plan.valid_from,
        )
        where = (
            "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s AND version_id <> %s "
            "AND (valid_to IS NULL OR valid_to > %s)"
        )
        await conn.execute(
            sql.SQL("UPDATE document_versions SET valid_to = %s ") + sql.SQL(where), params
        )
        await conn.execute(
            sql.SQL("UPDATE chunks SET valid_to = %s, sequence = {} ").format(
                sql.Literal(plan.sequence)
            )
            + sql.SQL(where),
            params,
        )
        await conn.execute(
            sql.SQL("UPDATE graph_edges SET valid_to = %s ") + sql.SQL(where), params
        )

    async def _insert_version(self, conn: AsyncConnection[Any], plan: VersionPlan) -> ApplyResult:
        # System time: whatever was current stops being current now.
        await conn.execute(
            "UPDATE document_versions SET superseded_at = %s WHERE tenant_id = %s AND "
            "source_id = %s AND doc_id = %s AND superseded_at IS NULL",
            (plan.recorded_at, plan.tenant_id, plan.source_id, plan.doc_id),
        )
        await conn.execute(
            "UPDATE chunks SET superseded_at = %s, sequence = %s WHERE tenant_id = %s AND "
            "source_id = %s AND doc_id = %s AND superseded_at IS NULL",
            (plan.recorded_at, plan.sequence, plan.tenant_id, plan.source_id, plan.doc_id),
        )
        await conn.execute(
            "INSERT INTO document_versions (version_id, tenant_id, source_id, doc_id, "
            " version_sequence, sequence, source_version, content_hash, content, media_type, "
            " title, metadata, declared_valid_to, valid_from, valid_to, observed_at, "
            " recorded_at, parser, parser_version) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                plan.version_id,
                plan.tenant_id,
                plan.source_id,
                plan.doc_id,
                plan.sequence,
                plan.sequence,
                plan.source_version,
                plan.content_hash,
                plan.content,
                plan.media_type,
                plan.title,
                Jsonb(plan.metadata),
                plan.valid_to,
                plan.valid_from,
                plan.valid_to,
                plan.observed_at,
                plan.recorded_at,
                plan.parser,
                plan.parser_version,
            ),
        )
        await self._end_older_validity(conn, plan, exclude=plan.version_id)
        await conn.execute(
            "UPDATE graph_edges SET superseded_at = %s WHERE tenant_id = %s AND source_id = %s "
            "AND doc_id = %s AND superseded_at IS NULL",
            (plan.recorded_at, plan.tenant_id, plan.source_id, plan.doc_id),
        )
        await self._insert_edges(conn, plan)
        if plan.chunks:
            insert = sql.SQL("INSERT INTO chunks ({}) VALUES ({})").format(
                sql.SQL(", ").join(map(sql.Identifier, CHUNK_COLUMNS)),
                sql.SQL(", ").join(sql.Placeholder() * len(CHUNK_COLUMNS)),
            )
            async with conn.cursor() as cur:
                await cur.executemany(insert, [_chunk_row(chunk) for chunk in plan.chunks])
        return ApplyResult("indexed", plan.version_id, len(plan.chunks))

    async def _insert_edges(self, conn: AsyncConnection[Any], plan: VersionPlan) -> None:
        evidence = plan.chunks[0].chunk_id if plan.chunks else None
        for edge in plan.edges:
            for entity_id, alias in (
                (edge.subject, edge.subject_alias),
                (edge.object, edge.object_alias),
            ):
                await conn.execute(
                    "INSERT INTO graph_entities (tenant_id, entity_id, kind, aliases) "
                    "VALUES (%s, %s, %s, ARRAY[%s]) ON CONFLICT (tenant_id, entity_id) DO UPDATE "
                    "SET aliases = (SELECT array_agg(DISTINCT a) FROM unnest("
                    " graph_entities.aliases || EXCLUDED.aliases) a)",
                    (plan.tenant_id, entity_id, entity_id.split(":", 1)[0], alias),
                )
            edge_id = hashlib.sha256(
                f"{edge.subject}\x00{edge.relation}\x00{edge.object}\x00{plan.version_id}".encode()
            ).hexdigest()[:32]
            await conn.execute(
                "INSERT INTO graph_edges (edge_id, tenant_id, subject, relation, object, "
                " source_id, doc_id, version_id, version_sequence, source_version, "
                " evidence_chunk_id, valid_from, valid_to, recorded_at) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (edge_id) DO NOTHING",
                (
                    edge_id,
                    plan.tenant_id,
                    edge.subject,
                    edge.relation,
                    edge.object,
                    plan.source_id,
                    plan.doc_id,
                    plan.version_id,
                    plan.sequence,
                    plan.source_version,
                    evidence,
                    plan.valid_from,
                    plan.valid_to,
                    plan.recorded_at,
                ),
            )

    async def record_tombstone(self, plan: TombstonePlan, announce: Announce) -> ApplyResult:
        """Record a deletion at `sequence`; from now on nothing with sequence <= it applies.

        The document stops being current at `deleted_at` (valid time ends, system time
        supersedes). Content removal is the purger's job, announced through the outbox.
        """
        async with transaction(self._pool) as conn:
            if not await _claim_event(conn, plan.consumer, plan.event_id):
                return ApplyResult("duplicate")
            doc = await self._lock_document(conn, plan.tenant_id, plan.source_id, plan.doc_id)
            if doc is not None and plan.sequence <= doc["last_sequence"]:
                return ApplyResult("stale")
            key = (plan.tenant_id, plan.source_id, plan.doc_id)
            await conn.execute(
                "UPDATE document_versions SET superseded_at = coalesce(superseded_at, %s), "
                " valid_to = CASE WHEN valid_to IS NULL OR valid_to > %s THEN %s ELSE valid_to "
                " END WHERE tenant_id = %s AND source_id = %s AND doc_id = %s",
                (plan.recorded_at, plan.deleted_at, plan.deleted_at, *key),
            )
            await conn.execute(
                "UPDATE chunks SET superseded_at = coalesce(superseded_at, %s), sequence = %s, "
                " valid_to = CASE WHEN valid_to IS NULL OR valid_to > %s THEN %s ELSE valid_to "
                " END WHERE tenant_id = %s AND source_id = %s AND doc_id = %s",
                (plan.recorded_at, plan.sequence, plan.deleted_at, plan.deleted_at, *key),
            )
            await conn.execute(
                "UPDATE graph_edges SET superseded_at = coalesce(superseded_at, %s), "
                " valid_to = CASE WHEN valid_to IS NULL OR valid_to > %s THEN %s ELSE valid_to "
                " END WHERE tenant_id = %s AND source_id = %s AND doc_id = %s",
                (plan.recorded_at, plan.deleted_at, plan.deleted_at, *key),
            )
            cur = await conn.execute(
                "SELECT coalesce(array_agg(version_id ORDER BY version_sequence), '{}'), "
                " coalesce(array_agg(content_hash ORDER BY version_sequence), '{}') "
                "FROM document_versions WHERE tenant_id = %s AND source_id = %s AND doc_id = %s "
                " AND content_purged_at IS NULL",
                key,
            )
            versions = await cur.fetchone()
            cur = await conn.execute(
                "SELECT coalesce(array_agg(chunk_id ORDER BY chunk_id), '{}') FROM chunks "
                "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s",
                key,
            )
            chunk_ids = await cur.fetchone()
            assert versions is not None and chunk_ids is not None
            await conn.execute(
                "INSERT INTO tombstones (tenant_id, source_id, doc_id, sequence, event_id, "
                " source_version, reason, deletion_mode, deleted_at, recorded_at, version_ids, "
                " content_hashes, chunk_ids, purge_state) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'pending')",
                (
                    *key,
                    plan.sequence,
                    plan.event_id,
                    plan.source_version,
                    plan.reason,
                    plan.deletion_mode,
                    plan.deleted_at,
                    plan.recorded_at,
                    versions[0],
                    versions[1],
                    chunk_ids[0],
                ),
            )
            await conn.execute(
                "INSERT INTO documents (tenant_id, source_id, doc_id, state, last_sequence, "
                " current_version_id, source_version, content_hash, last_indexed_at) "
                "VALUES (%s, %s, %s, 'deleted', %s, NULL, %s, NULL, %s) "
                "ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE SET state = 'deleted', "
                " last_sequence = EXCLUDED.last_sequence, current_version_id = NULL, "
                " source_version = EXCLUDED.source_version, content_hash = NULL, "
                " last_indexed_at = EXCLUDED.last_indexed_at",
                (*key, plan.sequence, plan.source_version, plan.recorded_at),
            )
            result = ApplyResult("tombstoned", None, len(chunk_ids[0]))
            await _enqueue(conn, announce(result))
            return result

    async def chunks_changed_by(
        self, tenant_id: str, source_id: str, doc_id: str, sequence: int
    ) -> list[Chunk]:
        """The chunk rows the event with `sequence` wrote: what OpenSearch must now reflect."""
        return await self._select_chunks(
            "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s AND sequence = %s",
            (tenant_id, source_id, doc_id, sequence),
        )

    async def chunks_of_version(self, version_id: str) -> list[Chunk]:
        return await self._select_chunks("WHERE version_id = %s ORDER BY ordinal", (version_id,))

    async def chunks_by_id(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        return await self._select_chunks("WHERE chunk_id = ANY(%s)", (list(chunk_ids),))

    async def iter_all_chunks(self, batch: int = 500) -> AsyncIterator[list[Chunk]]:
        """Every stored chunk, in batches: the input of a projection rebuild."""
        after = ""
        while True:
            rows = await self._select_chunks(
                "WHERE chunk_id > %s ORDER BY chunk_id LIMIT %s", (after, batch)
            )
            if not rows:
                return
            yield rows
            after = rows[-1].chunk_id

    async def _select_chunks(self, where: LiteralString, params: Sequence[Any]) -> list[Chunk]:
        query = sql.SQL("SELECT {} FROM chunks ").format(
            sql.SQL(", ").join(map(sql.Identifier, CHUNK_COLUMNS))
        ) + sql.SQL(where)
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            try:
                await cur.execute(query, params)
                rows = await cur.fetchall()
            except psycopg.OperationalError as exc:
                raise TransientError(f"PostgreSQL is unavailable: {exc}") from exc
        return [Chunk.model_validate(row) for row in rows]

    async def current_versions(
        self, source_id: str | None, parser: str | None
    ) -> list[dict[str, Any]]:
        """Current versions of active documents that still hold content (reparse input)."""
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT d.tenant_id, d.source_id, d.doc_id, d.path, v.version_id, "
                " v.version_sequence, v.sequence, v.source_version, v.content_hash, v.content, "
                " v.media_type, v.valid_from, v.valid_to, v.observed_at, v.recorded_at, "
                " v.parser, v.parser_version FROM documents d JOIN document_versions v "
                " ON v.version_id = d.current_version_id WHERE d.state = 'active' "
                " AND v.content IS NOT NULL AND (%s::text IS NULL OR d.source_id = %s) "
                " AND (%s::text IS NULL OR v.parser = %s) ORDER BY d.source_id, d.doc_id",
                (source_id, source_id, parser, parser),
            )
            return await cur.fetchall()

    async def replace_version_chunks(
        self, version_id: str, expected: tuple[str, str], chunks: Sequence[Chunk]
    ) -> list[str] | None:
        """Swap a current version's chunks for a re-parse; return the replaced chunk ids.

        None when the version stopped being current (a newer event or a deletion got there
        first) or was re-parsed meanwhile: then nothing changes, so a reparse can never
        resurrect deleted content or overwrite newer content.
        """
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT v.parser, v.parser_version FROM documents d JOIN document_versions v "
                "ON v.version_id = d.current_version_id WHERE d.current_version_id = %s "
                "AND d.state = 'active' FOR UPDATE OF d",
                (version_id,),
            )
            row = await cur.fetchone()
            if row is None or (row[0], row[1]) != expected:
                return None
            cur = await conn.execute(
                "DELETE FROM chunks WHERE version_id = %s RETURNING chunk_id", (version_id,)
            )
            old = [r[0] for r in await cur.fetchall()]
            if chunks:
                insert = sql.SQL("INSERT INTO chunks ({}) VALUES ({})").format(
                    sql.SQL(", ").join(map(sql.Identifier, CHUNK_COLUMNS)),
                    sql.SQL(", ").join(sql.Placeholder() * len(CHUNK_COLUMNS)),
                )
                async with conn.cursor() as c:
                    await c.executemany(insert, [_chunk_row(chunk) for chunk in chunks])
                await conn.execute(
                    "UPDATE graph_edges SET evidence_chunk_id = %s WHERE version_id = %s",
                    (chunks[0].chunk_id, version_id),
                )
            await conn.execute(
                "UPDATE document_versions SET parser = %s, parser_version = %s "
                "WHERE version_id = %s",
                (
                    chunks[0].parser if chunks else expected[0],
                    chunks[0].parser_version if chunks else expected[1],
                    version_id,
                ),
            )
            return old

    async def blob(self, content_hash: str) -> str | None:
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT content FROM blobs WHERE content_hash = %s", (content_hash,)
            )
            row = await cur.fetchone()
        return str(row[0]) if row else None

    async def put_blob(self, content_hash: str, content: str) -> None:
        async with transaction(self._pool) as conn:
            await conn.execute(
                "INSERT INTO blobs (content_hash, content) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (content_hash, content),
            )

    async def documents(self, source_id: str) -> list[DocumentRow]:
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT d.tenant_id, d.source_id, d.doc_id, d.state, d.last_sequence, "
                " d.source_version, d.content_hash, d.last_indexed_at, "
                " (SELECT count(*) FROM chunks c WHERE c.version_id = d.current_version_id) "
                "  AS chunk_count, v.valid_from, v.valid_to "
                "FROM documents d LEFT JOIN document_versions v "
                " ON v.version_id = d.current_version_id "
                "WHERE d.source_id = %s ORDER BY d.doc_id",
                (source_id,),
            )
            rows = await cur.fetchall()
        return [DocumentRow(**row) for row in rows]


def _chunk_row(chunk: Chunk) -> list[Any]:
    data = chunk.model_dump()
    return [
        list(data[name]) if isinstance(data[name], tuple) else data[name] for name in CHUNK_COLUMNS
    ]


class PostgresOutbox:
    """Hands outbox rows to a publisher, oldest first; marks them once the broker has them."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def relay(self, publish: Any, limit: int = 200) -> int:
        """Publish up to `limit` pending rows with `await publish(topic, record)`.

        SKIP LOCKED lets several relays run without publishing a row twice at once; a crash
        after publishing but before marking re-publishes it, which consumers dedupe by id.
        """
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT id, topic, key, value, headers FROM outbox WHERE published_at IS NULL "
                "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                (limit,),
            )
            rows = await cur.fetchall()
            for _id, topic, key, value, headers in rows:
                record = KafkaRecord(
                    key=key.encode(),
                    value=bytes(value),
                    headers=[(name, str(v).encode()) for name, v in headers],
                )
                await publish(topic, record)
            if rows:
                await conn.execute(
                    "UPDATE outbox SET published_at = now() WHERE id = ANY(%s)",
                    ([row[0] for row in rows],),
                )
        return len(rows)


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


class PostgresPurgeStore:
    """What the purger needs from Postgres: tombstones, content removal, read-back, receipts."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def tombstone(
        self, tenant_id: str, source_id: str, doc_id: str, sequence: int
    ) -> TombstoneRow | None:
        async with transaction(self._pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT tenant_id, source_id, doc_id, sequence, event_id, deletion_mode, "
                " deleted_at, recorded_at, chunk_ids, purge_state, purge_attempts, purge_error "
                "FROM tombstones WHERE tenant_id = %s AND source_id = %s AND doc_id = %s "
                " AND sequence = %s",
                (tenant_id, source_id, doc_id, sequence),
            )
            row = await cur.fetchone()
        return TombstoneRow(**row) if row else None

    async def purge_content(
        self, tenant_id: str, source_id: str, doc_id: str, sequence: int
    ) -> tuple[int, int]:
        """Remove chunk text and raw content of every version <= sequence.

        Keeps the version rows' ids, hashes and times (what the tombstone refers to).
        Returns (chunks removed, versions emptied). Idempotent.
        """
        key = (tenant_id, source_id, doc_id, sequence)
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "DELETE FROM chunks WHERE tenant_id = %s AND source_id = %s AND doc_id = %s "
                " AND version_sequence <= %s",
                key,
            )
            chunks = cur.rowcount
            # Edges whose evidence is gone go with it (their ids stay in no receipt: they
            # are derived facts, rebuilt from a new version if the document returns).
            await conn.execute(
                "DELETE FROM graph_edges WHERE tenant_id = %s AND source_id = %s "
                " AND doc_id = %s AND version_sequence <= %s",
                key,
            )
            cur = await conn.execute(
                "UPDATE document_versions SET content = NULL, title = NULL, metadata = '{}', "
                " content_purged_at = now() WHERE tenant_id = %s AND source_id = %s "
                " AND doc_id = %s AND version_sequence <= %s AND content_purged_at IS NULL "
                "RETURNING content_hash",
                key,
            )
            hashes = [row[0] for row in await cur.fetchall()]
            if hashes:
                # A claim-check blob goes when no version that still has content uses it.
                await conn.execute(
                    "DELETE FROM blobs b WHERE b.content_hash = ANY(%s) AND NOT EXISTS ("
                    " SELECT 1 FROM document_versions v WHERE v.content_hash = b.content_hash"
                    " AND v.content IS NOT NULL)",
                    (hashes,),
                )
        return chunks, len(hashes)

    async def content_remaining(
        self, tenant_id: str, source_id: str, doc_id: str, sequence: int
    ) -> int:
        """Read-back: rows that still hold content of versions <= sequence."""
        key = (tenant_id, source_id, doc_id, sequence)
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT (SELECT count(*) FROM chunks WHERE tenant_id = %s AND source_id = %s "
                "  AND doc_id = %s AND version_sequence <= %s) + "
                " (SELECT count(*) FROM document_versions WHERE tenant_id = %s "
                "  AND source_id = %s AND doc_id = %s AND version_sequence <= %s "
                "  AND (content IS NOT NULL OR title IS NOT NULL))",
                key + key,
            )
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def complete(
        self,
        consumer: str,
        event_id: str,
        tombstone: TombstoneRow,
        receipt: dict[str, Any],
        announce: Sequence[OutboxMessage],
    ) -> bool:
        """Mark the tombstone purged, keep the receipt, announce it; False if already done."""
        async with transaction(self._pool) as conn:
            if not await _claim_event(conn, consumer, event_id):
                return False
            await conn.execute(
                "UPDATE tombstones SET purge_state = 'purged', purged_at = now(), "
                " purge_error = NULL WHERE tenant_id = %s AND source_id = %s AND doc_id = %s "
                " AND sequence = %s",
                (tombstone.tenant_id, tombstone.source_id, tombstone.doc_id, tombstone.sequence),
            )
            await conn.execute(
                "INSERT INTO purge_receipts (tenant_id, source_id, doc_id, sequence, receipt) "
                "VALUES (%s, %s, %s, %s, %s)",
                (
                    tombstone.tenant_id,
                    tombstone.source_id,
                    tombstone.doc_id,
                    tombstone.sequence,
                    Jsonb(receipt),
                ),
            )
            await _enqueue(conn, announce)
        return True

    async def expired_versions(
        self, tenant_id: str, source_id: str, superseded_before: datetime
    ) -> list[dict[str, Any]]:
        """Superseded versions past the source's history retention that still hold content."""
        async with transaction(self._pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT version_id, doc_id, version_sequence, superseded_at FROM "
                "document_versions WHERE tenant_id = %s AND source_id = %s "
                "AND superseded_at < %s AND content_purged_at IS NULL "
                "ORDER BY superseded_at",
                (tenant_id, source_id, superseded_before),
            )
            return await cur.fetchall()

    async def purge_version(self, version_id: str, receipt: dict[str, Any]) -> list[str]:
        """Remove one version's content (chunks, raw text, graph edges); keep ids and hashes
        and a receipt. Returns the removed chunk ids. Idempotent."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "DELETE FROM chunks WHERE version_id = %s RETURNING chunk_id", (version_id,)
            )
            removed = [row[0] for row in await cur.fetchall()]
            await conn.execute("DELETE FROM graph_edges WHERE version_id = %s", (version_id,))
            cur = await conn.execute(
                "UPDATE document_versions SET content = NULL, title = NULL, metadata = '{}', "
                " content_purged_at = now() WHERE version_id = %s AND content_purged_at IS NULL "
                "RETURNING tenant_id, source_id, doc_id, version_sequence",
                (version_id,),
            )
            row = await cur.fetchone()
            if row is not None:
                await conn.execute(
                    "INSERT INTO purge_receipts (tenant_id, source_id, doc_id, sequence, "
                    " receipt) VALUES (%s, %s, %s, %s, %s)",
                    (
                        row[0],
                        row[1],
                        row[2],
                        row[3],
                        Jsonb({**receipt, "version_id": version_id, "chunks": removed}),
                    ),
                )
        return removed

    async def receipt(self, tenant_id: str, doc_id: str, sequence: int) -> dict[str, Any] | None:
        """The purge receipt of a deletion, once the purge is complete."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT receipt FROM purge_receipts WHERE tenant_id = %s AND doc_id = %s "
                "AND sequence = %s",
                (tenant_id, doc_id, sequence),
            )
            row = await cur.fetchone()
        return dict(row[0]) if row else None

    async def note_failure(self, tombstone: TombstoneRow, error: str) -> None:
        async with transaction(self._pool) as conn:
            await conn.execute(
                "UPDATE tombstones SET purge_attempts = purge_attempts + 1, purge_error = %s "
                "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s AND sequence = %s",
                (
                    error[:2000],
                    tombstone.tenant_id,
                    tombstone.source_id,
                    tombstone.doc_id,
                    tombstone.sequence,
                ),
            )

    async def pending(self) -> list[TombstoneRow]:
        async with transaction(self._pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT tenant_id, source_id, doc_id, sequence, event_id, deletion_mode, "
                " deleted_at, recorded_at, chunk_ids, purge_state, purge_attempts, purge_error "
                "FROM tombstones WHERE purge_state <> 'purged' ORDER BY recorded_at"
            )
            rows = await cur.fetchall()
        return [TombstoneRow(**row) for row in rows]
