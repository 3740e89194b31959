"""Per-partition lanes on aiokafka: batches in partition order, offsets committed by hand.

FastStream's batch subscriber hands over records of several partitions in one batch, and
its nack rewinds only the first record's partition: a failure could then skip records of
the others. So the batched consumers drive aiokafka directly:

- one lane per assigned partition, one batch in flight per lane (order within a partition
  holds; partitions progress independently);
- a lane cuts a batch at `max_events`, `max_bytes` or after `linger_s`, and pauses its
  partition while its queue holds `queue_events` records (memory stays bounded);
- the offset is committed only after `on_batch` returns, that is after every record of the
  batch is applied or durably dead-lettered, and only up to the end of that batch, which
  is the lowest unfinished offset of the lane;
- `on_batch` may return a tail: the rest of the batch's work (the deletion lane's purge).
  The lane then takes its next batch at once; tails run one at a time in batch order, and
  a batch's offset is committed after its tail and every tail before it. A tail that fails
  leaves its batch and every later one uncommitted, and the lane reads again from it (at
  most `max_tails` batches wait on tails: then the lane waits for the oldest);
- on a rebalance a revoked lane finishes its in-flight batch (bounded by `drain_s`), commits
  it and drops what it had queued: the partition's next owner starts from that commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError

from govindex.adapters.kafka_security import PLAINTEXT, KafkaSecurity, aiokafka_options
from govindex.core.envelope import Delivery
from govindex.core.errors import TransientError

log = structlog.get_logger(__name__)

Tail = Callable[[], Awaitable[None]]
OnBatch = Callable[[Sequence[Delivery]], Awaitable[Tail | None]]


@dataclass(frozen=True)
class LanePolicy:
    max_events: int = 500
    max_bytes: int = 16 * 1024 * 1024
    linger_s: float = 0.02
    queue_events: int = 2000
    drain_s: float = 60.0  # how long a revoked or stopped lane may finish its batch
    retry_after_error_s: float = 1.0
    max_tails: int = 16  # batches handled whose tails have not finished, at most
    # How long the broker may hold a fetch that finds nothing new: a broker that does not
    # answer a held fetch when records arrive makes this the lane's added latency.
    fetch_wait_ms: int = 500


class _TailFailed(Exception):
    """A batch's tail failed: it and the batches after it read again from `first`."""

    def __init__(self, first: int) -> None:
        super().__init__(f"a tail failed; reading again from offset {first}")
        self.first = first


@dataclass
class _Lane:
    tp: TopicPartition
    queue: deque[Any] = field(default_factory=deque)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False
    paused: bool = False
    task: asyncio.Task[None] | None = None
    batches: int = 0
    tails: deque[asyncio.Task[None]] = field(default_factory=deque)  # in batch order
    failed_at: int | None = None  # the first offset of a batch whose tail failed


class PartitionLanes:
    """A consumer-group member whose partitions each run as a lane of batches."""

    def __init__(
        self,
        bootstrap: str,
        *,
        topic: str,
        group_id: str,
        client_id: str,
        on_batch: OnBatch,
        policy: LanePolicy,
        rewind: bool = False,
        security: KafkaSecurity = PLAINTEXT,
    ) -> None:
        """`rewind`: read each partition from its beginning the first time it is assigned
        while the group settles, whatever the group committed (after the broker lost its
        log: see `StartInLog`)."""
        self._topic = topic
        self._group = group_id
        self._on_batch = on_batch
        self._policy = policy
        self._lanes: dict[TopicPartition, _Lane] = {}
        self._fetcher: asyncio.Task[None] | None = None
        self._stopping = False
        self._rewind = rewind
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            client_id=client_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=policy.fetch_wait_ms,
            max_partition_fetch_bytes=max(policy.max_bytes, 1024 * 1024),
            **aiokafka_options(security),
        )

    @property
    def assigned(self) -> list[int]:
        return sorted(tp.partition for tp in self._lanes)

    async def start(self) -> None:
        start = StartInLog(lambda: self._consumer, rewind=self._rewind)
        self._consumer.subscribe([self._topic], listener=_Listener(self, start))
        try:
            await self._consumer.start()
        except KafkaError as exc:
            await self._consumer.stop()
            raise TransientError(f"cannot reach Kafka: {exc}") from exc
        self._fetcher = asyncio.create_task(self._fetch(), name=f"lanes-{self._group}")

    async def stop(self) -> None:
        """Finish in-flight batches (each commits), drop queued records, leave the group."""
        self._stopping = True
        try:
            if self._fetcher is not None:
                self._fetcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._fetcher
        except Exception as exc:  # a fetcher that died: the lanes are drained all the same
            log.warning("lanes.fetcher_failed", group=self._group, error=str(exc))
        finally:
            # Always drained and always out of the group: a lanes object dropped half-stopped
            # keeps its partitions assigned to a member nobody runs, and they stall.
            try:
                await self._drain(list(self._lanes))
            finally:
                await self._consumer.stop()

    # --- fetching -----------------------------------------------------------------------

    async def _fetch(self) -> None:
        while not self._stopping:
            try:
                fetched = await self._consumer.getmany(timeout_ms=100)
            except KafkaError as exc:  # the client reconnects by itself; say so and wait
                log.warning("lanes.fetch_failed", group=self._group, error=str(exc))
                await asyncio.sleep(self._policy.retry_after_error_s)
                continue
            except Exception as exc:  # a fetcher that dies leaves its lanes fed by no one
                log.warning("lanes.fetch_failed", group=self._group, error=repr(exc))
                await asyncio.sleep(self._policy.retry_after_error_s)
                continue
            for tp, records in fetched.items():
                lane = self._lanes.get(tp)
                if lane is None or lane.stopping:
                    continue  # revoked meanwhile: the next owner reads from the commit
                lane.queue.extend(records)
                lane.arrived.set()
                if not lane.paused and len(lane.queue) >= self._policy.queue_events:
                    self._consumer.pause(tp)
                    lane.paused = True

    # --- lanes --------------------------------------------------------------------------

    def _open(self, tp: TopicPartition) -> None:
        if tp in self._lanes:
            return
        lane = _Lane(tp)
        lane.task = asyncio.create_task(self._run(lane), name=f"lane-{tp.topic}-{tp.partition}")
        self._lanes[tp] = lane
        log.info("lanes.assigned", group=self._group, partition=tp.partition)

    async def _drain(self, tps: Sequence[TopicPartition]) -> None:
        lanes = [self._lanes.pop(tp) for tp in tps if tp in self._lanes]
        for lane in lanes:
            lane.stopping = True
            lane.queue.clear()  # not started: the next owner reads them from the commit
            lane.arrived.set()
        tasks = [lane.task for lane in lanes if lane.task is not None]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=self._policy.drain_s)
        for task in pending:  # abandoned: uncommitted, so redelivered to the next owner
            log.warning("lanes.batch_abandoned", group=self._group, after_s=self._policy.drain_s)
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for lane in lanes:  # tails still running after their lane gave up: uncommitted too
            for tail in lane.tails:
                tail.cancel()
            await _settled(lane.tails)

    async def _run(self, lane: _Lane) -> None:
        try:
            await self._batches(lane)
        finally:  # a stopped lane lets its tails finish (each commits) within drain_s
            await _settled(lane.tails)

    async def _batches(self, lane: _Lane) -> None:
        while True:
            await lane.arrived.wait()
            if lane.stopping:
                return
            if lane.failed_at is not None:  # a tail failed: read again from its batch
                await _settled(lane.tails)  # the tails after it fail at once, uncommitted
                self._consumer.seek(lane.tp, lane.failed_at)
                lane.failed_at = None
                lane.queue.clear()
                lane.arrived.clear()
                await asyncio.sleep(self._policy.retry_after_error_s)
                continue
            if len(lane.queue) < self._policy.max_events:
                await asyncio.sleep(self._policy.linger_s)  # let a batch fill
            if lane.stopping:
                return
            batch = self._cut(lane)
            if not lane.queue:
                lane.arrived.clear()
            if not batch:
                continue
            try:
                tail = await self._on_batch([delivery_of(r) for r in batch])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug or a stop mid-retry: redeliver, never skip
                log.error(
                    "lanes.batch_failed",
                    group=self._group,
                    partition=lane.tp.partition,
                    first_offset=batch[0].offset,
                    error=repr(exc),
                )
                if lane.stopping or self._stopping:
                    return
                lane.queue.clear()
                lane.arrived.clear()
                self._consumer.seek(lane.tp, batch[0].offset)
                await asyncio.sleep(self._policy.retry_after_error_s)
                continue
            end = batch[-1].offset + 1
            if tail is None and not lane.tails:
                await self._commit(lane, end)
            else:
                await self._behind(lane, tail, batch[0].offset, end)
            lane.batches += 1
            if lane.paused and len(lane.queue) < self._policy.queue_events // 2:
                with contextlib.suppress(IllegalStateError):
                    self._consumer.resume(lane.tp)
                lane.paused = False

    async def _behind(self, lane: _Lane, tail: Tail | None, first: int, end: int) -> None:
        """Queue the batch's commit behind its tail and the tails before it."""
        before = lane.tails[-1] if lane.tails else None
        task = asyncio.create_task(self._after(lane, before, tail, first, end))
        lane.tails.append(task)
        while len(lane.tails) > self._policy.max_tails and not lane.stopping:
            await asyncio.wait([lane.tails[0]])

    async def _after(
        self,
        lane: _Lane,
        before: asyncio.Task[None] | None,
        tail: Tail | None,
        first: int,
        end: int,
    ) -> None:
        try:
            if before is not None:
                await before  # a failure before this one fails this one too: no commit
            if tail is not None:
                try:
                    await tail()
                except (asyncio.CancelledError, _TailFailed):
                    raise
                except Exception as exc:
                    log.error(
                        "lanes.tail_failed",
                        group=self._group,
                        partition=lane.tp.partition,
                        first_offset=first,
                        error=repr(exc),
                    )
                    raise _TailFailed(first) from exc
            await self._commit(lane, end)
        except _TailFailed as failed:
            if lane.failed_at is None:
                lane.failed_at = failed.first
            lane.arrived.set()  # wake the lane: it reads again from the failed batch
            raise
        finally:
            with contextlib.suppress(ValueError):
                lane.tails.remove(asyncio.current_task())  # type: ignore[arg-type]

    def _cut(self, lane: _Lane) -> list[Any]:
        batch: list[Any] = []
        size = 0
        while lane.queue and len(batch) < self._policy.max_events:
            record = lane.queue[0]
            weight = len(record.value or b"") + len(record.key or b"")
            if batch and size + weight > self._policy.max_bytes:
                break
            batch.append(lane.queue.popleft())
            size += weight
        return batch

    async def _commit(self, lane: _Lane, offset: int) -> None:
        """Commit the lane's progress; a failed commit is redelivery, never loss."""
        try:
            await self._consumer.commit({lane.tp: offset})
        except KafkaError as exc:  # IllegalStateError included
            log.warning(
                "lanes.commit_failed",
                group=self._group,
                partition=lane.tp.partition,
                offset=offset,
                error=str(exc),
            )


REWIND_WINDOW_S = 120.0  # after a loss: time for the lost group's members to be gone


class StartInLog(ConsumerRebalanceListener):  # type: ignore[misc]
    """Where a consumer starts reading each partition it is assigned, once the broker may
    have lost its log.

    After a loss the group's committed offsets are worthless: members of the lost group
    may even commit their old positions into the new log before they stop. Two guards:
    - `rewind` (a consumer started after the loss): each partition is read from its
      beginning the first time this consumer is assigned it within `window_s` of its
      start. The group settles in that time: a member of the lost group that has not left
      yet holds some partitions at first, and when it goes the partitions it held (with the
      positions it committed) come to this consumer. Re-reads are no-ops (the order guard);
      later assignments use the commits, as always.
    - always: a partition whose committed offset is past the log's end starts from the
      beginning, as Kafka's `auto_offset_reset="earliest"` would on an out-of-range fetch.
      A broker that does not answer such a fetch out of range (Tansu, the embedded broker,
      returns no records) would otherwise hold the consumer there, skipping every record
      until the new log grows past the old position.
    """

    def __init__(
        self,
        consumer: Callable[[], Any],
        *,
        rewind: bool = False,
        window_s: float = REWIND_WINDOW_S,
    ) -> None:
        self._consumer = consumer  # the consumer is built after its listener
        self._until = time.monotonic() + window_s if rewind else 0.0
        self._rewound: set[TopicPartition] = set()

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if not assigned:
            return
        consumer = self._consumer()
        rewind: set[TopicPartition] = set()
        if time.monotonic() < self._until:
            rewind = assigned - self._rewound
            self._rewound |= rewind
        try:
            past = await _past_the_end(consumer, sorted(assigned - rewind))
        except KafkaError as exc:  # the broker is away: the fetch positions stand
            log.warning("lanes.position_unchecked", error=str(exc))
            past = []
        if past:
            log.warning("lanes.past_log_end", partitions=[tp.partition for tp in past])
        if rewind or past:
            await consumer.seek_to_beginning(*rewind, *past)
        if rewind:
            log.warning("lanes.rewound", partitions=sorted(tp.partition for tp in rewind))


async def _past_the_end(consumer: Any, partitions: list[TopicPartition]) -> list[TopicPartition]:
    """The partitions whose committed offset is beyond the log's end offset."""
    if not partitions:
        return []
    committed = {tp: await consumer.committed(tp) for tp in partitions}
    held = [tp for tp in partitions if committed[tp] is not None]
    if not held:
        return []
    ends = await consumer.end_offsets(held)
    return [tp for tp in held if committed[tp] > ends[tp]]


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, lanes: PartitionLanes, start: StartInLog) -> None:
        self._lanes = lanes
        self._start = start

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._lanes._drain(list(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self._start.on_partitions_assigned(assigned)
        for tp in sorted(assigned):
            self._lanes._open(tp)


async def _settled(tails: Sequence[asyncio.Task[None]]) -> None:
    """Wait for every tail to end; each failure was logged where it happened."""
    pending = list(tails)
    if not pending:
        return
    await asyncio.wait(pending)
    for task in pending:
        if not task.cancelled():
            task.exception()  # retrieved: asyncio would otherwise warn of it at collection


def delivery_of(record: Any) -> Delivery:
    """An aiokafka ConsumerRecord as the Delivery every handler reads."""
    return Delivery(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        key=record.key,
        value=record.value,
        headers=list(record.headers or []),
    )
