"""A lane's batch tails on the real broker: the deletion lane's purge runs as the tail of
the batch whose tombstones it follows. The lane takes its next batch while a tail runs;
tails run one at a time in batch order; a batch's offset is committed only after its tail
and every tail before it; a failed tail reads its batch and every later one again."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence

import pytest

from govindex.adapters.kafka import GroupOffsets, ensure_topics
from govindex.adapters.kafka_async import AsyncKafkaPublisher
from govindex.adapters.kafka_lanes import LanePolicy, PartitionLanes
from govindex.core.envelope import Delivery, KafkaRecord
from tests.support.pipeline import until

pytestmark = pytest.mark.integration

Tail = Callable[[], Awaitable[None]]
POLICY = LanePolicy(max_events=1, linger_s=0.0, retry_after_error_s=0.2)  # a batch a record


async def _publish(bootstrap: str, topic: str, *values: bytes) -> None:
    publisher = AsyncKafkaPublisher(bootstrap)
    await publisher.start()
    try:
        for value in values:
            await publisher.publish(topic, KafkaRecord(key=b"one", value=value, headers=[]))
    finally:
        await publisher.stop()


def _committed(bootstrap: str, group: str, topic: str) -> Callable[[], Awaitable[int | None]]:
    async def read() -> int | None:
        def once() -> int | None:
            with GroupOffsets(bootstrap) as offsets:
                return offsets.committed(group, topic)[0]

        return await asyncio.to_thread(once)

    return read


def _topic(bootstrap: str) -> tuple[str, str]:
    topic = f"tails-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, [topic], 1)
    return topic, f"g-{topic}"


async def test_the_next_batch_runs_while_a_tail_waits_and_commits_follow_the_tails(
    stack: dict[str, str],
) -> None:
    bootstrap = stack["kafka_bootstrap"]
    topic, group = _topic(bootstrap)
    handled: list[bytes] = []
    tails_done: list[bytes] = []
    release = asyncio.Event()

    async def on_batch(batch: Sequence[Delivery]) -> Tail:
        value = batch[0].value or b""
        handled.append(value)

        async def tail() -> None:
            if value == b"first":
                await release.wait()
            tails_done.append(value)

        return tail

    lanes = PartitionLanes(
        bootstrap, topic=topic, group_id=group, client_id="t", on_batch=on_batch, policy=POLICY
    )
    await lanes.start()
    try:
        await _publish(bootstrap, topic, b"first", b"second", b"third")
        await until(_len(handled), lambda n: n == 3, 60, "three batches handled")
        # Every batch was handled while the first tail waited; nothing is committed yet.
        assert tails_done == []
        assert await _committed(bootstrap, group, topic)() is None
        release.set()
        await until(_committed(bootstrap, group, topic), lambda o: o == 3, 30, "the commit")
        assert tails_done == [b"first", b"second", b"third"]  # in batch order, one at a time
    finally:
        await lanes.stop()


async def test_a_failed_tail_reads_its_batch_and_every_later_one_again(
    stack: dict[str, str],
) -> None:
    bootstrap = stack["kafka_bootstrap"]
    topic, group = _topic(bootstrap)
    handled: list[bytes] = []
    failures = [RuntimeError("the first purge failed")]
    release = asyncio.Event()

    async def on_batch(batch: Sequence[Delivery]) -> Tail:
        value = batch[0].value or b""
        handled.append(value)

        async def tail() -> None:
            if value == b"first":
                await release.wait()
                if failures:
                    raise failures.pop()

        return tail

    lanes = PartitionLanes(
        bootstrap, topic=topic, group_id=group, client_id="t", on_batch=on_batch, policy=POLICY
    )
    await lanes.start()
    try:
        await _publish(bootstrap, topic, b"first", b"second")
        await until(_len(handled), lambda n: n == 2, 60, "both batches handled")
        release.set()
        await until(_committed(bootstrap, group, topic), lambda o: o == 2, 60, "the commit")
        # The failed tail's batch and the one after it were handled again, in order.
        assert handled == [b"first", b"second", b"first", b"second"]
    finally:
        await lanes.stop()


async def test_a_stopped_lane_lets_its_tails_finish_and_commit(stack: dict[str, str]) -> None:
    bootstrap = stack["kafka_bootstrap"]
    topic, group = _topic(bootstrap)
    handled: list[bytes] = []
    release = asyncio.Event()

    async def on_batch(batch: Sequence[Delivery]) -> Tail:
        handled.append(batch[0].value or b"")

        async def tail() -> None:
            await release.wait()

        return tail

    lanes = PartitionLanes(
        bootstrap, topic=topic, group_id=group, client_id="t", on_batch=on_batch, policy=POLICY
    )
    await lanes.start()
    await _publish(bootstrap, topic, b"only")
    await until(_len(handled), lambda n: n == 1, 60, "the batch handled")
    stopping = asyncio.create_task(lanes.stop())
    await asyncio.sleep(0.5)
    assert not stopping.done(), "stop waits for the tail"
    release.set()
    await asyncio.wait_for(stopping, 30)
    assert await _committed(bootstrap, group, topic)() == 1


def _len(items: list[bytes]) -> Callable[[], Awaitable[int]]:
    async def read() -> int:
        return len(items)

    return read
