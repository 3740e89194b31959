"""One HTTP listener: an aiohttp application served on `host:port` until stopped."""

from __future__ import annotations

from typing import Any

import structlog
from aiohttp import web

log = structlog.get_logger(__name__)


class Listener:
    """Serves `app` on `host:port` (port 0: any free port, reported by `start`)."""

    def __init__(self, name: str, host: str, port: int) -> None:
        self.name, self.host, self.port = name, host, port
        self.url: str | None = None
        self._runner: web.AppRunner | None = None

    async def start(self, app: web.Application) -> str:
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server: Any = site._server  # aiohttp reports the bound port only through the server
        port = server.sockets[0].getsockname()[1] if server is not None else self.port
        self.url = f"http://{self.host}:{port}"
        log.info(f"{self.name}.listening", url=self.url)
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
