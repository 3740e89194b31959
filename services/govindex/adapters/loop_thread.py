"""An event loop on a daemon thread of its own.

Two users: the blocking Kafka objects (`kafka_blocking.Loop`), whose callers have no loop
or may not wait on theirs, and work a process keeps off its main loop so that it never
waits its turn behind the CPU the main loop's tasks spend (the deletion lane).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

import structlog

log = structlog.get_logger(__name__)

T = TypeVar("T")

CLOSE_TIMEOUT_S: Final = 15.0


class LoopThread:
    """A loop running on a thread of its own until `close`.

    On close, what is left on the loop is cancelled and awaited, async generators are
    closed and the default executor is shut down, so no thread stays behind.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._closed = False
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def on_thread(self) -> bool:
        """Whether the caller runs on this loop's thread."""
        return threading.current_thread() is self._thread

    def _serve(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coro` on the loop; its future can be waited on from any thread."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"the loop thread {self.name!r} is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop and await its result from another loop (cancelling the
        wait cancels the coroutine)."""
        return await asyncio.wrap_future(self.submit(coro))

    def close(self) -> None:
        """Stop the loop and wait for its thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError):  # already closed
            self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.on_thread():
            self._thread.join(CLOSE_TIMEOUT_S)
            if self._thread.is_alive():
                log.warning("loop_thread.not_stopped", name=self.name)
