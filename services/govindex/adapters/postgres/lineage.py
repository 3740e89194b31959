"""The lineage registry: stored summaries and memories say what they were built from.

`register_derived(kind, id, built_from, location)` records an artifact and its sources:
document keys (`tenant/source/doc`) or chunk ids (32 hex characters). When any of them is
purged, the artifact is invalidated: its text removed, status and reason kept, and an
`artifact.invalidated` event emitted so its owner can rebuild it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from govindex.adapters.postgres.tx import Params, PostgresAdapter
from govindex.core.ports import Invalidated

CHUNK_ID = re.compile(r"^[0-9a-f]{32}$")


_REGISTER = (
    "INSERT INTO derived_artifacts (tenant_id, kind, artifact_id, location, text, "
    " built_from_docs, built_from_chunks) VALUES (%s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (tenant_id, kind, artifact_id) DO UPDATE SET "
    " location = EXCLUDED.location, text = EXCLUDED.text, "
    " built_from_docs = EXCLUDED.built_from_docs, "
    " built_from_chunks = EXCLUDED.built_from_chunks, status = 'valid', "
    " reason = NULL, invalidated_at = NULL, registered_at = now()"
)


def registration(
    kind: str,
    artifact_id: str,
    built_from: Sequence[str],
    location: str,
    *,
    tenant_id: str,
    text: str | None = None,
) -> Params:
    """The parameters of one artifact's registration: document keys and chunk ids apart."""
    chunks = [ref for ref in built_from if CHUNK_ID.match(ref)]
    docs = [ref for ref in built_from if not CHUNK_ID.match(ref)]
    return (tenant_id, kind, artifact_id, location, text, docs, chunks)


async def register_in(conn: AsyncConnection[Any], registrations: Sequence[Params]) -> None:
    """Register artifacts in the caller's transaction (a stored pack, with its audit row)."""
    if registrations:
        async with conn.cursor() as cur:
            await cur.executemany(_REGISTER, registrations)


class PostgresLineage(PostgresAdapter):
    """Implements Lineage and LineageRegistry."""

    async def register_derived(
        self,
        kind: str,
        artifact_id: str,
        built_from: Sequence[str],
        location: str,
        *,
        tenant_id: str,
        text: str | None = None,
    ) -> None:
        """Record (or re-record) an artifact and everything it was built from. Idempotent."""
        params = registration(
            kind, artifact_id, built_from, location, tenant_id=tenant_id, text=text
        )
        await self._execute(_REGISTER, params)

    async def invalidate(
        self,
        tenant_id: str,
        doc_key: str,
        chunk_ids: Sequence[str],
        reason: str,
        *,
        whole_document: bool = True,
    ) -> list[Invalidated]:
        """Invalidate every valid artifact built from the document (unless only some of its
        chunks are going, `whole_document=False`) or from any of the chunks."""
        rows = await self._rows(
            "UPDATE derived_artifacts SET status = 'invalidated', text = NULL, reason = %s, "
            " invalidated_at = now() WHERE tenant_id = %s AND status = 'valid' AND "
            " ((%s AND built_from_docs @> ARRAY[%s]) OR built_from_chunks && %s) "
            "RETURNING kind, artifact_id, location",
            (reason, tenant_id, whole_document, doc_key, list(chunk_ids)),
        )
        return [Invalidated(*row) for row in rows]

    async def remaining(self, tenant_id: str, doc_key: str, chunk_ids: Sequence[str]) -> int:
        """Read-back: artifacts built from the document that still hold text."""
        return await self._count(
            "SELECT count(*) FROM derived_artifacts WHERE tenant_id = %s AND "
            " (built_from_docs @> ARRAY[%s] OR built_from_chunks && %s) "
            " AND (status = 'valid' OR text IS NOT NULL)",
            (tenant_id, doc_key, list(chunk_ids)),
        )

    async def get(self, tenant_id: str, kind: str, artifact_id: str) -> dict[str, object] | None:
        row = await self._row(
            "SELECT status, text, reason, location FROM derived_artifacts WHERE "
            "tenant_id = %s AND kind = %s AND artifact_id = %s",
            (tenant_id, kind, artifact_id),
        )
        if row is None:
            return None
        return {"status": row[0], "text": row[1], "reason": row[2], "location": row[3]}
