"""The blocking Kafka clients (aiokafka on a loop thread of each object's own) against the
real broker: called with no loop, from a thread while a loop runs, and straight from a
coroutine; closing leaves no thread behind; a broker that is down or never answers is
said as a TransientError within the clients' bounds, never a hang."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from govindex.adapters.kafka import (
    GroupOffsets,
    KafkaEventPublisher,
    OffsetReader,
    TopicKeeper,
    TopicScanner,
    ensure_topics,
)
from govindex.core.envelope import KafkaRecord
from govindex.core.errors import TransientError

pytestmark = pytest.mark.integration


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _records(n: int) -> list[KafkaRecord]:
    return [
        KafkaRecord(key=f"k{i % 3}".encode(), value=f"v{i}".encode(), headers=[("n", b"%d" % i)])
        for i in range(n)
    ]


def _new_threads(before: set[threading.Thread]) -> list[str]:
    return [t.name for t in threading.enumerate() if t not in before]


def test_every_client_works_with_no_loop_and_leaves_no_thread(stack: dict[str, str]) -> None:
    bootstrap, topic, group = stack["kafka_bootstrap"], _topic("sync"), _topic("g")
    before = set(threading.enumerate())
    assert ensure_topics(bootstrap, [topic], 2) == [topic]
    assert ensure_topics(bootstrap, [topic], 2) == []
    sent = _records(9)
    with KafkaEventPublisher(bootstrap) as publisher:
        for record in sent:
            publisher.publish(topic, record)
        publisher.flush()

    reader = OffsetReader(bootstrap)
    try:
        assert [tp.partition for tp in reader.partitions(topic)] == [0, 1]
        ends = reader.end_offsets(topic)
        assert sum(ends.values()) == 9
        assert [(p.partition, p.end_offset, p.committed) for p in reader.lag(topic, group)] == [
            (0, ends[0], None),
            (1, ends[1], None),
        ]
        stamps = reader.timestamps(topic, {p: 0 for p, end in ends.items() if end})
        assert stamps and all(ms > 0 for ms in stamps.values())
        assert reader.partitions(_topic("missing")) == []  # and looking does not create it
    finally:
        reader.close()

    with TopicScanner(bootstrap) as scanner:
        first, end = scanner.bounds(topic)
        assert first == {0: 0, 1: 0} and end == ends
        got = list(scanner.read(topic, first, end))
    # Every record, byte for byte, in order per key (one key, one partition).
    assert sorted((r.key, r.value, r.headers) for r in got) == sorted(
        (r.key, r.value, r.headers) for r in sent
    )
    for key in (b"k0", b"k1", b"k2"):
        assert [r.value for r in got if r.key == key] == [r.value for r in sent if r.key == key]

    with GroupOffsets(bootstrap) as offsets:
        assert offsets.members(group) == 0
        assert offsets.committed(group, topic) == {0: None, 1: None}
        assert offsets.commit(group, topic, {0: 1, 1: 0}) == {}
        assert offsets.committed(group, topic) == {0: 1, 1: 0}
    reader = OffsetReader(bootstrap)
    try:
        assert [p.committed for p in reader.lag(topic, group)] == [1, 0]
    finally:
        reader.close()

    keeper = TopicKeeper(bootstrap)
    try:
        states = keeper.states([topic])
        assert states[topic].partitions == 2 and states[topic].topic_id
    finally:
        keeper.close()
    assert _new_threads(before) == []


async def test_calls_from_a_thread_and_from_a_coroutine_while_a_loop_runs(
    stack: dict[str, str],
) -> None:
    bootstrap, topic = stack["kafka_bootstrap"], _topic("async")
    assert await asyncio.to_thread(ensure_topics, bootstrap, [topic], 1) == [topic]
    with KafkaEventPublisher(bootstrap) as publisher:  # straight from the coroutine
        publisher.publish(topic, _records(1)[0])
        await asyncio.to_thread(publisher.flush)
    reader = await asyncio.to_thread(OffsetReader, bootstrap)
    try:
        assert await asyncio.to_thread(reader.end_offsets, topic) == {0: 1}
        assert reader.end_offsets(topic) == {0: 1}
        # Two threads at once on the same object: the loop runs one call after the other.
        both = await asyncio.gather(
            asyncio.to_thread(reader.end_offsets, topic),
            asyncio.to_thread(reader.partitions, topic),
        )
        assert both[0] == {0: 1} and [tp.partition for tp in both[1]] == [0]
    finally:
        await asyncio.to_thread(reader.close)


async def test_topic_ids_show_a_topic_that_was_lost_and_created_again(
    stack: dict[str, str],
) -> None:
    """What the self-healing watch relies on: a missing topic reads as no id, a re-created
    one as a new id, and a repair puts back the missing."""
    bootstrap, kept, lost = stack["kafka_bootstrap"], _topic("kept"), _topic("lost")
    ensure_topics(bootstrap, [kept, lost], 2)
    keeper = TopicKeeper(bootstrap)
    try:
        first = await asyncio.to_thread(keeper.states, [kept, lost])
        assert first[kept].topic_id and first[lost].topic_id
        assert first[kept].topic_id != first[lost].topic_id
        assert await asyncio.to_thread(keeper.states, [kept, lost]) == first

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([lost])
        finally:
            await admin.close()
        for _ in range(50):
            gone = await asyncio.to_thread(keeper.states, [kept, lost])
            if gone[lost].topic_id is None:
                break
            await asyncio.sleep(0.1)
        assert gone[lost].topic_id is None and gone[lost].partitions == 0
        assert gone[kept] == first[kept]

        wanted = {kept: 2, lost: 2}
        assert await asyncio.to_thread(keeper.repair, wanted, gone) == [lost]
        back = await asyncio.to_thread(keeper.states, [kept, lost])
        assert back[lost].partitions == 2
        assert back[lost].topic_id not in (None, first[lost].topic_id)
        assert back[kept] == first[kept]
    finally:
        await asyncio.to_thread(keeper.close)


def test_commit_as_member_joins_commits_and_leaves(stack: dict[str, str]) -> None:
    bootstrap, topic, group = stack["kafka_bootstrap"], _topic("member"), _topic("g")
    ensure_topics(bootstrap, [topic], 2)
    with KafkaEventPublisher(bootstrap) as publisher:
        for record in _records(6):
            publisher.publish(topic, record)
        publisher.flush()
    before = set(threading.enumerate())
    with GroupOffsets(bootstrap) as offsets:
        offsets.commit_as_member(group, topic, {0: 1, 1: 1}, timeout_s=60)
        assert offsets.committed(group, topic) == {0: 1, 1: 1}
    assert _new_threads(before) == []


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers a byte: a wedged broker."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


def test_a_broker_that_is_down_is_said_promptly_and_leaves_no_thread() -> None:
    nowhere = "127.0.0.1:9"  # nothing listens there
    before = set(threading.enumerate())
    started = time.monotonic()
    for build in (
        lambda: ensure_topics(nowhere, ["t"], 1),
        lambda: KafkaEventPublisher(nowhere),
        lambda: OffsetReader(nowhere),
        lambda: TopicScanner(nowhere),
        lambda: GroupOffsets(nowhere),
        lambda: TopicKeeper(nowhere).states(["t"]),
    ):
        with pytest.raises(TransientError, match=r"cannot reach Kafka at 127\.0\.0\.1:9"):
            build()
    assert time.monotonic() - started < 10
    assert _new_threads(before) == []


def test_a_broker_that_never_answers_is_given_up_on(silent_port: int) -> None:
    wedged = f"127.0.0.1:{silent_port}"
    before = set(threading.enumerate())
    started = time.monotonic()
    with pytest.raises(TransientError, match=re.escape(f"cannot reach Kafka at {wedged}")):
        OffsetReader(wedged)
    assert time.monotonic() - started < 40  # the client's request timeout, not forever
    assert _new_threads(before) == []
