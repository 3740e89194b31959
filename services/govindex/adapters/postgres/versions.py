"""Stored versions and claim-check blobs: what reparse re-chunks and what large events point to."""

from __future__ import annotations

from collections.abc import Sequence

from govindex.adapters.postgres.chunks import insert_chunks
from govindex.adapters.postgres.tx import PostgresAdapter, transaction
from govindex.core.ports import StoredVersion
from govindex.core.records import Chunk


class PostgresBlobStore(PostgresAdapter):
    """Content-addressed blobs (implements BlobStore); connectors write them in their
    ConnectorTransaction."""

    async def blob(self, content_hash: str) -> str | None:
        row = await self._row("SELECT content FROM blobs WHERE content_hash = %s", (content_hash,))
        return str(row[0]) if row else None


class PostgresVersionStore(PostgresAdapter):
    """Current versions with their raw content, and chunk swaps for a re-parse."""

    async def current_versions(
        self, source_id: str | None, parser: str | None
    ) -> list[StoredVersion]:
        """Current versions of active documents that still hold content (reparse input)."""
        return await self._typed(
            StoredVersion,
            "SELECT d.tenant_id, d.source_id, d.doc_id, d.path, v.version_id, "
            " v.version_sequence, v.sequence, v.source_version, v.content_hash, v.content, "
            " v.media_type, v.valid_from, v.valid_to, v.observed_at, v.recorded_at, "
            " v.parser, v.parser_version, v.raw_content FROM documents d JOIN "
            " document_versions v "
            " ON v.version_id = d.current_version_id WHERE d.state = 'active' "
            " AND v.content IS NOT NULL AND (%s::text IS NULL OR d.source_id = %s) "
            " AND (%s::text IS NULL OR v.parser = %s) ORDER BY d.source_id, d.doc_id",
            (source_id, source_id, parser, parser),
        )

    async def replace_version_chunks(
        self,
        version_id: str,
        expected: tuple[str, str],
        chunks: Sequence[Chunk],
        content: str | None = None,
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
            await insert_chunks(conn, chunks)
            if chunks:  # each edge keeps the chunk at its evidence ordinal, else the first
                await conn.execute(
                    "UPDATE graph_edges e SET evidence_chunk_id = coalesce((SELECT c.chunk_id "
                    " FROM chunks c WHERE c.version_id = e.version_id AND c.ordinal = "
                    " e.evidence_ordinal), %s) WHERE e.version_id = %s",
                    (chunks[0].chunk_id, version_id),
                )
            await conn.execute(
                "UPDATE document_versions SET parser = %s, parser_version = %s, "
                " content = coalesce(%s, content) WHERE version_id = %s",
                (
                    chunks[0].parser if chunks else expected[0],
                    chunks[0].parser_version if chunks else expected[1],
                    content,  # re-extracted: the new canonical text the chunks point into
                    version_id,
                ),
            )
            return old
