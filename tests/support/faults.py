"""A loopback HTTP proxy to the real OpenSearch that can answer 429 or 5xx to index bulks,
or hold every request until released."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from tests.support.proxy import free_port


class FaultyOpenSearch:
    """Forwards every request to the real server, except index bulks while `fail`ing:
    those get the chosen status, as a busy or broken cluster answers. Deletes pass.
    While `hold`ing, every request waits (a server stuck behind a long bulk) until `release`."""

    def __init__(self, target_url: str) -> None:
        self.target = target_url.rstrip("/")
        self.port = free_port()
        self.status: int | None = None
        self.refused = 0
        self.forwarded_bulks = 0
        self.held = 0  # requests waiting now
        self._open = asyncio.Event()
        self._open.set()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail(self, status: int) -> None:
        self.status = status

    def heal(self) -> None:
        self.status = None

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        self._open.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if not self._open.is_set():
            self.held += 1
            try:
                await self._open.wait()
            finally:
                self.held -= 1
        bulk = request.path.endswith("/_bulk")
        if bulk and self.status is not None and b'"index"' in body:
            self.refused += 1
            return web.json_response({"error": "injected fault"}, status=self.status)
        if bulk:
            self.forwarded_bulks += 1
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host",)}
        async with self._session.request(
            request.method, self.target + request.path_qs, data=body, headers=headers
        ) as upstream:
            payload = await upstream.read()
            return web.Response(
                status=upstream.status,
                body=payload,
                content_type=upstream.content_type,
            )
