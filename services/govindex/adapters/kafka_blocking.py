"""The blocking side of the Kafka adapters: aiokafka clients on an event loop of their own.

Callers of `govindex.adapters.kafka` are synchronous (CLI commands, threads of
`asyncio.to_thread`, a test's coroutine calling straight through), so each object there
runs its aiokafka clients on an event loop of its own, on a thread of its own (`Loop`),
and waits for each call with a bound.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import weakref
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from govindex.adapters.kafka_security import KafkaSecurity, aiokafka_options
from govindex.adapters.loop_thread import LoopThread
from govindex.core.errors import TransientError

log = structlog.get_logger(__name__)

T = TypeVar("T")

# Every client request gives up after this (a broker that accepts connections and never
# answers); each blocking call waits a little longer, so aiokafka's own error is the one
# seen, and `Loop.run` only catches a loop that is stuck.
REQUEST_TIMEOUT_MS: Final = 15_000
CALL_TIMEOUT_S: Final = 60.0
# Kafka's errors, and a refused, reset or timed-out socket (TimeoutError is an OSError):
# what a caller sees as a TransientError. Starting a client, aiokafka also lets a SCRAM
# refusal (`e=unknown-user`) out as KeyError('v'): that one is "cannot reach Kafka" too.
FAILURES: Final = (KafkaError, OSError)
UNREACHABLE: Final = (*FAILURES, KeyError)


class Loop(LoopThread):
    """An event loop on a daemon thread of its own, where one object's aiokafka clients
    are built and used.

    aiokafka clients belong to the loop that built them, and the callers here are
    synchronous: a CLI command with no loop at all, a thread of `asyncio.to_thread` while
    the main thread runs a loop, or a coroutine calling straight through (where
    `asyncio.run` is refused). One loop per object, not one shared by the module: an
    object's clients live and die with it, a broker that hangs one object's calls does
    not hold up another's, and `close` leaves no thread behind, which a shared thread
    kept for the process could not promise. Calls run one after the other (`_turn`): two
    threads sharing an object never interleave one consumer's assign, seek and fetch.
    """

    def __init__(self, name: str, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self._turn = asyncio.Lock()  # bound to the loop on first use, on the loop
        super().__init__(name)

    def run(
        self, coro: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT_S, what: str = ""
    ) -> T:
        """Run `coro` on the loop and wait for it (at most `timeout` seconds). Kafka's
        errors come out as `TransientError`, prefixed with `what`."""
        what = what or f"Kafka at {self._bootstrap}"
        if self.closed:
            coro.close()
            raise TransientError(f"{what}: the client is closed")
        if self.on_thread():  # waiting here would never end
            coro.close()
            raise RuntimeError("a blocking Kafka call made from its own event loop")
        future = self.submit(self._in_turn(coro))
        done, _ = concurrent.futures.wait([future], timeout)
        if not done:
            future.cancel()
            log.warning("kafka.call_timed_out", bootstrap=self._bootstrap, timeout_s=timeout)
            raise TransientError(f"{what}: no answer within {timeout:.0f} s")
        try:
            return future.result()
        except TransientError:
            raise
        except FAILURES as exc:
            raise TransientError(f"{what}: {exc!r}") from exc

    async def _in_turn(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            async with self._turn:
                return await coro
        finally:
            coro.close()  # a call cancelled while it waited its turn never started


class Clients:
    """One object's aiokafka clients (admin, consumer, producer), each built and started
    on first use on the object's own loop, every one with the security options."""

    def __init__(self, bootstrap: str, security: KafkaSecurity, client_id: str) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.security = security
        self.loop = Loop(f"kafka-{client_id}", bootstrap)
        # A forgotten `close()` still ends the thread once the object is collected.
        self._finalizer = weakref.finalize(self, self.loop.close)
        self._admin: Any = None
        self._consumer: Any = None
        self._producer: Any = None
        self._extra: list[Any] = []

    def run(
        self, coro: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT_S, what: str = ""
    ) -> T:
        return self.loop.run(coro, timeout, what)

    async def start(self, client: Any) -> Any:
        """Start a client; one that cannot reach the brokers is stopped and said so."""
        try:
            await client.start()
        except UNREACHABLE as exc:
            await stop_client(client)
            raise TransientError(f"cannot reach Kafka at {self.bootstrap}: {exc}") from exc
        return client

    async def admin(self) -> Any:
        if self._admin is None:
            admin = AIOKafkaAdminClient(
                bootstrap_servers=self.bootstrap,
                client_id=self.client_id,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                **aiokafka_options(self.security),
            )
            self._admin = await self.start(admin)
        return self._admin

    async def consumer(self, **config: Any) -> Any:
        """The object's consumer: no group, manual assignment only."""
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                client_id=self.client_id,
                enable_auto_commit=False,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                **config,
                **aiokafka_options(self.security),
            )
            self._consumer = await self.start(consumer)
        return self._consumer

    async def member(self, group: str, client_id: str) -> Any:
        """A consumer of `group`, stopped with the others on `close` (or by the caller)."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=group,
            client_id=client_id,
            enable_auto_commit=False,
            **aiokafka_options(self.security),
        )
        self._extra.append(consumer)
        return await self.start(consumer)

    async def producer(self) -> Any:
        if self._producer is None:
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap,
                client_id=self.client_id,
                acks="all",
                linger_ms=5,
                max_request_size=8 * 1024 * 1024,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                **aiokafka_options(self.security),
            )
            self._producer = await self.start(producer)
        return self._producer

    async def _stop_all(self) -> None:
        clients = [*self._extra, self._consumer, self._producer, self._admin]
        self._extra, self._consumer, self._producer, self._admin = [], None, None, None
        for client in clients:
            if client is not None:
                await stop_client(client)

    def close(self) -> None:
        """Stop the clients (a producer delivers what it holds first), then the loop."""
        if not self._finalizer.alive:
            return
        try:
            self.run(self._stop_all(), CALL_TIMEOUT_S, f"closing the Kafka clients of {self}")
        except Exception as exc:  # closing must not fail: the loop stops regardless
            log.warning("kafka.close_failed", bootstrap=self.bootstrap, error=repr(exc))
        finally:
            self._finalizer()

    def __str__(self) -> str:
        return f"{self.client_id}@{self.bootstrap}"


async def stop_client(client: Any) -> None:
    """Stop any aiokafka client (the admin client says `close`, the others `stop`)."""
    stop = getattr(client, "stop", None) or client.close
    try:
        await stop()
    except Exception as exc:  # a client that never started, a broker gone: nothing to keep
        log.debug("kafka.stop_failed", error=repr(exc))
