"""The pure parts of jobs: pacing a job to its rate, and what a redrive does with a letter."""

from __future__ import annotations

from datetime import UTC, datetime

from govindex.core.deadletters import (
    CONSUMER_HEADER,
    ORIGIN_HEADER,
    REASON_HEADER,
    REDRIVES_HEADER,
    DeadLetter,
    Filter,
    plan,
    redriven,
)
from govindex.core.jobs import Pacer


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_a_job_is_held_to_its_rate_and_follows_a_new_one() -> None:
    t = FakeTime()
    pacer = Pacer(10.0, clock=t.clock, sleep=t.sleep)
    assert pacer.batch(100) == 5  # half a second's worth per step
    await pacer.pace(5)
    await pacer.pace(5)
    assert t.now == 101.0  # 10 items at 10/s: one second
    pacer.retune(100.0)  # changed while it runs: counts from now
    await pacer.pace(50)
    assert t.now == 101.5
    pacer.retune(None)
    await pacer.pace(10_000)
    assert t.now == 101.5 and pacer.batch(100) == 100


def letter(redrives: int | None = None, key: bytes | None = b"acme/s/d.md") -> DeadLetter:
    headers = [
        ("ce_id", b"e1"),
        (REASON_HEADER, b"unknown_source"),
        (CONSUMER_HEADER, b"indexer"),
        (ORIGIN_HEADER, b"gi.documents/2/17"),
    ]
    if redrives is not None:
        headers.append((REDRIVES_HEADER, str(redrives).encode()))
    return DeadLetter("gi.dead-letters", 0, 5, 1_700_000_000_000, key, b"{}", headers)


def test_three_redrives_then_quarantine() -> None:
    assert [plan(letter(n))[0] for n in (None, 1, 2, 3, 4)] == [
        "redrive",
        "redrive",
        "redrive",
        "quarantine",
        "quarantine",
    ]
    assert plan(letter(key=b"\xff\xfe"))[0] == "quarantine"  # cannot be re-published by key
    assert plan(DeadLetter("t", 0, 0, 0, None, b"", []))[0] == "skip"
    x = letter(2)
    assert x.origin_topic == "gi.documents" and x.event_id == "e1"
    headers = dict(redriven(x, job_id=9))
    assert headers[REDRIVES_HEADER] == b"3" and headers["govindex-job"] == b"9"
    assert headers["ce_id"] == b"e1" and REASON_HEADER not in headers


def test_filters_by_reason_consumer_and_time() -> None:
    x = letter()
    assert Filter().admits(x)
    assert Filter(reason="unknown_source", consumer="indexer").admits(x)
    assert not Filter(reason="invalid_event").admits(x)
    assert not Filter(since=datetime(2030, 1, 1, tzinfo=UTC)).admits(x)
