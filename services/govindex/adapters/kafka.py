"""Synchronous Kafka clients (kafka-python) where a blocking client is the right tool.

Topic creation at bootstrap, offset reads for `govindex status` (manual assignment, never a
group join), and `KafkaEventPublisher`, the plain producer that tests and benchmarks use to
play an outside producer. Workers and commands publish through the async publisher
(`kafka_async`) and consume through FastStream (`faststream`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import structlog
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from govindex.adapters.kafka_security import PLAINTEXT, KafkaSecurity, kafka_python_options
from govindex.core.envelope import KafkaRecord, TopicRecord
from govindex.core.errors import TransientError

log = structlog.get_logger(__name__)


def ensure_topics(
    bootstrap: str,
    topics: Iterable[str],
    partitions: int,
    security: KafkaSecurity = PLAINTEXT,
) -> list[str]:
    """Create missing topics; return the names created."""
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            client_id="govindex-admin",
            **kafka_python_options(security),
        )
    except KafkaError as exc:
        raise TransientError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
    try:
        existing = set(admin.list_topics())
        missing = [name for name in topics if name not in existing]
        if missing:
            # Another process may have created them since we listed: that is fine.
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics(
                    [NewTopic(name, partitions, 1) for name in missing], timeout_ms=10_000
                )
        return missing
    finally:
        admin.close()


@dataclass(frozen=True)
class TopicState:
    """What the broker holds of one topic: its id (None: missing) and partition count."""

    topic_id: str | None
    partitions: int


class TopicKeeper:
    """Checks that topics exist with their partitions, and puts back what a broker lost.

    A broker that lost its log (the embedded one restarted, a cluster rebuilt) lists a topic
    as missing, or with no partitions, or under a new topic id once a client re-created it
    by auto-creation. Repairs only ever add: a missing topic is created and a topic with
    fewer partitions than wanted grows; nothing is deleted (an operator may have given a
    topic more partitions on purpose). A blocking client: call it from a thread.
    """

    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._admin: KafkaAdminClient | None = None

    def _client(self) -> KafkaAdminClient:
        if self._admin is None:
            try:
                self._admin = KafkaAdminClient(
                    bootstrap_servers=self._bootstrap,
                    client_id="govindex-topics",
                    request_timeout_ms=10_000,
                    **kafka_python_options(self._security),
                )
            except KafkaError as exc:
                raise TransientError(f"cannot reach Kafka at {self._bootstrap}: {exc}") from exc
        return self._admin

    def states(self, topics: Iterable[str]) -> dict[str, TopicState]:
        names = list(topics)
        try:
            found = self._client().describe_topics(names)
        except KafkaError as exc:
            self.close()  # a fresh client next time: the broker may be a new process
            raise TransientError(f"cannot describe topics on {self._bootstrap}: {exc}") from exc
        states = {name: TopicState(None, 0) for name in names}
        for entry in found:
            if entry.get("error_code", 0) == 0 and entry["name"] in states:
                states[entry["name"]] = TopicState(
                    entry.get("topic_id"), len(entry.get("partitions") or [])
                )
        return states

    def repair(self, wanted: Mapping[str, int], states: Mapping[str, TopicState]) -> list[str]:
        """Create the missing topics and grow the short ones; return the names changed."""
        admin = self._client()
        missing = [n for n in wanted if states[n].topic_id is None or not states[n].partitions]
        short = {
            n: NewPartitions(wanted[n])
            for n in wanted
            if n not in missing and states[n].partitions < wanted[n]
        }
        try:
            if missing:
                with contextlib.suppress(TopicAlreadyExistsError):
                    admin.create_topics(
                        [NewTopic(n, wanted[n], 1) for n in missing], timeout_ms=10_000
                    )
            if short:
                admin.create_partitions(short, timeout_ms=10_000)
        except KafkaError as exc:
            self.close()
            raise TransientError(f"cannot repair topics on {self._bootstrap}: {exc}") from exc
        return [*missing, *short]

    def close(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None


class KafkaEventPublisher:
    """A blocking producer (acks=all) for load generators and tests, never on an event loop."""

    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=bootstrap,
                acks="all",
                linger_ms=5,
                max_request_size=8 * 1024 * 1024,
                client_id="govindex-cli",
                **kafka_python_options(security),
            )
        except KafkaError as exc:
            raise TransientError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc

    def publish(self, topic: str, record: KafkaRecord) -> None:
        self._producer.send(topic, key=record.key, value=record.value, headers=record.headers)

    def flush(self, timeout: float = 30.0) -> None:
        try:
            self._producer.flush(timeout=timeout)
        except KafkaError as exc:
            raise TransientError(f"Kafka did not acknowledge the events: {exc}") from exc

    def close(self) -> None:
        self._producer.close(timeout=10)

    def __enter__(self) -> KafkaEventPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class PartitionLag:
    partition: int
    end_offset: int
    committed: int | None

    @property
    def lag(self) -> int:
        return self.end_offset - (self.committed or 0)


class OffsetReader:
    """Reads end offsets and committed group offsets with manual assignment (no group join)."""

    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            client_id="govindex-offsets",
            **kafka_python_options(security),
        )

    def close(self) -> None:
        self._consumer.close()

    def partitions(self, topic: str) -> list[TopicPartition]:
        found = self._consumer.partitions_for_topic(topic) or set()
        return [TopicPartition(topic, p) for p in sorted(found)]

    def end_offsets(self, topic: str) -> dict[int, int]:
        """True end offsets: one past the last record of each partition.

        Some Kafka-compatible brokers report a batch's base offset + 1 as the high watermark;
        reading the last batch gives the real end, and on Apache Kafka changes nothing.
        """
        partitions = self.partitions(topic)
        if not partitions:
            return {}
        reported = self._consumer.end_offsets(partitions)
        result: dict[int, int] = {}
        for tp in partitions:
            end = int(reported[tp])
            if end > 0:
                self._consumer.assign([tp])
                self._consumer.seek(tp, end - 1)
                records = self._consumer.poll(timeout_ms=2000).get(tp, [])
                if records:
                    end = max(end, records[-1].offset + 1)
            result[tp.partition] = end
        self._consumer.assign([])
        return result

    def timestamps(self, topic: str, offsets: Mapping[int, int]) -> dict[int, int]:
        """The timestamp (ms) of the record at each given offset (absent: not readable)."""
        found: dict[int, int] = {}
        for partition, offset in offsets.items():
            tp = TopicPartition(topic, partition)
            self._consumer.assign([tp])
            self._consumer.seek(tp, offset)
            records = self._consumer.poll(timeout_ms=1000, max_records=1).get(tp, [])
            if records:
                found[partition] = int(records[0].timestamp)
        self._consumer.assign([])
        return found

    def lag(self, topic: str, group: str) -> list[PartitionLag]:
        ends = self.end_offsets(topic)
        committed_consumer = KafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=group,
            enable_auto_commit=False,
            **kafka_python_options(self._security),
        )
        try:
            out = []
            for partition, end in sorted(ends.items()):
                committed = committed_consumer.committed(TopicPartition(topic, partition))
                out.append(PartitionLag(partition, end, committed))
            return out
        finally:
            committed_consumer.close()


def offsets_at(
    consumer: KafkaConsumer, topic: str, partitions: Iterable[int], ms: int
) -> dict[int, int | None]:
    """The first offset whose timestamp is at or after `ms`, per partition; None when no
    record is that late (Kafka answers offset -1, read as None; some compatible brokers
    answer offset 0 with timestamp -1, read the same way)."""
    query = {TopicPartition(topic, p): ms for p in partitions}
    found = consumer.offsets_for_times(query)
    return {
        tp.partition: (int(v.offset) if v is not None and v.timestamp >= 0 else None)
        for tp, v in found.items()
    }


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
        self._offsets = OffsetReader(bootstrap, security)
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            client_id="govindex-scan",
            max_poll_records=500,
            **kafka_python_options(security),
        )
        self._idle_timeout_s = idle_timeout_s

    def close(self) -> None:
        self._consumer.close()
        self._offsets.close()

    def __enter__(self) -> TopicScanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def bounds(self, topic: str) -> tuple[dict[int, int], dict[int, int]]:
        """(first offset, end offset) of every partition: what a scan of it all covers."""
        partitions = self._offsets.partitions(topic)
        if not partitions:
            raise TransientError(f"topic {topic!r} does not exist on the broker (yet)")
        first = self._consumer.beginning_offsets(partitions)
        return {tp.partition: int(first[tp]) for tp in partitions}, self._offsets.end_offsets(topic)

    def at_time(self, topic: str, partitions: Iterable[int], ms: int) -> dict[int, int | None]:
        """The first offset whose timestamp is at or after `ms`, per partition (None:
        nothing that late)."""
        return offsets_at(self._consumer, topic, partitions, ms)

    def read(
        self, topic: str, start: Mapping[int, int], end: Mapping[int, int]
    ) -> Iterator[TopicRecord]:
        """Records of `topic` from `start` up to (not including) `end`, per partition in
        offset order, partitions one after another."""
        for partition in sorted(end):
            position, stop = start.get(partition, 0), end[partition]
            if position >= stop:
                continue
            tp = TopicPartition(topic, partition)
            self._consumer.assign([tp])
            self._consumer.seek(tp, position)
            idle_since = time.monotonic()
            while position < stop:
                batch = self._consumer.poll(timeout_ms=500).get(tp, [])
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
        self._consumer.assign([])


class GroupOffsets:
    """A consumer group's committed offsets: read, and set while the group is empty
    (what `kafka-consumer-groups --reset-offsets` does), with manual assignment only."""

    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._offsets = OffsetReader(bootstrap, security)
        options = kafka_python_options(security)
        self._admin = KafkaAdminClient(
            bootstrap_servers=bootstrap, client_id="govindex-offsets", **options
        )
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            client_id="govindex-offsets",
            **options,
        )

    def close(self) -> None:
        for client in (self._consumer, self._admin):
            with contextlib.suppress(Exception):
                client.close()
        self._offsets.close()

    def __enter__(self) -> GroupOffsets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions(self, topic: str) -> list[int]:
        return [tp.partition for tp in self._offsets.partitions(topic)]

    def bounds(self, topic: str) -> tuple[dict[int, int], dict[int, int]]:
        """(first, end) offset of every partition (end: one past the last record)."""
        tps = self._offsets.partitions(topic)
        if not tps:
            raise TransientError(f"topic {topic!r} does not exist on the broker")
        first = self._consumer.beginning_offsets(tps)
        return {tp.partition: int(first[tp]) for tp in tps}, self._offsets.end_offsets(topic)

    def committed(self, group: str, topic: str) -> dict[int, int | None]:
        try:
            found = self._admin.list_group_offsets({group: None}).get(group, {})
        except KafkaError as exc:
            raise TransientError(f"cannot read group {group!r} offsets: {exc}") from exc
        return {
            p: (int(found[tp].offset) if tp in found and found[tp].offset >= 0 else None)
            for p in self.partitions(topic)
            for tp in [TopicPartition(topic, p)]
        }

    def at_time(self, topic: str, partitions: Iterable[int], ms: int) -> dict[int, int | None]:
        """The first offset at or after `ms` per partition (None: nothing that late)."""
        return offsets_at(self._consumer, topic, partitions, ms)

    def members(self, group: str) -> int | None:
        """How many members the group has; None when the broker does not say."""
        try:
            described = self._admin.describe_groups([group])
        except Exception:  # some Kafka-compatible brokers answer what kafka-python cannot read
            return None
        info = described.get(group) or {}
        return len(info.get("members") or [])

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> dict[int, str]:
        """Set the group's offsets; per partition the broker's refusal, if any (a group with
        live members refuses: UnknownMemberId, RebalanceInProgress and the like)."""
        from kafka.structs import OffsetAndMetadata

        wanted = {
            TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()
        }
        try:
            answer = self._admin.alter_group_offsets(group, wanted)
        except KafkaError as exc:
            return {p: type(exc).__name__ for p in offsets}
        return {
            tp.partition: getattr(error, "__name__", str(error))
            for tp, error in answer.items()
            if getattr(error, "__name__", "") != "NoError"
        }

    def commit_as_member(
        self, group: str, topic: str, offsets: Mapping[int, int], timeout_s: float = 90.0
    ) -> None:
        """Commit by joining the group as its only member, then leaving it.

        For brokers that refuse an outside commit to a group whose members have all left
        (the embedded broker keeps such a group non-empty): only called once govindex's own
        workers of the group are known paused. The join waits for departed members to
        time out; it fails if anyone else is assigned a partition.
        """
        from kafka.structs import OffsetAndMetadata

        consumer = KafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=group,
            enable_auto_commit=False,
            client_id="govindex-offsets-reset",
            **kafka_python_options(self._security),
        )
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + timeout_s
            while not consumer.assignment():
                if time.monotonic() > deadline:
                    raise TransientError(f"could not join {group} within {timeout_s:.0f} s")
                consumer.poll(timeout_ms=200, max_records=1)
            held = {tp.partition for tp in consumer.assignment()}
            if not set(offsets) <= held:
                raise TransientError(
                    f"another member of {group} holds partitions {sorted(set(offsets) - held)}"
                )
            consumer.commit(
                {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
            )
        finally:
            consumer.close()
