"""How every worker consumes: decode, handle with retries, dead-letter what is permanent.

The offset is committed only when `process` returns (FastStream AckPolicy.NACK_ON_ERROR):
a transient failure that outlasts the retry budget raises, FastStream seeks back, and the
record is delivered again. Nothing healthy is dead-lettered; nothing bad is dropped silently.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage

from govindex.core.envelope import Delivery, Envelope, KafkaRecord, decode
from govindex.core.errors import PermanentError
from govindex.runtime.deadletter import dead_letter
from govindex.runtime.retry import retry_transient

log = structlog.get_logger(__name__)

Handle = Callable[[Envelope], Awaitable[Any]]
Publish = Callable[[str, KafkaRecord], Awaitable[None]]


DeliveryHandle = Callable[[Delivery], Awaitable[Any]]


async def process(
    delivery: Delivery,
    handle: Handle | DeliveryHandle,
    *,
    consumer: str,
    dead_letters_topic: str,
    publish: Publish,
    raw: bool = False,
) -> None:
    """Handle one record; `raw` handlers take the Delivery itself (not a CloudEvent)."""
    structlog.contextvars.bind_contextvars(
        consumer=consumer,
        topic=delivery.topic,
        partition=delivery.partition,
        offset=delivery.offset,
    )
    try:
        try:
            target: Any = delivery
            if not raw:
                target = decode(delivery.key, delivery.value, delivery.headers)
                structlog.contextvars.bind_contextvars(event_id=target.id)
            await retry_transient(lambda: handle(target), what=consumer)
        except PermanentError as error:
            record = dead_letter(delivery, error, consumer)
            await retry_transient(
                lambda: publish(dead_letters_topic, record), what="dead-letter publish"
            )
            log.warning("event.dead_lettered", reason=error.reason, error=str(error))
    finally:
        structlog.contextvars.unbind_contextvars(
            "consumer", "topic", "partition", "offset", "event_id"
        )


async def _keep_raw(message: Any) -> None:
    """Decoder that decodes nothing: handlers read the raw record, so bad bytes never fail
    inside FastStream (where they would be redelivered forever) but reach our dead letters."""
    return None


def subscribe(
    broker: KafkaBroker,
    *,
    topic: str,
    group_id: str,
    consumer: str,
    handle: Handle | DeliveryHandle,
    dead_letters_topic: str,
    publish: Publish,
    raw: bool = False,
) -> None:
    """Register a subscriber that runs `process` for every record of `topic`."""

    async def on_record(body: Any, msg: KafkaMessage) -> None:
        record: Any = msg.raw_message  # aiokafka ConsumerRecord (one record, not a batch)
        delivery = Delivery(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            key=record.key,
            value=record.value,
            headers=list(record.headers or []),
        )
        await process(
            delivery,
            handle,
            consumer=consumer,
            dead_letters_topic=dead_letters_topic,
            publish=publish,
            raw=raw,
        )

    on_record.__name__ = f"on_{consumer}_record"
    broker.subscriber(
        topic,
        group_id=group_id,
        ack_policy=AckPolicy.NACK_ON_ERROR,
        auto_offset_reset="earliest",
        decoder=_keep_raw,
    )(on_record)
