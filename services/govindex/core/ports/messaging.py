"""Events on their way out: the outbox, the dead-letter log and the publisher."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from govindex.core.envelope import KafkaRecord


class Outbox(Protocol):
    """Publishes committed outbox rows and keeps awaited events pending until applied."""

    async def relay(
        self,
        publish: Callable[[str, Sequence[KafkaRecord]], Awaitable[None]],
        limit: int = 1000,
        event_ids: Sequence[str] | None = None,
    ) -> int: ...

    async def wait_for_rows(self, timeout_s: float) -> bool: ...

    async def close_listener(self) -> None: ...

    async def settle(self) -> int: ...

    async def republish(self, after_s: float | None) -> int: ...

    async def prune(self, older_than_s: float) -> int: ...


class DeadLetterLog(Protocol):
    """Dead-lettered events count as settled: never re-published."""

    async def dead_lettered(self, consumer: str, event_id: str, reason: str) -> None: ...


class EventPublisher(Protocol):
    """Puts records on a topic and waits for the broker's acknowledgement."""

    async def publish(self, topic: str, record: KafkaRecord) -> None: ...

    async def publish_many(self, topic: str, records: Sequence[KafkaRecord]) -> None: ...
