"""Where a consumer starts on the real broker once the broker may have lost its log.

The embedded broker (Tansu) answers a fetch past a partition's end with no records where
Kafka answers it out of range, so a group offset committed into a new log from the lost
one would hold a consumer there; and a member of the lost group that leaves after a
rejoined consumer started hands it partitions with worthless commits. Both consumers the
workers run (the lanes and FastStream's subscriber) read such partitions from the start.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from govindex.adapters.faststream import new_broker, subscribe
from govindex.adapters.kafka import ensure_topics
from govindex.adapters.kafka_lanes import LanePolicy, PartitionLanes
from govindex.core.envelope import Delivery
from tests.support.pipeline import until

pytestmark = pytest.mark.integration

POLICY = LanePolicy(max_events=1, linger_s=0.0, retry_after_error_s=0.2)
PAST_THE_END = 300  # an old log's position; the new one holds a handful of records
NEW_LOG = {b"a", b"b", b"c"}


def _topic(bootstrap: str, partitions: int) -> tuple[str, str]:
    topic = f"start-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, [topic], partitions)
    return topic, f"g-{topic}"


async def _produce(bootstrap: str, topic: str, partition: int, *values: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, partition=partition)
    finally:
        await producer.stop()


async def _commit(bootstrap: str, group: str, tp: TopicPartition, offset: int) -> None:
    """What a member of the lost group commits into the new log as it stops."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.commit({tp: OffsetAndMetadata(offset, "")})
        assert await consumer.committed(tp) == offset
    finally:
        await consumer.stop()


async def _committed_past_the_end(bootstrap: str) -> tuple[str, str]:
    """A topic holding NEW_LOG, and a group whose commit lies far past its end."""
    topic, group = _topic(bootstrap, 1)
    await _produce(bootstrap, topic, 0, *sorted(NEW_LOG))
    await _commit(bootstrap, group, TopicPartition(topic, 0), PAST_THE_END)
    return topic, group


def _count(items: Sequence[bytes]) -> Callable[[], Awaitable[set[bytes]]]:
    async def read() -> set[bytes]:
        return set(items)

    return read


async def test_lanes_read_from_the_start_a_partition_committed_past_its_end(
    stack: dict[str, str],
) -> None:
    bootstrap = stack["kafka_bootstrap"]
    topic, group = await _committed_past_the_end(bootstrap)
    handled: list[bytes] = []

    async def on_batch(batch: Sequence[Delivery]) -> None:
        handled.extend(d.value or b"" for d in batch)

    lanes = PartitionLanes(
        bootstrap, topic=topic, group_id=group, client_id="t", on_batch=on_batch, policy=POLICY
    )
    await lanes.start()
    try:
        await until(_count(handled), lambda got: got == NEW_LOG, 30, "the new log")
    finally:
        await lanes.stop()


async def test_a_subscriber_reads_from_the_start_a_partition_committed_past_its_end(
    stack: dict[str, str],
) -> None:
    bootstrap = stack["kafka_bootstrap"]
    topic, group = await _committed_past_the_end(bootstrap)
    handled: list[bytes] = []

    async def on_delivery(delivery: Delivery) -> None:
        handled.append(delivery.value or b"")

    broker = new_broker(bootstrap, "t")
    subscribe(broker, topic=topic, group_id=group, name="start", on_delivery=on_delivery)
    await broker.start()
    try:
        await until(_count(handled), lambda got: got == NEW_LOG, 30, "the new log")
    finally:
        await broker.stop()


async def test_a_rejoined_consumer_rewinds_what_a_lost_member_hands_it_later(
    stack: dict[str, str],
) -> None:
    """A member of the lost group still holds one partition when the rejoined lanes
    start; it commits an old position (inside the new log) and leaves. The lanes are
    handed that partition on their second assignment and read it from its start."""
    bootstrap = stack["kafka_bootstrap"]
    topic, group = _topic(bootstrap, 2)
    values = {p: [f"p{p}-{n}".encode() for n in range(5)] for p in (0, 1)}
    for partition, records in values.items():
        await _produce(bootstrap, topic, partition, *records)
    lost = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await lost.start()
    handled: list[bytes] = []

    async def on_batch(batch: Sequence[Delivery]) -> None:
        handled.extend(d.value or b"" for d in batch)

    lanes = PartitionLanes(
        bootstrap,
        topic=topic,
        group_id=group,
        client_id="t",
        on_batch=on_batch,
        policy=POLICY,
        rewind=True,
    )
    try:
        await until(_assigned(lost), lambda n: n == 2, 30, "the lost member holding both")
        await lanes.start()

        async def split() -> tuple[int, int]:
            return len(lost.assignment()), len(lanes.assigned)

        await until(split, lambda s: s == (1, 1), 60, "one partition each")
        (held,) = lost.assignment()
        await lost.commit({held: OffsetAndMetadata(2, "")})  # worthless in the new log
    finally:
        await lost.stop()
    try:
        every = set(values[0] + values[1])
        await until(_count(handled), lambda got: got == every, 60, "both partitions, whole")
    finally:
        await lanes.stop()


def _assigned(consumer: AIOKafkaConsumer) -> Callable[[], Awaitable[int]]:
    async def read() -> int:
        return len(consumer.assignment())

    return read
