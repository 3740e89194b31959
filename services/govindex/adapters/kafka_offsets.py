"""Offsets on aiokafka, blocking: partition ends and lag for `govindex status` and the
metrics, offsets by time for replays, and a group's offsets for `offsets reset` (read
and committed from outside the group, or as a member where the broker needs one)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka import TopicPartition
from aiokafka.errors import for_code
from aiokafka.protocol.commit import OffsetCommitRequest
from aiokafka.structs import OffsetAndMetadata

from govindex.adapters.kafka_blocking import CALL_TIMEOUT_S, Clients, stop_client
from govindex.adapters.kafka_metadata import topic_partitions
from govindex.adapters.kafka_security import PLAINTEXT, KafkaSecurity
from govindex.core.errors import TransientError

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class PartitionLag:
    partition: int
    end_offset: int
    committed: int | None

    @property
    def lag(self) -> int:
        return self.end_offset - (self.committed or 0)


async def end_offsets(kafka: Clients, topic: str) -> dict[int, int]:
    """True end offsets: one past the last record of each partition.

    Some Kafka-compatible brokers report a batch's base offset + 1 as the high watermark;
    reading the last batch gives the real end, and on Apache Kafka changes nothing.
    """
    consumer = await kafka.consumer()
    partitions = await topic_partitions(consumer._client, topic)
    if not partitions:
        return {}
    reported = await consumer.end_offsets(partitions)
    result: dict[int, int] = {}
    try:
        for tp in partitions:
            end = int(reported[tp])
            if end > 0:
                consumer.assign([tp])
                consumer.seek(tp, end - 1)
                records = (await consumer.getmany(tp, timeout_ms=2000)).get(tp, [])
                if records:
                    end = max(end, records[-1].offset + 1)
            result[tp.partition] = end
    finally:
        consumer.assign([])
    return result


async def committed_offsets(
    kafka: Clients, group: str, partitions: list[TopicPartition]
) -> dict[int, int | None]:
    """The group's committed offset of each partition (None: none), read with OffsetFetch:
    no member of the group is made, so nothing rebalances."""
    if not partitions:
        return {}
    admin = await kafka.admin()
    found = await admin.list_consumer_group_offsets(group, partitions=partitions)
    return {
        tp.partition: (int(found[tp].offset) if tp in found and found[tp].offset >= 0 else None)
        for tp in partitions
    }


async def offsets_at(
    consumer: Any, topic: str, partitions: Iterable[int], ms: int
) -> dict[int, int | None]:
    """The first offset whose timestamp is at or after `ms`, per partition; None when no
    record is that late (Kafka answers offset -1, read as None; some compatible brokers
    answer offset 0 with timestamp -1, read the same way). `consumer`: a started
    `AIOKafkaConsumer`."""
    query = {TopicPartition(topic, p): ms for p in partitions}
    found = await consumer.offsets_for_times(query)
    return {
        tp.partition: (
            int(v.offset) if v is not None and (v.timestamp is None or v.timestamp >= 0) else None
        )
        for tp, v in found.items()
    }


class OffsetReader:
    """Reads end offsets and committed group offsets with manual assignment (no group join)."""

    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._kafka = Clients(bootstrap, security, "govindex-offsets")
        try:
            self._kafka.run(self._kafka.consumer())
        except BaseException:
            self._kafka.close()
            raise

    def close(self) -> None:
        self._kafka.close()

    def partitions(self, topic: str) -> list[TopicPartition]:
        async def partitions() -> list[TopicPartition]:
            return await topic_partitions((await self._kafka.consumer())._client, topic)

        return self._kafka.run(partitions())

    def end_offsets(self, topic: str) -> dict[int, int]:
        """True end offsets: one past the last record of each partition (see
        `_end_offsets` for the brokers that report less)."""
        return self._kafka.run(end_offsets(self._kafka, topic))

    def timestamps(self, topic: str, offsets: Mapping[int, int]) -> dict[int, int]:
        """The timestamp (ms) of the record at each given offset (absent: not readable)."""

        async def timestamps() -> dict[int, int]:
            consumer = await self._kafka.consumer()
            found: dict[int, int] = {}
            try:
                for partition, offset in offsets.items():
                    tp = TopicPartition(topic, partition)
                    consumer.assign([tp])
                    consumer.seek(tp, offset)
                    got = await consumer.getmany(tp, timeout_ms=1000, max_records=1)
                    if records := got.get(tp, []):
                        found[partition] = int(records[0].timestamp)
            finally:
                consumer.assign([])
            return found

        return self._kafka.run(timestamps())

    def lag(self, topic: str, group: str) -> list[PartitionLag]:
        async def lag() -> list[PartitionLag]:
            ends = await end_offsets(self._kafka, topic)
            tps = [TopicPartition(topic, p) for p in sorted(ends)]
            committed = await committed_offsets(self._kafka, group, tps)
            return [PartitionLag(p, end, committed.get(p)) for p, end in sorted(ends.items())]

        return self._kafka.run(lag(), what=f"cannot read the lag of {group} on {topic}")


async def topic_bounds(
    kafka: Clients, topic: str, missing: str
) -> tuple[dict[int, int], dict[int, int]]:
    """(first, end) offset of every partition (end: one past the last record)."""
    consumer = await kafka.consumer()
    tps = await topic_partitions(consumer._client, topic)
    if not tps:
        raise TransientError(f"topic {topic!r} {missing}")
    first = await consumer.beginning_offsets(tps)
    end = await end_offsets(kafka, topic)
    return {tp.partition: int(first[tp]) for tp in tps}, end


class GroupOffsets:
    """A consumer group's committed offsets: read, and set while the group is empty
    (what `kafka-consumer-groups --reset-offsets` does), with manual assignment only."""

    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._kafka = Clients(bootstrap, security, "govindex-offsets")

        async def start() -> None:
            await self._kafka.consumer()
            await self._kafka.admin()

        try:
            self._kafka.run(start())
        except BaseException:
            self._kafka.close()
            raise

    def close(self) -> None:
        self._kafka.close()

    def __enter__(self) -> GroupOffsets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions(self, topic: str) -> list[int]:
        async def partitions() -> list[int]:
            found = await topic_partitions((await self._kafka.admin())._client, topic)
            return [tp.partition for tp in found]

        return self._kafka.run(partitions())

    def bounds(self, topic: str) -> tuple[dict[int, int], dict[int, int]]:
        """(first, end) offset of every partition (end: one past the last record)."""
        return self._kafka.run(topic_bounds(self._kafka, topic, "does not exist on the broker"))

    def committed(self, group: str, topic: str) -> dict[int, int | None]:
        async def committed() -> dict[int, int | None]:
            tps = await topic_partitions((await self._kafka.admin())._client, topic)
            return await committed_offsets(self._kafka, group, tps)

        return self._kafka.run(committed(), what=f"cannot read group {group!r} offsets")

    def at_time(self, topic: str, partitions: Iterable[int], ms: int) -> dict[int, int | None]:
        """The first offset at or after `ms` per partition (None: nothing that late)."""
        wanted = list(partitions)

        async def at() -> dict[int, int | None]:
            return await offsets_at(await self._kafka.consumer(), topic, wanted, ms)

        return self._kafka.run(at())

    def members(self, group: str) -> int | None:
        """How many members the group has; None when the broker does not say.

        A broker that keeps no record of who its members are does not say, even if it
        answers: Kafka describes every member of a consumer group with the host it joined
        from and its subscription; the embedded broker (Tansu 0.6) lists members with
        neither, the same for one that is consuming and one that left long ago (it keeps
        those), so its count cannot tell whether the group is live."""

        async def members() -> int | None:
            answers = await (await self._kafka.admin()).describe_consumer_groups([group])
            for answer in answers:
                for entry in answer.to_object()["groups"]:
                    if entry["group"] != group:
                        continue
                    found = entry["members"] or []
                    if any(not m["client_host"] and not m["member_metadata"] for m in found):
                        return None
                    return len(found)
            return 0

        try:
            return self._kafka.run(members())
        except Exception:  # some Kafka-compatible brokers answer what a client cannot read
            return None

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> dict[int, str]:
        """Set the group's offsets; per partition the broker's refusal, if any (a group with
        live members refuses: UnknownMemberId, RebalanceInProgress and the like).

        An OffsetCommit from outside the group (generation -1, no member id), sent to the
        group's coordinator: what Kafka's admin tools send."""
        wanted = dict(offsets)

        async def commit() -> dict[int, str]:
            admin = await self._kafka.admin()
            coordinator = await admin.find_coordinator(group)
            request = OffsetCommitRequest(
                group,
                OffsetCommitRequest.DEFAULT_GENERATION_ID,
                "",
                OffsetCommitRequest.DEFAULT_RETENTION_TIME,
                [(topic, [(p, o, "") for p, o in sorted(wanted.items())])],
            )
            answer = await admin._send_request(request, coordinator)
            return {
                partition: for_code(code).__name__
                for _, partitions in answer.topics
                for partition, code in partitions
                if code
            }

        try:
            return self._kafka.run(commit())
        except TransientError as exc:
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            return dict.fromkeys(wanted, type(cause).__name__)

    def commit_as_member(
        self, group: str, topic: str, offsets: Mapping[int, int], timeout_s: float = 90.0
    ) -> None:
        """Commit by joining the group as its only member, then leaving it.

        For brokers that refuse an outside commit to a group whose members have all left
        (the embedded broker keeps such a group non-empty): only called once govindex's own
        workers of the group are known paused. The join waits for departed members to
        time out; it fails if anyone else is assigned a partition.
        """
        wanted = dict(offsets)

        async def commit() -> None:
            consumer = await self._kafka.member(group, "govindex-offsets-reset")
            try:
                consumer.subscribe([topic])
                deadline = time.monotonic() + timeout_s
                while not consumer.assignment():
                    if time.monotonic() > deadline:
                        raise TransientError(f"could not join {group} within {timeout_s:.0f} s")
                    await asyncio.sleep(0.2)
                held = {tp.partition for tp in consumer.assignment()}
                if not set(wanted) <= held:
                    raise TransientError(
                        f"another member of {group} holds partitions {sorted(set(wanted) - held)}"
                    )
                await consumer.commit(
                    {TopicPartition(topic, p): OffsetAndMetadata(o, "") for p, o in wanted.items()}
                )
            finally:
                await stop_client(consumer)  # leaves the group

        self._kafka.run(
            commit(), timeout_s + CALL_TIMEOUT_S, what=f"cannot commit as a member of {group}"
        )
