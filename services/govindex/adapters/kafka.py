"""Synchronous Kafka clients where a blocking client is the right tool, on aiokafka.

Topic creation at bootstrap, topic repairs after a broker lost its log, offset reads for
`govindex status` and the metrics (manual assignment, never a group join), topic scans for
`dlq` and `replay`, group offsets for `offsets reset`, and `KafkaEventPublisher`, the plain
producer that tests and benchmarks use to play an outside producer. Workers and commands
publish through the async publisher (`kafka_async`) and consume through FastStream
(`faststream`): aiokafka is the one Kafka client library of every process.

Callers are synchronous (CLI commands, threads of `asyncio.to_thread`, a test's coroutine
calling straight through), so each object here runs its aiokafka clients on an event loop
of its own, on a thread of its own (`_Loop`), and waits for each call with a bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka import TopicPartition
from aiokafka.admin import NewPartitions, NewTopic

from govindex.adapters.kafka_blocking import Clients
from govindex.adapters.kafka_metadata import Described, check_created, describe_topics
from govindex.adapters.kafka_offsets import (
    GroupOffsets,
    OffsetReader,
    PartitionLag,
    offsets_at,
    topic_bounds,
)
from govindex.adapters.kafka_security import PLAINTEXT, KafkaSecurity
from govindex.core.envelope import KafkaRecord, TopicRecord
from govindex.core.errors import TransientError

log = structlog.get_logger(__name__)

__all__ = [
    "GroupOffsets",
    "KafkaEventPublisher",
    "OffsetReader",
    "PartitionLag",
    "TopicKeeper",
    "TopicScanner",
    "TopicState",
    "ensure_topics",
    "offsets_at",
]


def ensure_topics(
    bootstrap: str,
    topics: Iterable[str],
    partitions: int,
    security: KafkaSecurity = PLAINTEXT,
) -> list[str]:
    """Create missing topics; return the names created."""
    names = list(topics)

    async def ensure() -> list[str]:
        admin = await kafka.admin()
        existing = set(await admin.list_topics())
        missing = [name for name in names if name not in existing]
        if missing:
            check_created(
                await admin.create_topics(
                    [NewTopic(name, partitions, 1) for name in missing], timeout_ms=10_000
                )
            )
        return missing

    kafka = Clients(bootstrap, security, "govindex-admin")
    try:
        return kafka.run(ensure(), what=f"cannot create topics on {bootstrap}")
    finally:
        kafka.close()


@dataclass(frozen=True)
class TopicState:
    """What the broker holds of one topic: its id (None: missing) and partition count.

    The id is "" for a topic of a broker that keeps no topic ids (Metadata before v10):
    there a lost log shows only as a missing topic or missing partitions."""

    topic_id: str | None
    partitions: int


class TopicKeeper:
    """Checks that topics exist with their partitions, and puts back what a broker lost.

    A broker that lost its log (the embedded one restarted, a cluster rebuilt) lists a topic
    as missing, or with no partitions, or under a new topic id once a client re-created it
    by auto-creation. Repairs only ever add: a missing topic is created and a topic with
    fewer partitions than wanted grows; nothing is deleted (an operator may have given a
    topic more partitions on purpose). A blocking client: call it from a thread. Its
    client (and loop thread) is made on first use and dropped on an error, so the next
    check starts afresh against what may be a new broker process.
    """

    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._kafka: Clients | None = None

    def _client(self) -> Clients:
        if self._kafka is None:
            self._kafka = Clients(self._bootstrap, self._security, "govindex-topics")
        return self._kafka

    def states(self, topics: Iterable[str]) -> dict[str, TopicState]:
        names = list(topics)
        kafka = self._client()

        async def describe() -> dict[str, Described]:
            return await describe_topics((await kafka.admin())._client, names)

        try:
            found = kafka.run(describe(), what=f"cannot describe topics on {self._bootstrap}")
        except TransientError:
            self.close()  # a fresh client next time: the broker may be a new process
            raise
        states = {name: TopicState(None, 0) for name in names}
        for name, entry in found.items():
            if entry.error_code == 0 and name in states:
                states[name] = TopicState(entry.topic_id, len(entry.partitions))
        return states

    def repair(self, wanted: Mapping[str, int], states: Mapping[str, TopicState]) -> list[str]:
        """Create the missing topics and grow the short ones; return the names changed."""
        kafka = self._client()
        missing = [n for n in wanted if states[n].topic_id is None or not states[n].partitions]
        short = {
            n: NewPartitions(wanted[n])
            for n in wanted
            if n not in missing and states[n].partitions < wanted[n]
        }

        async def repair() -> None:
            admin = await kafka.admin()
            if missing:
                check_created(
                    await admin.create_topics(
                        [NewTopic(n, wanted[n], 1) for n in missing], timeout_ms=10_000
                    )
                )
            if short:
                await admin.create_partitions(short, timeout_ms=10_000)

        try:
            kafka.run(repair(), what=f"cannot repair topics on {self._bootstrap}")
        except TransientError:
            self.close()
            raise
        if missing or short:
            log.info("kafka.topics_repaired", created=missing, grown=sorted(short))
        return [*missing, *short]

    def close(self) -> None:
        if self._kafka is not None:
            self._kafka.close()
            self._kafka = None


# --- the plain producer --------------------------------------------------------------------


class KafkaEventPublisher:
    """A blocking producer (acks=all) for load generators and tests.

    `publish` returns once the record is queued (records keep their order), `flush` once
    the broker acknowledged every one, and raises if it refused any. It connects in its
    constructor: a broker that cannot be reached is said there."""

    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._kafka = Clients(bootstrap, security, "govindex-cli")
        self._pending: list[asyncio.Future[Any]] = []  # touched on the loop only
        try:
            self._kafka.run(self._kafka.producer())
        except BaseException:
            self._kafka.close()
            raise

    def publish(self, topic: str, record: KafkaRecord) -> None:
        async def send() -> None:
            producer = await self._kafka.producer()
            self._pending.append(
                await producer.send(
                    topic, key=record.key, value=record.value, headers=record.headers
                )
            )

        self._kafka.run(send(), what=f"Kafka did not take the event for {topic}")

    def flush(self, timeout: float = 30.0) -> None:
        async def flush() -> None:
            producer = await self._kafka.producer()
            await producer.flush()
            pending, self._pending = self._pending, []
            answers = await asyncio.gather(*pending, return_exceptions=True)
            refused = [a for a in answers if isinstance(a, BaseException)]
            if refused:
                raise TransientError(
                    f"Kafka did not acknowledge {len(refused)} of {len(answers)} events: "
                    f"{refused[0]!r}"
                )

        self._kafka.run(flush(), timeout, what="Kafka did not acknowledge the events")

    def close(self) -> None:
        self._kafka.close()

    def __enter__(self) -> KafkaEventPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- offsets ------------------------------------------------------------------------------


class TopicScanner:
    """Reads a topic between offsets, partition by partition, with manual assignment (an
    operator tool must never join, and so rebalance, a consumer group)."""

    def __init__(
        self,
        bootstrap: str,
        security: KafkaSecurity = PLAINTEXT,
        *,
        idle_timeout_s: float = 15.0,
    ) -> None:
        self._kafka = Clients(bootstrap, security, "govindex-scan")
        try:
            self._kafka.run(self._kafka.consumer(max_poll_records=500))
        except BaseException:
            self._kafka.close()
            raise
        self._idle_timeout_s = idle_timeout_s

    def close(self) -> None:
        self._kafka.close()

    def __enter__(self) -> TopicScanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def bounds(self, topic: str) -> tuple[dict[int, int], dict[int, int]]:
        """(first offset, end offset) of every partition: what a scan of it all covers."""
        return self._kafka.run(
            topic_bounds(self._kafka, topic, "does not exist on the broker (yet)")
        )

    def at_time(self, topic: str, partitions: Iterable[int], ms: int) -> dict[int, int | None]:
        """The first offset whose timestamp is at or after `ms`, per partition (None:
        nothing that late)."""
        wanted = list(partitions)

        async def at() -> dict[int, int | None]:
            return await offsets_at(await self._kafka.consumer(), topic, wanted, ms)

        return self._kafka.run(at())

    def read(
        self, topic: str, start: Mapping[int, int], end: Mapping[int, int]
    ) -> Iterator[TopicRecord]:
        """Records of `topic` from `start` up to (not including) `end`, per partition in
        offset order, partitions one after another."""

        async def assign(tp: TopicPartition, position: int) -> None:
            consumer = await self._kafka.consumer()
            consumer.assign([tp])
            consumer.seek(tp, position)

        async def poll(tp: TopicPartition) -> list[Any]:
            got = await (await self._kafka.consumer()).getmany(tp, timeout_ms=500)
            return list(got.get(tp, []))

        async def unassign() -> None:
            (await self._kafka.consumer()).assign([])

        for partition in sorted(end):
            position, stop = start.get(partition, 0), end[partition]
            if position >= stop:
                continue
            tp = TopicPartition(topic, partition)
            self._kafka.run(assign(tp, position))
            idle_since = time.monotonic()
            while position < stop:
                batch = self._kafka.run(poll(tp))
                if not batch:
                    if time.monotonic() - idle_since > self._idle_timeout_s:
                        raise TransientError(
                            f"{topic}[{partition}] returned nothing at offset {position} "
                            f"(end {stop}) for {self._idle_timeout_s:.0f} s; is the broker up?"
                        )
                    continue
                idle_since = time.monotonic()
                for m in batch:
                    if m.offset >= stop:
                        break
                    position = m.offset + 1
                    yield TopicRecord(
                        topic,
                        partition,
                        m.offset,
                        int(m.timestamp),
                        m.key,
                        m.value,
                        [(k, bytes(v or b"")) for k, v in m.headers],
                    )
                else:
                    continue
                break
        self._kafka.run(unassign())
