"""`govindex verify-purge`: re-check every sink for the latest deletion of a document."""

from __future__ import annotations

from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool

from govindex.adapters.opensearch import OpenSearchIndex
from govindex.adapters.postgres.lineage import PostgresLineage
from govindex.adapters.postgres.store import transaction
from govindex.adapters.redis_cache import RedisTaggedCache
from govindex.core.errors import GovindexError
from govindex.core.events import document_key
from govindex.core.records import DeletionMode, SourceManifest
from govindex.core.settings import Settings


@dataclass
class Verification:
    sequence: int
    mode: str
    state: str
    sinks: list[tuple[str, int, str]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.state == "purged" and all(left == 0 for _, left, _ in self.sinks)


async def verify_purge(
    settings: Settings, pool: AsyncConnectionPool, manifest: SourceManifest, doc_id: str
) -> Verification:
    tenant, source = manifest.tenant, manifest.source_id
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT sequence, deletion_mode, purge_state, chunk_ids FROM tombstones "
            "WHERE tenant_id = %s AND source_id = %s AND doc_id = %s "
            "ORDER BY sequence DESC LIMIT 1",
            (tenant, source, doc_id),
        )
        row = await cur.fetchone()
    if row is None:
        raise GovindexError(f"{source}/{doc_id} has no recorded deletion")
    sequence, mode, state, chunk_ids = int(row[0]), str(row[1]), str(row[2]), list(row[3])
    report = Verification(sequence, mode, state)
    key = document_key(tenant, source, doc_id)
    purge = mode == DeletionMode.TOMBSTONE_AND_PURGE.value
    async with transaction(pool) as conn:
        # Purged: nothing of versions <= sequence may remain; tombstone mode keeps history,
        # so only what is still current counts.
        cur = await conn.execute(
            "SELECT count(*) FROM chunks WHERE tenant_id = %s AND source_id = %s "
            "AND doc_id = %s AND version_sequence <= %s AND (%s OR superseded_at IS NULL)",
            (tenant, source, doc_id, sequence, purge),
        )
        chunks_left = int((await cur.fetchone() or (0,))[0])
        cur = await conn.execute(
            "SELECT count(*) FROM document_versions WHERE tenant_id = %s AND source_id = %s "
            "AND doc_id = %s AND version_sequence <= %s AND content IS NOT NULL",
            (tenant, source, doc_id, sequence),
        )
        versions_left = int((await cur.fetchone() or (0,))[0]) if purge else 0
    report.sinks.append(
        (
            "postgres",
            chunks_left + versions_left,
            "chunks and raw content" if purge else "current chunks",
        )
    )
    assert settings.opensearch_url
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
    try:
        os_left = (
            await index.count_document(tenant, source, doc_id, sequence)
            if purge
            else (await index.count_current(tenant, source, doc_id))
        )
    finally:
        await index.close()
    report.sinks.append(("opensearch", os_left, "every generation"))
    if settings.redis_url:
        cache = RedisTaggedCache(settings.redis_url, settings.namespace)
        try:
            report.sinks.append(
                (
                    "redis",
                    await cache.count_document(key, chunk_ids),
                    "entries tagged with the document or its chunks",
                )
            )
        finally:
            await cache.close()
    left = await PostgresLineage(pool).remaining(tenant, key, chunk_ids)
    report.sinks.append(("summaries", left, "stored summaries still holding text"))
    return report
