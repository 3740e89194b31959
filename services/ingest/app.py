"""Composition root of the webhook receiver: wires Postgres, Kafka and the HTTP server."""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from aiohttp import web

from govindex.adapters.kafka import KafkaEventPublisher
from govindex.adapters.postgres.pool import open_pool
from govindex.core.settings import Settings
from govindex.devstack.embedded import free_port
from ingest.receiver import ReceiverPorts, build_app

log = structlog.get_logger(__name__)


@dataclass
class WebhookServer:
    settings: Settings
    host: str = "127.0.0.1"
    port: int = 0
    _runner: web.AppRunner | None = None
    _ports: ReceiverPorts | None = None
    url: str | None = None

    async def start(self) -> str:
        s = self.settings
        assert s.pg_dsn and s.kafka_bootstrap
        pool = open_pool(s.pg_dsn, max_size=4)
        await pool.open(wait=True, timeout=30)
        self._ports = ReceiverPorts(
            pool=pool,
            publisher=KafkaEventPublisher(s.kafka_bootstrap),
            topics=s.topics,
            mirrors=s.state_dir / "mirrors",
            inline_limit=s.inline_content_limit,
        )
        self._runner = web.AppRunner(build_app(self._ports), access_log=None)
        await self._runner.setup()
        port = self.port or free_port()
        await web.TCPSite(self._runner, self.host, port).start()
        self.url = f"http://{self.host}:{port}"
        log.info("webhooks.listening", url=self.url)
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._ports is not None:
            self._ports.publisher.close()  # type: ignore[attr-defined]
            await self._ports.pool.close()
