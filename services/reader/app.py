"""The read service's wiring: its ports from a Runtime, and the internal HTTP listener."""

from __future__ import annotations

from dataclasses import dataclass

from govindex.runtime.composition import Runtime
from govindex.runtime.listener import Listener
from reader.http import build_read_app
from reader.service import ReadPorts, ReadService


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
    _listener: Listener | None = None

    async def start(self) -> str:
        if not self.tokens:
            raise ValueError(
                "the read API needs at least one bearer token: set GOVINDEX_READ_TOKENS, e.g. "
                '\'{"<token>": ["<tenant>"]}\''
            )
        self._listener = Listener("read_api", self.host, self.port)
        app = build_read_app(read_service(self.rt), self.rt.lineage, self.tokens)
        self.url = await self._listener.start(app)
        return self.url

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
