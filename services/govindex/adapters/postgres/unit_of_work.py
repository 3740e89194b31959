"""The indexer's unit of work in Postgres: one transaction over a batch of documents.

The indexer claims the events, locks the documents and reads their states, decides in pure
functions, and executes the decisions' steps here; all of it commits together with the
outbox rows that announce it, so a crash leaves all of it or none of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from govindex.adapters.postgres.arrays import int_array, text_array, time_array
from govindex.adapters.postgres.chunks import copy_chunks
from govindex.adapters.postgres.document_keys import key_columns, key_params, lock_id
from govindex.adapters.postgres.tx import claim_event, enqueue
from govindex.adapters.postgres.version_rows import (
    continue_restated,
    copy_versions,
    end_older_validity,
    insert_edges,
    insert_plan_vectors,
    supersede_current,
)
from govindex.core.ports import (
    ApplyResult,
    DocumentKey,
    DocumentState,
    OutboxMessage,
    TombstonePlan,
    VersionPlan,
)

NOBODY = "govindex:nobody"  # the ACL of a chunk every principal lost: matches no caller


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
            key_columns(keys),
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
            (sequence, lost, NOBODY, *key_params(key), lost),
        )

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
        await supersede_current(conn, plans)
        await copy_versions(conn, plans)
        await end_older_validity(conn, plans)
        await insert_edges(conn, plans)
        await copy_chunks(conn, [c for plan in plans for c in plan.chunks])
        await continue_restated(conn, plans)
        await insert_plan_vectors(conn, plans)
        return [ApplyResult("indexed", p.version_id, len(p.chunks)) for p in plans]

    async def update_metadata(self, plan: VersionPlan, version_id: str) -> ApplyResult:
        """Same content, same parser: re-stamp ACL, validity, source_version and evidence
        only. Evidence follows the manifest's evidence_rules, which may have changed since:
        the same content cut by the same parser gives the same ordinals, so each kept chunk
        takes the evidence of the planned chunk at its ordinal."""
        access = plan.chunks[0] if plan.chunks else None
        evidence = {str(c.ordinal): list(c.evidence) for c in plan.chunks}
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
            " allowed_purposes = %s, classification = %s, evidence = ARRAY(SELECT e FROM "
            " jsonb_array_elements_text(%s::jsonb -> ordinal::text) WITH ORDINALITY AS x(e, n)"
            " ORDER BY n) WHERE version_id = %s",
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
                Jsonb(evidence),
                version_id,
            ),
        )
        await self._conn.execute(
            "UPDATE graph_edges SET valid_from = %s, valid_to = %s, source_version = %s "
            "WHERE version_id = %s",
            (plan.valid_from, plan.valid_to, plan.source_version, version_id),
        )
        await end_older_validity(self._conn, [plan], keep=version_id)
        return ApplyResult("metadata_updated", version_id, cur.rowcount)

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
                *key_columns([p.key for p in plans]),
                int_array(p.sequence for p in plans),
                text_array(version_id for _, version_id in applied),
                text_array(p.source_version for p in plans),
                text_array(p.content_hash for p in plans),
                text_array(p.path for p in plans),
                time_array(p.recorded_at for p in plans),
            ),
        )

    async def record_tombstone(self, plan: TombstonePlan) -> ApplyResult:
        """The document stops being current at `deleted_at` (valid time ends, system time
        supersedes); from now on nothing with a sequence ≤ the tombstone's applies."""
        conn, key = self._conn, key_params(plan.key)
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
            key_params(key) + key_params(key),
        )
        row = await cur.fetchone()
        assert row is not None  # an aggregate always returns one row
        return list(row[0]), list(row[1]), list(row[2])

    async def enqueue(self, messages: Sequence[OutboxMessage]) -> None:
        await enqueue(self._conn, messages)
