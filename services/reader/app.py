"""The read service's wiring: its ports from a Runtime, and the internal HTTP listener."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web

from govindex.runtime.composition import Runtime
from reader.http import build_read_app
from reader.service import ReadPorts, ReadService

log = structlog.get_logger(__name__)


def read_service(rt: Runtime) -> ReadService:
    return ReadService(ReadPorts(store=rt.reads, index=rt.index, cache=rt.cache))


@dataclass
class ReadServer:
    """The internal listener on `host:port` (port 0: any free port, reported in `url`)."""

    rt: Runtime
    tokens: dict[str, list[str]]
    host: str = "127.0.0.1"
    port: int = 0
    url: str | None = None
    _runner: web.AppRunner | None = None

    async def start(self) -> str:
        if not self.tokens:
            raise ValueError(
                "the read API needs at least one bearer token: set GOVINDEX_READ_TOKENS, e.g. "
                '\'{"<token>": ["<tenant>"]}\''
            )
        app = build_read_app(read_service(self.rt), self.rt.lineage, self.tokens)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server: Any = site._server  # aiohttp reports the bound port only through the server
        port = server.sockets[0].getsockname()[1] if server is not None else self.port
        self.url = f"http://{self.host}:{port}"
        log.info("read_api.listening", url=self.url)
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
