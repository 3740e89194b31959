"""Postgres adapter for connector state: per-document sequences, fingerprints, checkpoints."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.store import transaction


class PostgresIngestState:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def known(self, tenant_id: str, source_id: str) -> dict[str, str]:
        """Documents the connector last saw present, with their fingerprints ('' when forgotten
        or never confirmed: such a document is emitted again on the next sync)."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT doc_id, coalesce(content_hash, '') FROM ingest_documents "
                "WHERE tenant_id = %s AND source_id = %s AND NOT deleted",
                (tenant_id, source_id),
            )
            return {row[0]: row[1] for row in await cur.fetchall()}

    async def reserve_sequences(
        self, tenant_id: str, source_id: str, doc_ids: Sequence[str]
    ) -> dict[str, int]:
        """Next sequence for each document: strictly increasing, persisted, crash-safe.

        Reserving burns numbers even if the events are never sent; gaps are harmless,
        repeats would not be.
        """
        out: dict[str, int] = {}
        async with transaction(self._pool) as conn:
            for doc_id in doc_ids:
                cur = await conn.execute(
                    "INSERT INTO ingest_documents (tenant_id, source_id, doc_id, last_sequence) "
                    "VALUES (%s, %s, %s, 1) ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE "
                    "SET last_sequence = ingest_documents.last_sequence + 1 "
                    "RETURNING last_sequence",
                    (tenant_id, source_id, doc_id),
                )
                row = await cur.fetchone()
                assert row is not None
                out[doc_id] = int(row[0])
        return out

    async def record(self, tenant_id: str, source_id: str, seen: dict[str, str | None]) -> None:
        """After the broker acknowledged the events: remember fingerprints (None = deleted)."""
        async with transaction(self._pool) as conn:
            for doc_id, fingerprint in seen.items():
                await conn.execute(
                    "UPDATE ingest_documents SET content_hash = %s, deleted = %s "
                    "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s",
                    (fingerprint, fingerprint is None, tenant_id, source_id, doc_id),
                )

    async def set_checkpoint(self, tenant_id: str, source_id: str, position: str) -> None:
        async with transaction(self._pool) as conn:
            await conn.execute(
                "INSERT INTO ingest_checkpoints (tenant_id, source_id, position) "
                "VALUES (%s, %s, %s) ON CONFLICT (tenant_id, source_id) DO UPDATE SET "
                "position = EXCLUDED.position, updated_at = now()",
                (tenant_id, source_id, position),
            )

    async def forget(self, tenant_id: str, source_id: str, doc_ids: Sequence[str]) -> None:
        """Drop fingerprints so the next sync emits these documents again."""
        async with transaction(self._pool) as conn:
            await conn.execute(
                "UPDATE ingest_documents SET content_hash = NULL WHERE tenant_id = %s "
                "AND source_id = %s AND doc_id = ANY(%s)",
                (tenant_id, source_id, list(doc_ids)),
            )

    async def assume_present(self, tenant_id: str, source_id: str, doc_ids: Sequence[str]) -> None:
        """Mark documents the index holds as known, so a sync that no longer finds them in the
        source emits their deletion."""
        async with transaction(self._pool) as conn:
            for doc_id in doc_ids:
                await conn.execute(
                    "INSERT INTO ingest_documents (tenant_id, source_id, doc_id, last_sequence, "
                    " content_hash) VALUES (%s, %s, %s, 0, 'reconcile:held-by-index') "
                    "ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE SET "
                    " content_hash = coalesce(ingest_documents.content_hash, "
                    " 'reconcile:held-by-index'), deleted = false",
                    (tenant_id, source_id, doc_id),
                )

    async def raise_sequences(
        self, tenant_id: str, source_id: str, at_least: dict[str, int]
    ) -> None:
        """Make the next sequence of each document exceed what the index already applied,
        so events emitted to repair the index are never stale."""
        async with transaction(self._pool) as conn:
            for doc_id, sequence in at_least.items():
                await conn.execute(
                    "INSERT INTO ingest_documents (tenant_id, source_id, doc_id, last_sequence) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE "
                    "SET last_sequence = greatest(ingest_documents.last_sequence, "
                    "EXCLUDED.last_sequence)",
                    (tenant_id, source_id, doc_id, sequence),
                )

    async def behind(self, source_id: str) -> int:
        """Documents whose last emitted sequence the index has not applied yet (0: caught up)."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM ingest_documents i LEFT JOIN documents d USING "
                "(tenant_id, source_id, doc_id) WHERE i.source_id = %s AND "
                "coalesce(d.last_sequence, 0) < i.last_sequence",
                (source_id,),
            )
            row = await cur.fetchone()
        return int(row[0]) if row else 0
