"""Prepare servers for the pipeline: topics, schema, index template, the model's vector
generation, a live index generation."""

from __future__ import annotations

import structlog

from govindex.adapters.kafka import ensure_topics
from govindex.adapters.kafka_security import KafkaSecurity
from govindex.adapters.opensearch import rebuild
from govindex.adapters.postgres.pool import migrate
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime

log = structlog.get_logger(__name__)


async def prepare_servers(settings: Settings) -> None:
    """Topics and migrations: what must exist before a Runtime can be used."""
    servers = settings.servers()
    created = ensure_topics(
        servers.kafka_bootstrap,
        settings.topics.all(),
        settings.partitions,
        KafkaSecurity.from_settings(settings),
    )
    if created:
        log.info("kafka.topics_created", topics=created)
    await migrate(servers.pg_dsn)


async def prepare(settings: Settings) -> int:
    """Idempotent start-up; returns the live index generation.

    The embedded broker and index keep nothing on disk: when the alias is missing or the
    index is empty while Postgres holds chunks, the projection is rebuilt from Postgres.
    """
    await prepare_servers(settings)
    async with Runtime(settings, pool_size=2) as rt:
        # A broker that lost its log lost the CDC topics too: subscribing needs them back.
        cdc_topics = [m.cdc.topic for m in await rt.registry.cdc_sources() if m.cdc]
        if cdc_topics:
            ensure_topics(
                rt.servers.kafka_bootstrap, cdc_topics, settings.partitions, rt.kafka_security
            )
        await rt.index.ensure_template()
        embedder = rt.embedder
        if embedder is not None:  # its vector generation and HNSW index (live if the first)
            await rt.vectors.ensure_generation(embedder.name, embedder.version, embedder.dims)
        live = await rt.index.live_generation()
        stored = await rt.generations.stored_chunks()
        if live is not None and (stored == 0 or await rt.index.count() > 0):
            return live
        return await rebuild_projection(rt)


async def rebuild_projection(rt: Runtime) -> int:
    """Build a new generation from Postgres and switch the alias to it."""
    generation = await rt.generations.begin(rt.index.index_name)
    total = await rebuild(rt.index, rt.chunks.iter_all_chunks(), generation)
    await rt.generations.go_live(generation)
    log.info("projection.rebuilt", generation=generation, chunks=total)
    return generation
