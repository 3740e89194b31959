"""What a service's app says it consumes: the record a worker process subscribes from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from govindex.core.settings import Settings


@dataclass(frozen=True)
class Subscription:
    """One consumer: which topic, which group, which handler (raw: takes the Delivery).

    With `batched`, `handle` takes a list of envelopes and returns one result per envelope
    (a PermanentError for each to dead-letter), and the worker runs it in per-partition
    lanes of batches.
    """

    name: str
    topic: str
    group: str
    consumer: str
    handle: Callable[[Any], Awaitable[Any]]
    raw: bool = False
    batched: bool = False


def subscription(
    settings: Settings,
    consumer: str,
    topic: str,
    handle: Callable[[Any], Awaitable[Any]],
    *,
    raw: bool = False,
    batched: bool = False,
) -> Subscription:
    """A consumer named `consumer` in its own group (`namespace.consumer`) on `topic`."""
    name = consumer.replace(":", "-")
    return Subscription(
        name, topic, settings.group(consumer.replace(":", ".")), consumer, handle, raw, batched
    )
