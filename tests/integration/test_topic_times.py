"""Offsets by time on the real broker: what replays and `offsets reset --to-datetime` rely
on. A time after a partition's last record must read as "nothing that late" (the end), never
as offset 0, which would replay the whole partition."""

from __future__ import annotations

import time
import uuid

import pytest

from govindex.adapters.kafka import GroupOffsets, KafkaEventPublisher, TopicScanner, ensure_topics
from govindex.core.envelope import KafkaRecord

pytestmark = pytest.mark.integration


def test_offsets_at_a_time_are_the_first_at_or_after_it_or_none(stack: dict[str, str]) -> None:
    bootstrap, topic = stack["kafka_bootstrap"], f"times-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, [topic], 2)
    with KafkaEventPublisher(bootstrap) as publisher:
        for n in range(3):
            publisher.publish(topic, KafkaRecord(key=b"same", value=str(n).encode(), headers=[]))
        publisher.flush()
        time.sleep(1.1)
        middle = int(time.time() * 1000)
        time.sleep(1.1)
        publisher.publish(topic, KafkaRecord(key=b"same", value=b"3", headers=[]))
        publisher.flush()
    time.sleep(1.1)
    later = int(time.time() * 1000)
    with TopicScanner(bootstrap) as scanner:
        _, end = scanner.bounds(topic)
        used = next(p for p, o in end.items() if o == 4)
        idle = next(p for p in end if p != used)
        assert scanner.at_time(topic, end, 0) == {used: 0, idle: None}
        assert scanner.at_time(topic, end, middle) == {used: 3, idle: None}
        assert scanner.at_time(topic, end, later) == {used: None, idle: None}
    with GroupOffsets(bootstrap) as offsets:
        assert offsets.at_time(topic, [used], later) == {used: None}
