"""Documents, versions and chunks: the system of record, read back, and the indexer's unit
of work opened on it (`PostgresDocumentTransaction`, in `unit_of_work`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from govindex.adapters.postgres.chunks import select_chunks
from govindex.adapters.postgres.document_keys import DOC_WHERE, key_columns, key_params
from govindex.adapters.postgres.tx import PostgresAdapter, connection, transaction
from govindex.adapters.postgres.unit_of_work import PostgresDocumentTransaction
from govindex.core.ports import DocumentKey, DocumentRow, DocumentState
from govindex.core.records import Chunk

__all__ = ["PostgresChunkStore", "PostgresDocumentTransaction"]


class PostgresChunkStore(PostgresAdapter):
    """Implements ChunkStore: opens document transactions and reads chunks back."""

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PostgresDocumentTransaction]:
        async with transaction(self._pool) as conn:
            yield PostgresDocumentTransaction(conn)

    async def chunks_changed_by(self, key: DocumentKey, sequence: int) -> list[Chunk]:
        """The chunk rows the event with `sequence` wrote: what OpenSearch must now reflect."""
        return await select_chunks(
            self._pool, DOC_WHERE + " AND sequence = %s", (*key_params(key), sequence)
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
            (*key_columns([key for key, _ in changes]), [seq for _, seq in changes]),
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
            key_params(key),
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
