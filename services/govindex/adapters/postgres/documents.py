"""Documents, versions and chunks: the system of record and the indexer's unit of work.

`PostgresChunkStore.transaction()` opens one transaction over one document. The indexer
claims the event, reads the document's state under its row lock, decides in a pure
function, and executes the decision's steps here; all of it commits together with the
outbox rows that announce it, so a crash leaves all of it or none of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, LiteralString

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from govindex.adapters.postgres.chunks import insert_chunks, insert_vectors, select_chunks
from govindex.adapters.postgres.tx import PostgresAdapter, claim_event, enqueue, transaction
from govindex.core.ports import (
    ApplyResult,
    DocumentKey,
    DocumentRow,
    DocumentState,
    OutboxMessage,
    TombstonePlan,
    VersionPlan,
)
from govindex.core.records import Chunk

NOBODY = "govindex:nobody"  # the ACL of a chunk every principal lost: matches no caller


def _key(key: DocumentKey) -> tuple[str, str, str]:
    return (key.tenant_id, key.source_id, key.doc_id)


@dataclass(frozen=True)
class _Locked:
    state: str
    last_sequence: int
    current_version_id: str | None
    content_hash: str | None
    parser: str | None
    parser_version: str | None


class PostgresDocumentTransaction:
    """The steps a decision is executed with, inside one open transaction."""

    def __init__(self, conn: AsyncConnection[Any]) -> None:
        self._conn = conn

    async def claim(self, consumer: str, event_id: str) -> bool:
        return await claim_event(self._conn, consumer, event_id)

    async def lock(self, key: DocumentKey) -> DocumentState | None:
        cur = self._conn.cursor(row_factory=class_row(_Locked))
        await cur.execute(
            "SELECT d.state, d.last_sequence, d.current_version_id, v.content_hash, v.parser, "
            " v.parser_version FROM documents d LEFT JOIN document_versions v "
            " ON v.version_id = d.current_version_id "
            "WHERE d.tenant_id = %s AND d.source_id = %s AND d.doc_id = %s FOR UPDATE OF d",
            _key(key),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        principals = await self._conn.execute(
            "SELECT DISTINCT a FROM chunks, unnest(acl) a WHERE tenant_id = %s AND source_id = "
            "%s AND doc_id = %s AND superseded_at IS NULL",
            _key(key),
        )
        return DocumentState(
            active=row.state == "active",
            last_sequence=row.last_sequence,
            current_version_id=row.current_version_id,
            current_content_hash=row.content_hash,
            current_parser=(row.parser, row.parser_version)
            if row.parser and row.parser_version
            else None,
            current_principals=frozenset(r[0] for r in await principals.fetchall()),
        )

    async def revoke_principals(
        self, key: DocumentKey, principals: Sequence[str], sequence: int
    ) -> None:
        """Every version's chunks lose the principals (re-stamped, not re-chunked); a chunk
        left with no principal gets one that matches no caller (fail closed)."""
        lost = list(principals)
        await self._conn.execute(
            "UPDATE chunks SET sequence = %s, acl = coalesce(nullif(ARRAY(SELECT a FROM "
            "unnest(acl) a WHERE a <> ALL(%s)), '{}'), ARRAY[%s]) WHERE tenant_id = %s AND "
            "source_id = %s AND doc_id = %s AND acl && %s",
            (sequence, lost, NOBODY, *_key(key), lost),
        )

    async def insert_version(self, plan: VersionPlan) -> ApplyResult:
        conn, key = self._conn, _key(plan.key)
        # System time: whatever was current stops being current now.
        await conn.execute(
            "UPDATE document_versions SET superseded_at = %s WHERE tenant_id = %s AND source_id "
            "= %s AND doc_id = %s AND superseded_at IS NULL",
            (plan.recorded_at, *key),
        )
        await conn.execute(
            "UPDATE chunks SET superseded_at = %s, sequence = %s WHERE tenant_id = %s AND "
            "source_id = %s AND doc_id = %s AND superseded_at IS NULL",
            (plan.recorded_at, plan.sequence, *key),
        )
        await conn.execute(
            "INSERT INTO document_versions (version_id, tenant_id, source_id, doc_id, "
            " version_sequence, sequence, source_version, content_hash, content, media_type, "
            " title, metadata, declared_valid_to, valid_from, valid_to, observed_at, "
            " recorded_at, parser, parser_version) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                plan.version_id,
                *key,
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
        await self._end_older_validity(plan, exclude=plan.version_id)
        await conn.execute(
            "UPDATE graph_edges SET superseded_at = %s WHERE tenant_id = %s AND source_id = %s "
            "AND doc_id = %s AND superseded_at IS NULL",
            (plan.recorded_at, *key),
        )
        await self._insert_edges(plan)
        await insert_chunks(conn, plan.chunks)
        if plan.embedder is not None and plan.vectors:
            dims = len(plan.vectors[0]) // 4
            ids = [c.chunk_id for c in plan.chunks]
            await insert_vectors(conn, ids, plan.vectors, plan.embedder, dims)
        return ApplyResult("indexed", plan.version_id, len(plan.chunks))

    async def update_metadata(self, plan: VersionPlan, version_id: str) -> ApplyResult:
        """Same content, same parser: re-stamp ACL, validity and source_version only."""
        access = plan.chunks[0] if plan.chunks else None
        await self._conn.execute(
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
        cur = await self._conn.execute(
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
        await self._conn.execute(
            "UPDATE graph_edges SET valid_from = %s, valid_to = %s, source_version = %s "
            "WHERE version_id = %s",
            (plan.valid_from, plan.valid_to, plan.source_version, version_id),
        )
        await self._end_older_validity(plan, exclude=version_id)
        return ApplyResult("metadata_updated", version_id, cur.rowcount)

    async def mark_active(self, plan: VersionPlan, version_id: str | None) -> None:
        await self._conn.execute(
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
                *_key(plan.key),
                plan.sequence,
                version_id,
                plan.source_version,
                plan.content_hash,
                plan.path,
                plan.recorded_at,
            ),
        )

    async def record_tombstone(self, plan: TombstonePlan) -> ApplyResult:
        """The document stops being current at `deleted_at` (valid time ends, system time
        supersedes); from now on nothing with a sequence ≤ the tombstone's applies."""
        conn, key = self._conn, _key(plan.key)
        ends = (
            "superseded_at = coalesce(superseded_at, %s), valid_to = CASE WHEN valid_to IS "
            "NULL OR valid_to > %s THEN %s ELSE valid_to END"
        )
        for table, extra in (
            ("document_versions", ""),
            ("chunks", ", sequence = %s"),
            ("graph_edges", ""),
        ):
            params: tuple[Any, ...] = (plan.recorded_at, plan.deleted_at, plan.deleted_at)
            if extra:
                params += (plan.sequence,)
            await conn.execute(
                sql.SQL("UPDATE {} SET ").format(sql.Identifier(table))
                + sql.SQL(
                    ends + extra + " WHERE tenant_id = %s AND source_id = %s AND doc_id = %s"
                ),
                (*params, *key),
            )
        version_ids, hashes, chunk_ids = await self._held(plan.key)
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
                version_ids,
                hashes,
                chunk_ids,
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
        return ApplyResult("tombstoned", None, len(chunk_ids))

    async def _held(self, key: DocumentKey) -> tuple[list[str], list[str], list[str]]:
        """What the tombstone keeps: version ids and hashes with content, and chunk ids."""
        cur = await self._conn.execute(
            "SELECT coalesce(array_agg(version_id ORDER BY version_sequence), '{}'), "
            " coalesce(array_agg(content_hash ORDER BY version_sequence), '{}'), "
            " coalesce((SELECT array_agg(chunk_id ORDER BY chunk_id) FROM chunks WHERE "
            "  tenant_id = %s AND source_id = %s AND doc_id = %s), '{}') "
            "FROM document_versions WHERE tenant_id = %s AND source_id = %s AND doc_id = %s "
            " AND content_purged_at IS NULL",
            _key(key) + _key(key),
        )
        row = await cur.fetchone()
        assert row is not None  # an aggregate always returns one row
        return list(row[0]), list(row[1]), list(row[2])

    async def enqueue(self, messages: Sequence[OutboxMessage]) -> None:
        await enqueue(self._conn, messages)

    async def _end_older_validity(self, plan: VersionPlan, *, exclude: str) -> None:
        """A newer version ends older ones' validity at its valid_from (DESIGN §3)."""
        where = sql.SQL(
            " WHERE tenant_id = %s AND source_id = %s AND doc_id = %s AND version_id <> %s "
            "AND (valid_to IS NULL OR valid_to > %s)"
        )
        params = (plan.valid_from, *_key(plan.key), exclude, plan.valid_from)
        restamp = sql.SQL(", sequence = {}").format(sql.Literal(plan.sequence))
        for table, extra in (
            ("document_versions", sql.SQL("")),
            ("chunks", restamp),  # the projection re-reads chunks by sequence
            ("graph_edges", sql.SQL("")),
        ):
            await self._conn.execute(
                sql.SQL("UPDATE {} SET valid_to = %s").format(sql.Identifier(table))
                + extra
                + where,
                params,
            )

    async def _insert_edges(self, plan: VersionPlan) -> None:
        evidence = plan.chunks[0].chunk_id if plan.chunks else None
        for edge in plan.edges:
            for entity_id, alias in (
                (edge.subject, edge.subject_alias),
                (edge.object, edge.object_alias),
            ):
                await self._conn.execute(
                    "INSERT INTO graph_entities (tenant_id, entity_id, kind, aliases) "
                    "VALUES (%s, %s, %s, ARRAY[%s]) ON CONFLICT (tenant_id, entity_id) DO UPDATE "
                    "SET aliases = (SELECT array_agg(DISTINCT a) FROM unnest("
                    " graph_entities.aliases || EXCLUDED.aliases) a)",
                    (plan.tenant_id, entity_id, entity_id.split(":", 1)[0], alias),
                )
            edge_id = hashlib.sha256(
                f"{edge.subject}\x00{edge.relation}\x00{edge.object}\x00{plan.version_id}".encode()
            ).hexdigest()[:32]
            await self._conn.execute(
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


_DOC_WHERE: LiteralString = "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s"


class PostgresChunkStore(PostgresAdapter):
    """Implements ChunkStore: opens document transactions and reads chunks back."""

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PostgresDocumentTransaction]:
        async with transaction(self._pool) as conn:
            yield PostgresDocumentTransaction(conn)

    async def chunks_changed_by(self, key: DocumentKey, sequence: int) -> list[Chunk]:
        """The chunk rows the event with `sequence` wrote: what OpenSearch must now reflect."""
        return await select_chunks(
            self._pool, _DOC_WHERE + " AND sequence = %s", (*_key(key), sequence)
        )

    async def chunks_of_version(self, version_id: str) -> list[Chunk]:
        return await select_chunks(
            self._pool, "WHERE version_id = %s ORDER BY ordinal", (version_id,)
        )

    async def last_sequence(self, key: DocumentKey) -> int:
        """The highest sequence the index applied to the document (a tombstone's included)."""
        return await self._count(
            "SELECT last_sequence FROM documents WHERE tenant_id = %s AND source_id = %s "
            "AND doc_id = %s",
            _key(key),
        )

    async def chunks_by_id(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        return await select_chunks(self._pool, "WHERE chunk_id = ANY(%s)", (list(chunk_ids),))

    async def iter_all_chunks(self, batch: int = 500) -> AsyncIterator[list[Chunk]]:
        """Every stored chunk, in batches: the input of a projection rebuild."""
        after = ""
        while True:
            rows = await select_chunks(
                self._pool, "WHERE chunk_id > %s ORDER BY chunk_id LIMIT %s", (after, batch)
            )
            if not rows:
                return
            yield rows
            after = rows[-1].chunk_id

    async def documents(self, source_id: str) -> list[DocumentRow]:
        return await self._typed(
            DocumentRow,
            "SELECT d.tenant_id, d.source_id, d.doc_id, d.state, d.last_sequence, "
            " d.source_version, d.content_hash, d.last_indexed_at, "
            " (SELECT count(*) FROM chunks c WHERE c.version_id = d.current_version_id) "
            "  AS chunk_count, v.valid_from, v.valid_to "
            "FROM documents d LEFT JOIN document_versions v "
            " ON v.version_id = d.current_version_id "
            "WHERE d.source_id = %s ORDER BY d.doc_id",
            (source_id,),
        )
