"""Connector state: per-document sequences and fingerprints, checkpoints, CDC positions.

A connector writes its decision (sequences, fingerprints, positions) and the events that
announce it in one `ConnectorTransaction`; the outbox relay publishes the events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection

from govindex.adapters.postgres.tx import Params, PostgresAdapter, Query, enqueue, transaction
from govindex.core.ports import OutboxMessage


class PostgresConnectorTransaction:
    """Implements ConnectorTransaction over one open transaction.

    Lock order, whatever order a handler calls in: document rows first, each statement in
    document id order, and blobs last, in hash order (`flush`, run just before the commit).
    Two connectors sharing documents and contents (a backfill and a live sync, say) then
    always wait for each other in the same order and never deadlock.
    """

    def __init__(self, conn: AsyncConnection[Any]) -> None:
        self._conn = conn
        self._blobs: dict[str, str] = {}

    async def _one(self, query: Query, params: Params) -> None:
        await self._conn.execute(query, params)

    async def _many(self, query: Query, params: Sequence[Params]) -> None:
        if params:
            async with self._conn.cursor() as cur:
                await cur.executemany(query, params)

    async def put_blob(self, content_hash: str, content: str) -> None:
        await self.put_blobs([(content_hash, content)])

    async def put_blobs(self, blobs: Sequence[tuple[str, str]]) -> None:
        """Content-addressed: a blob already stored is left as it is. Written by `flush`,
        in this transaction, after every document row it touches."""
        self._blobs.update(blobs)

    async def flush(self) -> None:
        """Write the queued blobs. A blob already stored is locked (FOR KEY SHARE) before the
        insert skips it: a purge deleting it concurrently either waits for this commit and
        then sees the events that need it, or deletes it first and the insert stores it
        again. Without the lock both commit and an event points to a blob that is gone."""
        if not self._blobs:
            return
        blobs = sorted(self._blobs.items())
        await self._one(
            "SELECT content_hash FROM blobs WHERE content_hash = ANY(%s) "
            "ORDER BY content_hash FOR KEY SHARE",
            ([h for h, _ in blobs],),
        )
        await self._many(
            "INSERT INTO blobs (content_hash, content) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            blobs,
        )
        self._blobs.clear()

    async def emit(self, messages: Sequence[OutboxMessage]) -> None:
        """Queue events in the outbox: they are published after this transaction commits."""
        await enqueue(self._conn, messages)

    async def reserve_sequences(
        self, tenant_id: str, source_id: str, doc_ids: Sequence[str]
    ) -> dict[str, int]:
        """Next sequence for each document: strictly increasing, persisted, crash-safe.

        Reserving burns numbers even if the events are never sent; gaps are harmless,
        repeats would not be.
        """
        out: dict[str, int] = {}
        for doc_id in sorted(set(doc_ids)):
            cur = await self._conn.execute(
                "INSERT INTO ingest_documents (tenant_id, source_id, doc_id, last_sequence) "
                "VALUES (%s, %s, %s, 1) ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE "
                "SET last_sequence = ingest_documents.last_sequence + 1 "
                "RETURNING last_sequence",
                (tenant_id, source_id, doc_id),
            )
            row = await cur.fetchone()
            assert row is not None  # RETURNING of an upsert always yields the row
            out[doc_id] = int(row[0])
        return out

    async def record(
        self,
        tenant_id: str,
        source_id: str,
        seen: dict[str, str | None],
        *,
        at: Mapping[str, int] | None = None,
    ) -> None:
        """Remember what was emitted for each document (None: its deletion was emitted).

        With `at` (doc id -> the sequence its event carries), only where that is still the
        document's last sequence: an event emitted since with a higher sequence wins in the
        index, so what it recorded is what the connector must compare with next time.
        """
        if at is None:
            await self._many(
                "UPDATE ingest_documents SET content_hash = %s, deleted = %s "
                "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s",
                [(fp, fp is None, tenant_id, source_id, doc) for doc, fp in sorted(seen.items())],
            )
            return
        await self._many(
            "UPDATE ingest_documents SET content_hash = %s, deleted = %s "
            "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s AND last_sequence = %s",
            [
                (fp, fp is None, tenant_id, source_id, doc, at[doc])
                for doc, fp in sorted(seen.items())
            ],
        )

    async def raise_sequences(
        self, tenant_id: str, source_id: str, at_least: dict[str, int]
    ) -> None:
        """Make the next sequence of each document exceed what the index already applied,
        so events emitted to repair the index are never stale."""
        await self._many(
            "INSERT INTO ingest_documents (tenant_id, source_id, doc_id, last_sequence) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE "
            "SET last_sequence = greatest(ingest_documents.last_sequence, "
            "EXCLUDED.last_sequence)",
            [(tenant_id, source_id, doc, sequence) for doc, sequence in sorted(at_least.items())],
        )

    async def record_position(
        self, tenant_id: str, source_id: str, doc_id: str, sequence: int, *, deleted: bool
    ) -> None:
        """A CDC change was emitted at `sequence` (the source position); never moves back."""
        await self._one(
            "INSERT INTO ingest_documents (tenant_id, source_id, doc_id, last_sequence, "
            " content_hash, deleted) VALUES (%s, %s, %s, %s, 'cdc', %s) "
            "ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE SET "
            " last_sequence = greatest(ingest_documents.last_sequence, "
            " EXCLUDED.last_sequence), deleted = CASE WHEN EXCLUDED.last_sequence >= "
            " ingest_documents.last_sequence THEN EXCLUDED.deleted "
            " ELSE ingest_documents.deleted END",
            (tenant_id, source_id, doc_id, sequence, deleted),
        )

    async def record_truncate(self, tenant_id: str, source_id: str, sequence: int) -> None:
        """The source's table was truncated at `sequence`; the mark never moves back."""
        await self._one(
            "INSERT INTO ingest_checkpoints (tenant_id, source_id, position) "
            "VALUES (%s, %s, %s) ON CONFLICT (tenant_id, source_id) DO UPDATE SET "
            "position = EXCLUDED.position, updated_at = now() "
            "WHERE CASE WHEN ingest_checkpoints.position LIKE 'truncated:%%' "
            "THEN split_part(ingest_checkpoints.position, ':', 2)::bigint < %s ELSE true END",
            (tenant_id, source_id, f"truncated:{sequence}", sequence),
        )


class PostgresIngestState(PostgresAdapter):
    """Implements ConnectorState and CdcLedger: reads here, writes through `transaction()`."""

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PostgresConnectorTransaction]:
        async with transaction(self._pool) as conn:
            tx = PostgresConnectorTransaction(conn)
            yield tx
            await tx.flush()

    async def raise_sequences(
        self, tenant_id: str, source_id: str, at_least: dict[str, int]
    ) -> None:
        async with self.transaction() as tx:
            await tx.raise_sequences(tenant_id, source_id, at_least)

    async def known(self, tenant_id: str, source_id: str) -> dict[str, str]:
        """Documents the connector last saw present, with their fingerprints ('' when forgotten
        or never confirmed: such a document is emitted again on the next sync)."""
        rows = await self._rows(
            "SELECT doc_id, coalesce(content_hash, '') FROM ingest_documents "
            "WHERE tenant_id = %s AND source_id = %s AND NOT deleted",
            (tenant_id, source_id),
        )
        return {row[0]: row[1] for row in rows}

    async def set_checkpoint(self, tenant_id: str, source_id: str, position: str) -> None:
        await self._execute(
            "INSERT INTO ingest_checkpoints (tenant_id, source_id, position) "
            "VALUES (%s, %s, %s) ON CONFLICT (tenant_id, source_id) DO UPDATE SET "
            "position = EXCLUDED.position, updated_at = now()",
            (tenant_id, source_id, position),
        )

    async def synced(self, tenant_id: str, source_id: str) -> None:
        await self._execute(
            "UPDATE sources SET last_synced_at = now() WHERE tenant_id = %s AND source_id = %s",
            (tenant_id, source_id),
        )

    async def checkpoint(self, tenant_id: str, source_id: str) -> str | None:
        row = await self._row(
            "SELECT position FROM ingest_checkpoints WHERE tenant_id = %s AND source_id = %s",
            (tenant_id, source_id),
        )
        return str(row[0]) if row else None

    async def forget(self, tenant_id: str, source_id: str, doc_ids: Sequence[str]) -> None:
        """Drop fingerprints so the next sync emits these documents again."""
        await self._execute(
            "UPDATE ingest_documents SET content_hash = NULL WHERE tenant_id = %s "
            "AND source_id = %s AND doc_id = ANY(%s)",
            (tenant_id, source_id, list(doc_ids)),
        )

    async def assume_present(self, tenant_id: str, source_id: str, doc_ids: Sequence[str]) -> None:
        """Mark documents the index holds as known, so a sync that no longer finds them in the
        source emits their deletion."""
        await self._execute_many(
            "INSERT INTO ingest_documents (tenant_id, source_id, doc_id, last_sequence, "
            " content_hash) VALUES (%s, %s, %s, 0, 'reconcile:held-by-index') "
            "ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE SET "
            " content_hash = coalesce(ingest_documents.content_hash, "
            " 'reconcile:held-by-index'), deleted = false",
            [(tenant_id, source_id, doc_id) for doc_id in doc_ids],
        )

    async def behind(self, source_id: str) -> int:
        """Documents whose last emitted sequence the index has not applied yet (0: caught up)."""
        return await self._count(
            "SELECT count(*) FROM ingest_documents i LEFT JOIN documents d USING "
            "(tenant_id, source_id, doc_id) WHERE i.source_id = %s AND "
            "coalesce(d.last_sequence, 0) < i.last_sequence",
            (source_id,),
        )

    async def ledger(self, tenant_id: str, source_id: str, doc_id: str) -> tuple[int, bool]:
        """(last sequence, deleted) the connector recorded for a document; (0, False) if none."""
        row = await self._row(
            "SELECT last_sequence, deleted FROM ingest_documents WHERE tenant_id = %s "
            "AND source_id = %s AND doc_id = %s",
            (tenant_id, source_id, doc_id),
        )
        return (int(row[0]), bool(row[1])) if row else (0, False)

    async def live_documents(self, tenant_id: str, source_id: str, prefix: str) -> list[str]:
        """Documents under `prefix` the connector last saw present."""
        rows = await self._rows(
            "SELECT doc_id FROM ingest_documents WHERE tenant_id = %s AND source_id = %s "
            "AND NOT deleted AND starts_with(doc_id, %s) ORDER BY doc_id",
            (tenant_id, source_id, prefix),
        )
        return [row[0] for row in rows]

    async def truncated_at(self, tenant_id: str, source_id: str) -> int:
        """The position of the source's last truncate, 0 if it never had one."""
        row = await self._row(
            "SELECT position FROM ingest_checkpoints WHERE tenant_id = %s AND source_id = %s "
            "AND position LIKE 'truncated:%%'",
            (tenant_id, source_id),
        )
        return int(str(row[0]).split(":", 1)[1]) if row else 0
