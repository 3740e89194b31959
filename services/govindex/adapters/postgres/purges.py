"""Tombstones, purges and their receipts; retention of old versions; purge read-backs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, LiteralString

from psycopg import sql
from psycopg.types.json import Jsonb

from govindex.adapters.postgres.tx import (
    PostgresAdapter,
    claim_event,
    enqueue,
    transaction,
)
from govindex.core.ports import DocumentKey, ExpiredVersion, OutboxMessage, TombstoneRow

_TOMBSTONE: LiteralString = (
    "SELECT tenant_id, source_id, doc_id, sequence, event_id, deletion_mode, deleted_at, "
    "recorded_at, chunk_ids, purge_state, purge_attempts, purge_error FROM tombstones "
)


def _key(key: DocumentKey) -> tuple[str, str, str]:
    return (key.tenant_id, key.source_id, key.doc_id)


# The claim-check blobs a purge of versions ≤ N removes: those of the emptied versions and
# of the document's events up to N, unless content still in use needs them (a version that
# keeps its content, or a pending event of another document or of a later re-creation).
_DOOMED_BLOBS = sql.SQL(
    "SELECT d.h FROM (SELECT unnest(%s::text[]) AS h UNION SELECT content_hash FROM outbox"
    "  WHERE key = %s AND sequence <= %s AND content_hash IS NOT NULL) d"
    " WHERE NOT EXISTS (SELECT 1 FROM document_versions v WHERE v.content_hash = d.h"
    "  AND v.content IS NOT NULL)"
    " AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.content_hash = d.h"
    "  AND o.settled_at IS NULL AND (o.key <> %s OR o.sequence > %s))"
)


def _blob_params(key: DocumentKey, sequence: int) -> tuple[str, int, str, int]:
    doc = f"{key.tenant_id}/{key.source_id}/{key.doc_id}"
    return doc, sequence, doc, sequence


class PostgresPurgeStore(PostgresAdapter):
    """What the purger needs from Postgres (implements PurgeStore and RetentionStore)."""

    async def tombstone(self, key: DocumentKey, sequence: int) -> TombstoneRow | None:
        rows = await self._tombstones(
            "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s AND sequence = %s",
            (*_key(key), sequence),
        )
        return rows[0] if rows else None

    async def latest_tombstone(self, key: DocumentKey) -> TombstoneRow | None:
        rows = await self._tombstones(
            "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s ORDER BY sequence DESC "
            "LIMIT 1",
            _key(key),
        )
        return rows[0] if rows else None

    async def pending(self) -> list[TombstoneRow]:
        return await self._tombstones("WHERE purge_state <> 'purged' ORDER BY recorded_at", ())

    async def purge_content(self, key: DocumentKey, sequence: int) -> tuple[int, int]:
        """Remove chunk text and raw content of every version ≤ sequence.

        Keeps the version rows' ids, hashes and times (what the tombstone refers to).
        Returns (chunks removed, versions emptied). Idempotent.
        """
        params = (*_key(key), sequence)
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "DELETE FROM chunks WHERE tenant_id = %s AND source_id = %s AND doc_id = %s AND "
                "version_sequence <= %s",
                params,
            )
            chunks = cur.rowcount
            # Edges whose evidence is gone go with it (derived facts, rebuilt from a new
            # version if the document returns).
            await conn.execute(
                "DELETE FROM graph_edges WHERE tenant_id = %s AND source_id = %s AND doc_id = "
                "%s AND version_sequence <= %s",
                params,
            )
            cur = await conn.execute(
                "UPDATE document_versions SET content = NULL, raw_content = NULL, title = NULL, "
                " metadata = '{}', "
                " content_purged_at = now() WHERE tenant_id = %s AND source_id = %s AND doc_id "
                "= %s AND version_sequence <= %s AND content_purged_at IS NULL "
                "RETURNING content_hash",
                params,
            )
            hashes = [row[0] for row in await cur.fetchall()]
            # Lock the doomed blobs first, then decide again in a fresh statement: a
            # connector that is emitting an event needing one of them holds it FOR KEY
            # SHARE until its commit, and the second look sees that event's outbox row.
            await conn.execute(
                sql.SQL(
                    "SELECT content_hash FROM blobs b WHERE b.content_hash IN ({}) "
                    "ORDER BY content_hash FOR UPDATE"
                ).format(_DOOMED_BLOBS),
                (hashes, *_blob_params(key, sequence)),
            )
            await conn.execute(
                sql.SQL("DELETE FROM blobs b WHERE b.content_hash IN ({})").format(_DOOMED_BLOBS),
                (hashes, *_blob_params(key, sequence)),
            )
        return chunks, len(hashes)

    async def content_remaining(self, key: DocumentKey, sequence: int) -> int:
        """Read-back: rows that still hold content of versions ≤ sequence."""
        chunks, versions = await self.remaining(key, sequence, current_only=False)
        blobs = await self._count(
            sql.SQL("SELECT count(*) FROM blobs b WHERE b.content_hash IN ({})").format(
                _DOOMED_BLOBS
            ),
            ([], *_blob_params(key, sequence)),
        )
        return chunks + versions + blobs

    async def remaining(
        self, key: DocumentKey, sequence: int, *, current_only: bool
    ) -> tuple[int, int]:
        """(chunks, versions with raw content) of versions ≤ sequence still stored;
        `current_only` counts only chunks that are still current (tombstone mode)."""
        params = (*_key(key), sequence)
        row = await self._row(
            "SELECT (SELECT count(*) FROM chunks WHERE tenant_id = %s AND source_id = %s "
            " AND doc_id = %s AND version_sequence <= %s AND (NOT %s OR superseded_at IS NULL)),"
            " (SELECT count(*) FROM document_versions WHERE tenant_id = %s AND source_id = %s"
            " AND doc_id = %s AND version_sequence <= %s"
            " AND (content IS NOT NULL OR title IS NOT NULL))",
            (*params, current_only, *params),
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def complete(
        self,
        consumer: str,
        event_id: str,
        tombstone: TombstoneRow,
        receipt: dict[str, Any],
        announce: Sequence[OutboxMessage],
    ) -> bool:
        """Mark the tombstone purged, keep the receipt, announce it; False if already done."""
        key = (tombstone.tenant_id, tombstone.source_id, tombstone.doc_id, tombstone.sequence)
        async with transaction(self._pool) as conn:
            if not await claim_event(conn, consumer, event_id):
                return False
            await conn.execute(
                "UPDATE tombstones SET purge_state = 'purged', purged_at = now(), "
                " purge_error = NULL WHERE tenant_id = %s AND source_id = %s AND doc_id = %s "
                "AND sequence = %s",
                key,
            )
            await conn.execute(
                "INSERT INTO purge_receipts (tenant_id, source_id, doc_id, sequence, receipt) "
                "VALUES (%s, %s, %s, %s, %s)",
                (*key, Jsonb(receipt)),
            )
            await enqueue(conn, announce)
        return True

    async def mark_processed(self, consumer: str, event_id: str) -> None:
        """Record that `consumer` processed `event_id` (an effect outside Postgres, done)."""
        async with transaction(self._pool) as conn:
            await claim_event(conn, consumer, event_id)

    async def note_failure(self, tombstone: TombstoneRow, error: str) -> None:
        await self._execute(
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

    async def receipt(self, tenant_id: str, doc_id: str, sequence: int) -> dict[str, Any] | None:
        """The purge receipt of a deletion, once the purge is complete."""
        row = await self._row(
            "SELECT receipt FROM purge_receipts WHERE tenant_id = %s AND doc_id = %s "
            "AND sequence = %s",
            (tenant_id, doc_id, sequence),
        )
        return dict(row[0]) if row else None

    async def expired_versions(
        self, tenant_id: str, source_id: str, superseded_before: datetime
    ) -> list[ExpiredVersion]:
        """Superseded versions past the source's history retention that still hold content."""
        return await self._typed(
            ExpiredVersion,
            "SELECT version_id, doc_id, version_sequence, superseded_at FROM "
            "document_versions WHERE tenant_id = %s AND source_id = %s "
            "AND superseded_at < %s AND content_purged_at IS NULL "
            "ORDER BY superseded_at",
            (tenant_id, source_id, superseded_before),
        )

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
                "UPDATE document_versions SET content = NULL, raw_content = NULL, title = NULL, "
                " metadata = '{}', "
                " content_purged_at = now() WHERE version_id = %s AND content_purged_at IS NULL "
                "RETURNING tenant_id, source_id, doc_id, version_sequence",
                (version_id,),
            )
            row = await cur.fetchone()
            if row is not None:
                await conn.execute(
                    "INSERT INTO purge_receipts (tenant_id, source_id, doc_id, sequence, "
                    " receipt) VALUES (%s, %s, %s, %s, %s)",
                    (*row, Jsonb({**receipt, "version_id": version_id, "chunks": removed})),
                )
        return removed

    async def _tombstones(self, where: LiteralString, params: Sequence[Any]) -> list[TombstoneRow]:
        return await self._typed(TombstoneRow, sql.SQL(_TOMBSTONE) + sql.SQL(where), params)
