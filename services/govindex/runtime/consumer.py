"""How every worker handles a record: decode, handle with retries, dead-letter what is permanent.

Nothing healthy is dead-lettered (transient errors are retried, then raised so the offset
is not committed); nothing bad is dropped silently (permanent errors go to the dead-letter
topic with the reason in headers, durably, before the handler returns).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from govindex.core import metrics, tracing
from govindex.core.envelope import Delivery, Envelope, decode
from govindex.core.errors import PermanentError
from govindex.core.ports import DeadLetterLog, EventPublisher
from govindex.core.retry import retry_transient
from govindex.runtime.deadletter import dead_letter

log = structlog.get_logger(__name__)

Handle = Callable[[Envelope], Awaitable[Any]]
DeliveryHandle = Callable[[Delivery], Awaitable[Any]]


async def process(
    delivery: Delivery,
    handle: Handle | DeliveryHandle,
    *,
    consumer: str,
    dead_letters_topic: str,
    publisher: EventPublisher,
    dead_letters: DeadLetterLog,
    raw: bool = False,
) -> None:
    """Handle one record; `raw` handlers take the Delivery itself (not a CloudEvent).

    A dead letter is on its topic and, for a CloudEvent, recorded as settled in Postgres
    before this returns (so before the offset moves): it is never re-published.
    """
    label = metrics.consumer_label(consumer)  # a CDC feed's source id is never a label
    structlog.contextvars.bind_contextvars(
        consumer=consumer,
        topic=delivery.topic,
        partition=delivery.partition,
        offset=delivery.offset,
    )
    try:
        target: Any = delivery
        try:
            if not raw:
                target = decode(delivery.key, delivery.value, delivery.headers)
                structlog.contextvars.bind_contextvars(
                    event_id=target.id, trace_id=tracing.trace_id(target.extensions)
                )
            traced = [target.extensions] if isinstance(target, Envelope) else [{}]
            with tracing.consuming(consumer, traced):
                result = await retry_transient(lambda: handle(target), what=consumer)
            kind = target.type if isinstance(target, Envelope) else "raw"
            metrics.EVENTS.labels(label, kind, metrics.outcome_of(result)).inc()
        except PermanentError as error:
            kind = target.type if isinstance(target, Envelope) else "raw"
            metrics.EVENTS.labels(label, kind, "dead_lettered").inc()
            metrics.DEAD_LETTERS.labels(label, error.reason).inc()
            record = dead_letter(delivery, error, consumer)
            await retry_transient(
                lambda: publisher.publish(dead_letters_topic, record), what="dead-letter publish"
            )
            if isinstance(target, Envelope):
                event_id, reason = target.id, error.reason
                await retry_transient(
                    lambda: dead_letters.dead_lettered(consumer, event_id, reason),
                    what="dead-letter record",
                )
            log.warning("event.dead_lettered", reason=error.reason, error=str(error))
    finally:
        structlog.contextvars.unbind_contextvars(
            "consumer", "topic", "partition", "offset", "event_id", "trace_id"
        )


def processor(
    handle: Handle | DeliveryHandle,
    *,
    consumer: str,
    dead_letters_topic: str,
    publisher: EventPublisher,
    dead_letters: DeadLetterLog,
    raw: bool = False,
) -> Callable[[Delivery], Awaitable[None]]:
    """`process` bound to one handler: what a subscriber calls for each record."""

    async def on_delivery(delivery: Delivery) -> None:
        await process(
            delivery,
            handle,
            consumer=consumer,
            dead_letters_topic=dead_letters_topic,
            publisher=publisher,
            dead_letters=dead_letters,
            raw=raw,
        )

    return on_delivery
