"""A loopback TCP proxy a test can cut and restore: a server going down, for real."""

from __future__ import annotations

import asyncio
import contextlib
import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class CuttableProxy:
    """A loopback TCP proxy to a real server that the test can cut and restore."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._server: asyncio.base_events.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Listen (again, after a cut) on the same port."""
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )

    async def cut(self) -> None:
        """Stop accepting and drop every open connection: the server is 'down'."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._pipes):
            writer.close()
        self._pipes.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._pipes.update({writer, up_writer})

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
