"""Prepare servers for the pipeline: topics, schema, index template, a live generation."""

from __future__ import annotations

import structlog
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.kafka import ensure_topics
from govindex.adapters.opensearch import OpenSearchIndex, rebuild
from govindex.adapters.postgres.pool import migrate, open_pool
from govindex.adapters.postgres.store import PostgresChunkStore, transaction
from govindex.core.settings import Settings

log = structlog.get_logger(__name__)


async def prepare(settings: Settings) -> int:
    """Idempotent start-up; returns the live index generation.

    The embedded broker and index keep nothing on disk: when the alias is missing or the
    index is empty while Postgres holds chunks, the projection is rebuilt from Postgres.
    """
    assert settings.pg_dsn and settings.kafka_bootstrap and settings.opensearch_url
    created = ensure_topics(settings.kafka_bootstrap, settings.topics.all(), settings.partitions)
    if created:
        log.info("kafka.topics_created", topics=created)
    await migrate(settings.pg_dsn)
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
    pool = open_pool(settings.pg_dsn, max_size=2)
    await pool.open(wait=True, timeout=30)
    try:
        await index.ensure_template()
        live = await index.live_generation()
        stored = await _stored_chunk_count(pool)
        if live is not None and (stored == 0 or await index.count() > 0):
            return live
        return await rebuild_projection(settings, pool=pool, index=index)
    finally:
        await index.close()
        await pool.close()


async def rebuild_projection(
    settings: Settings, *, pool: AsyncConnectionPool, index: OpenSearchIndex
) -> int:
    """Build a new generation from Postgres and switch the alias to it."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT coalesce(max(generation), 0) + 1 FROM index_generations WHERE alias = %s",
            (settings.index_alias,),
        )
        row = await cur.fetchone()
        generation = int(row[0]) if row else 1
        await conn.execute(
            "INSERT INTO index_generations (alias, generation, index_name, state) "
            "VALUES (%s, %s, %s, 'building')",
            (settings.index_alias, generation, index.index_name(generation)),
        )
    store = PostgresChunkStore(pool)
    total = await rebuild(index, store.iter_all_chunks(), generation)
    async with transaction(pool) as conn:
        await conn.execute(
            "UPDATE index_generations SET state = CASE WHEN generation = %s THEN 'live' "
            "ELSE 'retired' END WHERE alias = %s",
            (generation, settings.index_alias),
        )
        await conn.execute("UPDATE chunks SET index_generation = %s", (generation,))
    log.info("projection.rebuilt", generation=generation, chunks=total)
    return generation


async def _stored_chunk_count(pool: AsyncConnectionPool) -> int:
    async with transaction(pool) as conn:
        cur = await conn.execute("SELECT count(*) FROM chunks")
        row = await cur.fetchone()
    return int(row[0]) if row else 0
