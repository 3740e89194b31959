"""Composition root for the workers: the only place that wires adapters to handlers."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import structlog
from faststream.kafka import KafkaBroker
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.kafka_async import AsyncKafkaPublisher
from govindex.adapters.opensearch import OpenSearchIndex
from govindex.adapters.postgres.lineage import PostgresLineage
from govindex.adapters.postgres.pool import open_pool
from govindex.adapters.postgres.store import (
    PostgresChunkStore,
    PostgresOutbox,
    PostgresPurgeStore,
    PostgresSourceRegistry,
)
from govindex.adapters.redis_cache import RedisTaggedCache
from govindex.core.errors import TransientError
from govindex.core.settings import Settings
from govindex.runtime.consumer import subscribe
from indexer.handlers import CONSUMER as INDEXER
from indexer.handlers import IndexerPorts, index_document
from purger.handlers import CONSUMER as PURGER
from purger.handlers import PurgerPorts, on_tombstones_record

log = structlog.get_logger(__name__)

WORKERS = ("indexer", "purger", "cdc")


@dataclass
class Workers:
    """The indexer, the purger and the outbox relay, started and stopped together."""

    settings: Settings
    run: tuple[str, ...] = WORKERS
    relay_interval_s: float = 0.1
    _pool: AsyncConnectionPool | None = None
    _index: OpenSearchIndex | None = None
    _publisher: AsyncKafkaPublisher | None = None
    _brokers: list[KafkaBroker] = field(default_factory=list)
    _relay: asyncio.Task[None] | None = None
    _cache: RedisTaggedCache | None = None

    async def start(self) -> None:
        s = self.settings
        assert s.pg_dsn and s.kafka_bootstrap and s.opensearch_url
        self._pool = open_pool(s.pg_dsn)
        await self._pool.open(wait=True, timeout=30)
        self._index = OpenSearchIndex(s.opensearch_url, s.index_alias)
        generation = await self._index.live_generation()
        if generation is None:
            raise TransientError(
                f"the index alias {s.index_alias!r} does not exist; run `govindex up` or "
                "`govindex reindex` first"
            )
        self._publisher = AsyncKafkaPublisher(s.kafka_bootstrap)
        await self._publisher.start()
        publish = self._publisher.publish
        if "indexer" in self.run:
            broker = KafkaBroker(s.kafka_bootstrap, client_id="govindex-indexer", logger=None)
            ports = IndexerPorts(
                registry=PostgresSourceRegistry(self._pool),
                store=PostgresChunkStore(self._pool),
                index=self._index,
                topics=s.topics,
                generation=generation,
            )
            subscribe(
                broker,
                topic=s.topics.documents,
                group_id=s.group(INDEXER),
                consumer=INDEXER,
                handle=lambda envelope: index_document(envelope, ports),
                dead_letters_topic=s.topics.dead_letters,
                publish=publish,
            )
            self._brokers.append(broker)
        if "purger" in self.run:
            broker = KafkaBroker(s.kafka_bootstrap, client_id="govindex-purger", logger=None)
            if s.redis_url:
                self._cache = RedisTaggedCache(s.redis_url, s.namespace)
            purger_ports = PurgerPorts(
                store=PostgresPurgeStore(self._pool),
                index=self._index,
                receipts_topic=s.topics.receipts,
                lineage=PostgresLineage(self._pool),
                cache=self._cache,
            )
            subscribe(
                broker,
                topic=s.topics.tombstones,
                group_id=s.group(PURGER),
                consumer=PURGER,
                handle=lambda envelope: on_tombstones_record(envelope, purger_ports),
                dead_letters_topic=s.topics.dead_letters,
                publish=publish,
            )
            self._brokers.append(broker)
        if "cdc" in self.run:
            await self._subscribe_cdc(publish)
        # Each broker joins its own consumer group; joining in parallel halves start-up.
        await asyncio.gather(*(broker.start() for broker in self._brokers))
        self._relay = asyncio.create_task(self._relay_outbox(), name="outbox-relay")
        log.info("workers.started", workers=list(self.run), generation=generation)

    async def _subscribe_cdc(self, publish: Any) -> None:
        """One subscriber per Debezium topic named by a registered source's `cdc` section.

        Sources registered later are picked up at the next start.
        """
        from ingest.cdc_worker import CONSUMER as CDC
        from ingest.cdc_worker import CdcPorts, apply_change, cdc_sources

        s = self.settings
        assert self._pool is not None and s.kafka_bootstrap
        manifests = await cdc_sources(self._pool)
        if not manifests:
            log.info("cdc.no_sources")
            return
        ports = CdcPorts(
            pool=self._pool, publish=publish, topics=s.topics, inline_limit=s.inline_content_limit
        )
        broker = KafkaBroker(s.kafka_bootstrap, client_id="govindex-cdc", logger=None)
        for manifest in manifests:
            assert manifest.cdc is not None
            source_id = manifest.source_id

            def handle(delivery: Any, source_id: str = source_id) -> Any:
                return apply_change(delivery, source_id, ports)

            subscribe(
                broker,
                topic=manifest.cdc.topic,
                group_id=s.group(f"{CDC}.{source_id}"),
                consumer=f"{CDC}:{source_id}",
                handle=handle,
                dead_letters_topic=s.topics.dead_letters,
                publish=publish,
                raw=True,
            )
            log.info("cdc.subscribed", source=source_id, topic=manifest.cdc.topic)
        self._brokers.append(broker)

    async def _relay_outbox(self) -> None:
        assert self._pool is not None and self._publisher is not None
        outbox = PostgresOutbox(self._pool)
        while True:
            try:
                sent = await outbox.relay(self._publisher.publish)
            except TransientError as exc:
                log.warning("outbox.relay_failed", error=str(exc))
                sent = 0
            if not sent:
                await asyncio.sleep(self.relay_interval_s)

    async def stop(self) -> None:
        if self._relay is not None:
            self._relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._relay
        for broker in self._brokers:
            await broker.stop()
        self._brokers.clear()
        if self._publisher is not None:
            await self._publisher.stop()
        if self._cache is not None:
            await self._cache.close()
        if self._index is not None:
            await self._index.close()
        if self._pool is not None:
            await self._pool.close()
        log.info("workers.stopped")
