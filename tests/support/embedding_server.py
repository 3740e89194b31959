"""A real loopback embeddings server speaking OpenAI's `/v1/embeddings`, with faults a
test can switch on: the next requests failing with a status, a 429 with Retry-After, a
vector of the wrong length, NaN, a missing index, an oversized body, a required bearer
key, and the server itself stopped and started again on the same port.

Vectors are real: WordLlama's (the default embedder) computed per request, so what comes
back through the HTTP embedder can be compared with what the local model gives.

It runs aiohttp on its own event loop in a thread, bound to 127.0.0.1 on a free port, so a
sync test drives it with plain calls and an async test the same way (each call waits
milliseconds) or with `await server.astop()` / `await server.astart()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web

from govindex.adapters.embedders.wordllama import WordLlamaEmbedder
from govindex.core.ports.reading import Embedder
from tests.support.proxy import free_port


@dataclass
class Fault:
    """What the server does instead of answering well, for one request."""

    kind: str  # status | short | nan | no_index | oversized | fewer | stall
    seconds: float = 0.0  # stall: how long before answering
    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)
    size: int = 0  # oversized: bytes sent
    declare_length: bool = False  # oversized: with a Content-Length that says so
    gzip: bool = False  # oversized: gzip-encoded (a few KiB on the wire, `size` inflated)


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    path: str
    body: Any
    authorization: str | None


class EmbeddingServer:
    """`url` is the base an HttpEmbedder takes; `requests` what it received, in order."""

    def __init__(
        self, *, key: str | None = None, embedder: Embedder | None = None, reverse: bool = True
    ) -> None:
        self.host = "127.0.0.1"
        self.port = free_port()
        self.key = key
        self.reverse = reverse  # answer items in reverse order: clients must use `index`
        self.requests: list[Seen] = []
        self.oversized_sent = 0  # bytes of the last oversized body written before the cut
        self._embedder: Embedder = embedder or WordLlamaEmbedder()
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def dims(self) -> int:
        return self._embedder.dims

    # --- lifecycle -----------------------------------------------------------------

    def start(self) -> EmbeddingServer:
        """Listen (again, after stop) on the same port."""
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        """Close the listener and every open connection: the server is down."""
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)

    async def astart(self) -> EmbeddingServer:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._start(), self._loop))
        return self

    async def astop(self) -> None:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._stop(), self._loop))

    def close(self) -> None:
        """Stop, end what is still running (a stalled answer), and end the thread."""
        self.stop()
        asyncio.run_coroutine_threadsafe(_cancel_all(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> EmbeddingServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- switches --------------------------------------------------------------------

    def fail_next(self, count: int, status: int = 503) -> None:
        self._queue(Fault("status", status=status), count)

    def throttle_next(self, retry_after: str, count: int = 1) -> None:
        """429 with `Retry-After: <retry_after>` (seconds or an HTTP date)."""
        self._queue(Fault("status", status=429, headers={"Retry-After": retry_after}), count)

    def wrong_length_next(self, count: int = 1) -> None:
        """The first vector one dimension short."""
        self._queue(Fault("short"), count)

    def nan_next(self, count: int = 1) -> None:
        self._queue(Fault("nan"), count)

    def no_index_next(self, count: int = 1) -> None:
        self._queue(Fault("no_index"), count)

    def fewer_next(self, count: int = 1) -> None:
        """One embedding fewer than texts."""
        self._queue(Fault("fewer"), count)

    def oversized_next(
        self, size: int, *, declare_length: bool = False, gzip: bool = False, count: int = 1
    ) -> None:
        """A body of `size` bytes (whitespace, then valid JSON), streamed in chunks; with
        `declare_length`, announced by Content-Length first; with `gzip`, compressed (a
        decompression bomb: small on the wire)."""
        fault = Fault("oversized", size=size, declare_length=declare_length, gzip=gzip)
        self._queue(fault, count)

    def stall_next(self, seconds: float, count: int = 1) -> None:
        """Answer well, but only after `seconds` (a client's timeout goes first)."""
        self._queue(Fault("stall", seconds=seconds), count)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self.requests.clear()

    def _queue(self, fault: Fault, count: int) -> None:
        with self._lock:
            self._faults.extend(fault for _ in range(count))

    # --- serving ---------------------------------------------------------------------

    async def _start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/embeddings", self._embeddings)
        runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        await site.start()
        self._runner = runner

    async def _stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        authorization = request.headers.get("Authorization")
        with self._lock:
            self.requests.append(Seen(request.path, body, authorization))
            fault = self._faults.popleft() if self._faults else None
        if self.key is not None and authorization != f"Bearer {self.key}":
            # Echoes what it was sent, as some servers do: the client must blank it.
            return _error(401, f"Incorrect API key provided: {authorization}")
        if fault is not None and fault.kind == "stall":
            await asyncio.sleep(fault.seconds)
        if fault is not None and fault.kind == "status":
            return _error(fault.status, f"injected HTTP {fault.status}", fault.headers)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return _error(400, "input must be a string or a list of strings")
        rows = self._vectors(texts)
        data = [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)]
        if fault is not None:
            _spoil(data, fault.kind)
        if self.reverse:
            data.reverse()
        answer = {
            "object": "list",
            "data": data,
            "model": body.get("model"),
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }
        payload = json.dumps(answer).encode()  # allow_nan: NaN is written as `NaN`
        if fault is not None and fault.kind == "oversized":
            return await self._oversized(request, payload, fault)
        return web.Response(body=payload, content_type="application/json")

    def _vectors(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return [
            [float(x) for x in np.frombuffer(v, dtype="<f4")] for v in self._embedder.embed(texts)
        ]

    async def _oversized(
        self, request: web.Request, payload: bytes, fault: Fault
    ) -> web.StreamResponse:
        pad = max(0, fault.size - len(payload))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        parts = _padded(pad, payload)
        if fault.gzip:
            response.headers["Content-Encoding"] = "gzip"
            parts = _gzipped(parts)
        if fault.declare_length:
            response.content_length = pad + len(payload)
        else:
            response.enable_chunked_encoding()
        await response.prepare(request)
        self.oversized_sent = 0
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            for part in parts:
                await response.write(part)
                self.oversized_sent += len(part)
            await response.write_eof()
        return response


async def _cancel_all() -> None:
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _padded(pad: int, payload: bytes) -> Iterator[bytes]:
    block = b" " * 65536
    while pad > 0:
        yield block[: min(pad, len(block))]
        pad -= min(pad, len(block))
    yield payload


def _gzipped(parts: Iterator[bytes]) -> Iterator[bytes]:
    deflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    for part in parts:
        if data := deflater.compress(part):
            yield data
    yield deflater.flush()


def _spoil(data: list[dict[str, Any]], kind: str) -> None:
    if not data:
        return
    if kind == "short":
        data[0]["embedding"] = data[0]["embedding"][:-1]
    elif kind == "nan":
        data[0]["embedding"][0] = float("nan")
    elif kind == "no_index":
        del data[0]["index"]
    elif kind == "fewer":
        data.pop()


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "injected", "code": status}},
        status=status,
        headers=headers,
    )
