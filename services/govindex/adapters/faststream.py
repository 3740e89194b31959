"""FastStream (aiokafka) consumers for the workers: one record at a time, manual acks.

The offset is committed only when the handler returns (AckPolicy.NACK_ON_ERROR): a
transient failure that outlasts the retry budget raises, FastStream seeks back, and the
record is delivered again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage

from govindex.adapters.kafka_lanes import StartInLog, delivery_of
from govindex.adapters.kafka_security import PLAINTEXT, KafkaSecurity, faststream_options
from govindex.core.envelope import Delivery

OnDelivery = Callable[[Delivery], Awaitable[None]]
Broker = KafkaBroker


def new_broker(bootstrap: str, client_id: str, security: KafkaSecurity = PLAINTEXT) -> KafkaBroker:
    return KafkaBroker(bootstrap, client_id=client_id, logger=None, **faststream_options(security))


async def _keep_raw(message: Any) -> None:
    """Decoder that decodes nothing: handlers read the raw record, so bad bytes never fail
    inside FastStream (where they would be redelivered forever) but reach our dead letters."""
    return None


def subscribe(
    broker: KafkaBroker,
    *,
    topic: str,
    group_id: str,
    name: str,
    on_delivery: OnDelivery,
    rewind: bool = False,
) -> None:
    """Register a subscriber that hands every record of `topic` to `on_delivery`;
    `rewind`: each partition is read from its beginning the first time it is assigned
    while the group settles; a committed offset past the log's end reads from the
    beginning too (see `StartInLog`)."""

    async def on_record(body: Any, msg: KafkaMessage) -> None:
        record: Any = msg.raw_message  # aiokafka ConsumerRecord (one record, not a batch)
        await on_delivery(delivery_of(record))

    on_record.__name__ = f"on_{name}_record"
    subscribers: list[Any] = []  # the subscriber builds its consumer when the broker starts
    listener = StartInLog(lambda: subscribers[0].consumer, rewind=rewind)
    subscriber = broker.subscriber(
        topic,
        group_id=group_id,
        ack_policy=AckPolicy.NACK_ON_ERROR,
        auto_offset_reset="earliest",
        decoder=_keep_raw,
        listener=listener,
    )
    subscribers.append(subscriber)
    subscriber(on_record)
