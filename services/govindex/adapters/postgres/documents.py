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

from govindex.adapters.postgres.chunks import copy_chunks, insert_vectors, select_chunks
from govindex.adapters.postgres.tx import (
    PostgresAdapter,
    claim_event,
    connection,
    enqueue,
    transaction,
)
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


def lock_id(key: DocumentKey) -> int:
    """The advisory lock of a document: 64 bits of a hash of its key (signed, as Postgres
    wants). A collision only makes two documents wait for each other."""
    digest = hashlib.blake2b(
        f"{key.tenant_id}\x00{key.source_id}\x00{key.doc_id}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def _columns(keys: Sequence[DocumentKey]) -> tuple[list[str], list[str], list[str]]:
    return (
        [k.tenant_id for k in keys],
        [k.source_id for k in keys],
        [k.doc_id for k in keys],
    )


@dataclass(frozen=True)
class _Locked:
    tenant_id: str
    source_id: str
    doc_id: str
    state: str
    last_sequence: int
    current_version_id: str | None
    content_hash: str | None
    parser: str | None
    parser_version: str | None
    principals: list[str]


class PostgresDocumentTransaction:
    """The steps a decision is executed with, inside one open transaction."""

    def __init__(self, conn: AsyncConnection[Any]) -> None:
        self._conn = conn

    async def claim(self, consumer: str, event_id: str) -> bool:
        return event_id in await self.claim_all(consumer, [event_id])

    async def claim_all(self, consumer: str, event_ids: Sequence[str]) -> set[str]:
        """Claim every event id at once; returns those this consumer had not processed."""
        if len(event_ids) == 1:
            return (
                {event_ids[0]} if await claim_event(self._conn, consumer, event_ids[0]) else set()
            )
        cur = await self._conn.execute(
            "INSERT INTO processed_events (consumer, event_id) "
            "SELECT %s, e FROM unnest(%s::text[]) e ON CONFLICT DO NOTHING RETURNING event_id",
            (consumer, list(dict.fromkeys(event_ids))),
        )
        return {row[0] for row in await cur.fetchall()}

    async def lock(self, key: DocumentKey) -> DocumentState | None:
        return (await self.lock_all([key])).get(key)

    async def lock_all(self, keys: Sequence[DocumentKey]) -> dict[DocumentKey, DocumentState]:
        """Lock the documents, existing or not, and read their states.

        The lock is a transaction-scoped advisory lock on a hash of the key, taken in one
        sorted order by every writer: it covers a document that has no row yet (a row lock
        cannot), so two creates of one document serialize, and two batches never deadlock.
        """
        distinct = sorted(set(keys), key=lock_id)
        await self._conn.execute(
            "SELECT pg_advisory_xact_lock(k) FROM unnest(%s::bigint[]) AS k",
            ([lock_id(k) for k in distinct],),
        )
        return await self.states(distinct)

    async def states(self, keys: Sequence[DocumentKey]) -> dict[DocumentKey, DocumentState]:
        """What the index holds for each document (the caller holds their locks)."""
        cur = self._conn.cursor(row_factory=class_row(_Locked))
        await cur.execute(
            "SELECT d.tenant_id, d.source_id, d.doc_id, d.state, d.last_sequence, "
            " d.current_version_id, v.content_hash, v.parser, v.parser_version, "
            " ARRAY(SELECT DISTINCT a FROM chunks c, unnest(c.acl) a WHERE c.tenant_id = "
            "  d.tenant_id AND c.source_id = d.source_id AND c.doc_id = d.doc_id AND "
            "  c.superseded_at IS NULL) AS principals "
            "FROM unnest(%s::text[], %s::text[], %s::text[]) AS k(t, s, d_id) "
            "JOIN documents d ON d.tenant_id = k.t AND d.source_id = k.s AND d.doc_id = k.d_id "
            "LEFT JOIN document_versions v ON v.version_id = d.current_version_id",
            _columns(keys),
        )
        return {
            DocumentKey(row.tenant_id, row.source_id, row.doc_id): DocumentState(
                active=row.state == "active",
                last_sequence=row.last_sequence,
                current_version_id=row.current_version_id,
                current_content_hash=row.content_hash,
                current_parser=(row.parser, row.parser_version)
                if row.parser and row.parser_version
                else None,
                current_principals=frozenset(row.principals),
            )
            for row in await cur.fetchall()
        }

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
        return (await self.insert_versions([plan]))[0]

    async def insert_versions(self, plans: Sequence[VersionPlan]) -> list[ApplyResult]:
        """New versions of distinct documents, set-based: a few statements for the lot.

        Whatever was current stops being current (system time), older versions' validity
        ends at the new valid_from (valid time), and the rows are written with COPY.
        """
        if not plans:
            return []
        if len({p.key for p in plans}) != len(plans):
            raise ValueError("insert_versions takes at most one plan per document")
        conn = self._conn
        keys = _columns([p.key for p in plans])
        at = [p.recorded_at for p in plans]
        seq = [p.sequence for p in plans]
        await conn.execute(
            "UPDATE document_versions x SET superseded_at = u.at FROM unnest(%s::text[], "
            " %s::text[], %s::text[], %s::timestamptz[]) AS u(t, s, d, at) "
            "WHERE x.tenant_id = u.t AND x.source_id = u.s AND x.doc_id = u.d "
            " AND x.superseded_at IS NULL",
            (*keys, at),
        )
        await conn.execute(
            "UPDATE chunks x SET superseded_at = u.at, sequence = u.q FROM unnest(%s::text[], "
            " %s::text[], %s::text[], %s::timestamptz[], %s::bigint[]) AS u(t, s, d, at, q) "
            "WHERE x.tenant_id = u.t AND x.source_id = u.s AND x.doc_id = u.d "
            " AND x.superseded_at IS NULL",
            (*keys, at, seq),
        )
        await conn.execute(
            "UPDATE graph_edges x SET superseded_at = u.at FROM unnest(%s::text[], "
            " %s::text[], %s::text[], %s::timestamptz[]) AS u(t, s, d, at) "
            "WHERE x.tenant_id = u.t AND x.source_id = u.s AND x.doc_id = u.d "
            " AND x.superseded_at IS NULL",
            (*keys, at),
        )
        async with (
            conn.cursor() as cur,
            cur.copy(
                "COPY document_versions (version_id, tenant_id, source_id, doc_id, "
                " version_sequence, sequence, source_version, content_hash, content, "
                " media_type, title, metadata, declared_valid_to, valid_from, valid_to, "
                " observed_at, recorded_at, parser, parser_version) FROM STDIN"
            ) as copy,
        ):
            for plan in plans:
                await copy.write_row(
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
                    )
                )
        await self._end_older_validity(plans)
        await self._insert_edges(plans)
        await copy_chunks(conn, [c for plan in plans for c in plan.chunks])
        embedded = [p for p in plans if p.embedder is not None and p.vectors]
        for embedder in {p.embedder for p in embedded}:
            assert embedder is not None
            same = [p for p in embedded if p.embedder == embedder]
            await insert_vectors(
                conn,
                [c.chunk_id for p in same for c in p.chunks],
                [v for p in same for v in p.vectors],
                embedder,
                len(same[0].vectors[0]) // 4,
            )
        return [ApplyResult("indexed", p.version_id, len(p.chunks)) for p in plans]

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
        await self._end_older_validity([plan], keep=version_id)
        return ApplyResult("metadata_updated", version_id, cur.rowcount)

    async def mark_active(self, plan: VersionPlan, version_id: str | None) -> None:
        await self.mark_active_all([(plan, version_id)])

    async def mark_active_all(self, applied: Sequence[tuple[VersionPlan, str | None]]) -> None:
        """The documents' current state, one statement for the lot.

        Guarded by sequence: a row already at a higher sequence is left as it is, so this
        upsert can never move a document backwards, whoever else writes it.
        """
        if not applied:
            return
        plans = [plan for plan, _ in applied]
        await self._conn.execute(
            "INSERT INTO documents (tenant_id, source_id, doc_id, state, last_sequence, "
            " current_version_id, source_version, content_hash, path, last_indexed_at) "
            "SELECT t, s, d, 'active', q, v, sv, h, p, at FROM unnest(%s::text[], %s::text[], "
            " %s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], "
            " %s::timestamptz[]) AS u(t, s, d, q, v, sv, h, p, at) "
            "ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE SET state = 'active', "
            " last_sequence = EXCLUDED.last_sequence, "
            " current_version_id = EXCLUDED.current_version_id, "
            " source_version = EXCLUDED.source_version, "
            " content_hash = EXCLUDED.content_hash, path = EXCLUDED.path, "
            " last_indexed_at = EXCLUDED.last_indexed_at "
            "WHERE documents.last_sequence < EXCLUDED.last_sequence",
            (
                *_columns([p.key for p in plans]),
                [p.sequence for p in plans],
                [version_id for _, version_id in applied],
                [p.source_version for p in plans],
                [p.content_hash for p in plans],
                [p.path for p in plans],
                [p.recorded_at for p in plans],
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
            " last_indexed_at = EXCLUDED.last_indexed_at "
            "WHERE documents.last_sequence < EXCLUDED.last_sequence",
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

    async def _end_older_validity(
        self, plans: Sequence[VersionPlan], *, keep: str | None = None
    ) -> None:
        """A newer version ends older ones' validity at its valid_from (DESIGN §3).

        `keep`: the version a metadata-only change re-stamps (otherwise each plan's own).
        """
        params = (
            *_columns([p.key for p in plans]),
            [keep or p.version_id for p in plans],
            [p.valid_from for p in plans],
            [p.sequence for p in plans],
        )
        for table, extra in (
            ("document_versions", ""),
            ("chunks", ", sequence = u.q"),  # the projection re-reads chunks by sequence
            ("graph_edges", ""),
        ):
            await self._conn.execute(
                sql.SQL("UPDATE {} x SET valid_to = u.vf").format(sql.Identifier(table))
                + sql.SQL(extra)
                + sql.SQL(
                    " FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], "
                    " %s::timestamptz[], %s::bigint[]) AS u(t, s, d, v, vf, q) "
                    "WHERE x.tenant_id = u.t AND x.source_id = u.s AND x.doc_id = u.d "
                    " AND x.version_id <> u.v AND (x.valid_to IS NULL OR x.valid_to > u.vf)"
                ),
                params,
            )

    async def _insert_edges(self, plans: Sequence[VersionPlan]) -> None:
        entities: dict[tuple[str, str], set[str]] = {}
        edges: list[tuple[Any, ...]] = []
        for plan in plans:
            evidence = plan.chunks[0].chunk_id if plan.chunks else None
            for edge in plan.edges:
                for entity_id, alias in (
                    (edge.subject, edge.subject_alias),
                    (edge.object, edge.object_alias),
                ):
                    entities.setdefault((plan.tenant_id, entity_id), set()).add(alias)
                edge_id = hashlib.sha256(
                    f"{edge.subject}\x00{edge.relation}\x00{edge.object}\x00{plan.version_id}".encode()
                ).hexdigest()[:32]
                edges.append(
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
                    )
                )
        if not edges:
            return
        async with self._conn.cursor() as cur:
            await cur.executemany(  # sorted: concurrent batches lock entity rows in one order
                "INSERT INTO graph_entities (tenant_id, entity_id, kind, aliases) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, entity_id) DO UPDATE "
                "SET aliases = (SELECT array_agg(DISTINCT a) FROM unnest("
                " graph_entities.aliases || EXCLUDED.aliases) a)",
                [
                    (tenant, entity, entity.split(":", 1)[0], sorted(aliases))
                    for (tenant, entity), aliases in sorted(entities.items())
                ],
            )
            await cur.executemany(
                "INSERT INTO graph_edges (edge_id, tenant_id, subject, relation, object, "
                " source_id, doc_id, version_id, version_sequence, source_version, "
                " evidence_chunk_id, valid_from, valid_to, recorded_at) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (edge_id) DO NOTHING",
                edges,
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

    async def chunks_changed_by_many(
        self, changes: Sequence[tuple[DocumentKey, int]]
    ) -> list[Chunk]:
        """The chunk rows a batch of events wrote, read back in one query."""
        if not changes:
            return []
        return await select_chunks(
            self._pool,
            "JOIN unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) AS u(t, s, d, q) "
            " ON chunks.tenant_id = u.t AND chunks.source_id = u.s AND chunks.doc_id = u.d "
            " AND chunks.sequence = u.q",
            (*_columns([key for key, _ in changes]), [seq for _, seq in changes]),
        )

    async def peek(
        self, consumer: str, event_ids: Sequence[str], keys: Sequence[DocumentKey]
    ) -> tuple[set[str], dict[DocumentKey, DocumentState]]:
        """Which of the ids `consumer` processed, and the documents' states; read-only."""
        async with connection(self._pool) as conn:
            cur = await conn.execute(
                "SELECT event_id FROM processed_events WHERE consumer = %s AND event_id = ANY(%s)",
                (consumer, list(event_ids)),
            )
            processed = {row[0] for row in await cur.fetchall()}
            states = await PostgresDocumentTransaction(conn).states(list(dict.fromkeys(keys)))
        return processed, states

    async def chunks_present(self, chunk_ids: Sequence[str]) -> set[str]:
        """Which of these chunks Postgres still holds (a purge deletes the rows)."""
        if not chunk_ids:
            return set()
        rows = await self._rows(
            "SELECT chunk_id FROM chunks WHERE chunk_id = ANY(%s)", (list(chunk_ids),)
        )
        return {row[0] for row in rows}

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

    async def iter_all_chunks(
        self, batch: int = 500, after: str = ""
    ) -> AsyncIterator[list[Chunk]]:
        """Every stored chunk (after the chunk id `after`), in batches of chunk id order:
        the input of a projection rebuild."""
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
