"""`govindex dlq list|show|redrive`: the dead-letter topic, read with manual assignment.

A redrive is a job. Its scope is fixed when it starts (the topic's end offsets then), its
checkpoint is the next offset of every partition, and each step commits, in one Postgres
transaction, the records to re-publish (the outbox relay sends them), what was done with
each dead letter and the checkpoint. A dead letter is handled by one redrive only, ever;
one that already failed `MAX_REDRIVES` redrives goes to the quarantine topic instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from govindex.adapters.kafka import TopicScanner
from govindex.core.deadletters import DeadLetter, Filter, plan, redriven
from govindex.core.envelope import KafkaRecord
from govindex.core.jobs import Job, JobError, JobState, Pacer
from govindex.core.ports import OutboxMessage
from govindex.runtime.composition import Runtime
from govindex.runtime.job_types import Progress

REDRIVE = "dlq-redrive"
STEP = 100  # dead letters per step at most (fewer at a low rate)


@dataclass(frozen=True)
class Listed:
    letter: DeadLetter
    handled: str | None  # "redrive" / "quarantine" by an earlier job, or None


def _filter(args: dict[str, Any]) -> Filter:
    since = args.get("since")
    return Filter(
        reason=args.get("reason"),
        consumer=args.get("consumer"),
        since=datetime.fromisoformat(since) if since else None,
    )


def _letters(rt: Runtime, start: dict[int, int] | None = None) -> Iterator[DeadLetter]:
    topic = rt.settings.topics.dead_letters
    with TopicScanner(rt.servers.kafka_bootstrap, rt.kafka_security) as scanner:
        first, end = scanner.bounds(topic)
        for record in scanner.read(topic, start or first, end):
            yield DeadLetter.of(record)


async def list_letters(rt: Runtime, flt: Filter, limit: int) -> list[Listed]:
    """The dead letters that pass `flt`, oldest first, at most `limit`."""

    def scan() -> list[DeadLetter]:
        found = []
        for letter in _letters(rt):
            if flt.admits(letter):
                found.append(letter)
                if len(found) >= limit:
                    break
        return found

    letters = await asyncio.to_thread(scan)
    handled = await rt.jobs.actions(rt.settings.topics.dead_letters)
    return [Listed(x, handled.get((x.partition, x.offset))) for x in letters]


async def show_letter(rt: Runtime, partition: int, offset: int) -> Listed:
    topic = rt.settings.topics.dead_letters

    def read() -> DeadLetter | None:
        with TopicScanner(rt.servers.kafka_bootstrap, rt.kafka_security) as scanner:
            first, end = scanner.bounds(topic)
            if partition not in end or not first[partition] <= offset < end[partition]:
                return None
            for record in scanner.read(topic, {partition: offset}, {partition: offset + 1}):
                return DeadLetter.of(record)
        return None

    letter = await asyncio.to_thread(read)
    if letter is None:
        raise JobError(
            f"no dead letter at {partition}:{offset} on {topic}; `govindex dlq list` shows "
            "their positions (partition:offset)"
        )
    handled = await rt.jobs.actions(topic)
    return Listed(letter, handled.get((partition, offset)))


async def run_redrive(rt: Runtime, job: Job, progress: Progress) -> Job:
    """Run (or continue) a redrive job to its end, a pause or a cancel."""
    topic = rt.settings.topics.dead_letters
    flt, limit = _filter(job.args), job.args.get("max")
    if "end" not in job.checkpoint:  # first start: fix the scope, count what is in it
        first, end_, total = await asyncio.to_thread(_scope, rt, flt, limit)
        checkpoint = {"next": first, "end": end_}
        await rt.jobs.start(job.id, total, checkpoint)
        job = job.model_copy(update={"total": total, "checkpoint": checkpoint})
    start = {int(p): int(o) for p, o in job.checkpoint["next"].items()}
    end = {int(p): int(o) for p, o in job.checkpoint["end"].items()}
    handled = await rt.jobs.actions(topic)
    counts, done = dict(job.counts), job.done
    pacer = Pacer(None if job.dry_run else job.rate)
    progress(done, job.total)
    letters = _letters_between(rt, start, end)
    try:
        while True:
            room = pacer.batch(STEP) if limit is None else min(pacer.batch(STEP), limit - done)
            batch = await asyncio.to_thread(_take, letters, flt, room) if room > 0 else _DONE
            actions: list[tuple[int, int, str]] = []
            messages: list[OutboxMessage] = []
            unsettle: list[tuple[str, str]] = []
            for letter in batch.letters:
                done += 1
                action, _ = plan(letter)
                if (letter.partition, letter.offset) in handled:
                    _bump(counts, "already_handled")
                elif job.dry_run or action == "skip":
                    _bump(counts, action if job.dry_run else "skipped")
                else:
                    _bump(counts, {"redrive": "redriven", "quarantine": "quarantined"}[action])
                    actions.append((letter.partition, letter.offset, action))
                    messages.append(_message(rt, letter, action, job.id))
                    if action == "redrive" and letter.event_id:
                        unsettle.append((letter.consumer, letter.event_id))
            for partition, offset in batch.passed.items():
                start[partition] = max(start.get(partition, 0), offset)
            finished = batch.exhausted or (limit is not None and done >= limit)
            step = {"next": {str(p): o for p, o in start.items()}, "end": job.checkpoint["end"]}
            if job.dry_run:
                outcome = await rt.jobs.record(
                    job.id, done=done, counts=counts, checkpoint=step, finished=finished
                )
            else:
                outcome = await rt.jobs.publish_step(
                    job.id,
                    topic=topic,
                    actions=actions,
                    messages=messages,
                    unsettle=unsettle,
                    done=done,
                    counts=counts,
                    checkpoint=step,
                    finished=finished,
                )
            progress(done, job.total)
            if finished or outcome.state != JobState.RUNNING:
                break
            pacer.retune(None if job.dry_run else outcome.rate)
            await pacer.pace(len(batch.letters))
    finally:
        letters.close()
    final = await rt.jobs.get(job.id)
    assert final is not None
    return final


@dataclass(frozen=True)
class _Batch:
    letters: list[DeadLetter]
    passed: dict[int, int]  # per partition, the offset after the last letter read
    exhausted: bool  # the scope has no more letters


_DONE = _Batch([], {}, exhausted=True)


def _scope(
    rt: Runtime, flt: Filter, limit: int | None
) -> tuple[dict[str, int], dict[str, int], int]:
    """(first offsets, end offsets, how many dead letters the job covers)."""
    topic = rt.settings.topics.dead_letters
    with TopicScanner(rt.servers.kafka_bootstrap, rt.kafka_security) as scanner:
        first, end = scanner.bounds(topic)
        total = sum(1 for r in scanner.read(topic, first, end) if flt.admits(DeadLetter.of(r)))
    if limit is not None:
        total = min(total, limit)
    return {str(p): o for p, o in first.items()}, {str(p): o for p, o in end.items()}, total


def _letters_between(
    rt: Runtime, start: dict[int, int], end: dict[int, int]
) -> Generator[DeadLetter, None, None]:
    with TopicScanner(rt.servers.kafka_bootstrap, rt.kafka_security) as scanner:
        for record in scanner.read(rt.settings.topics.dead_letters, dict(start), end):
            yield DeadLetter.of(record)


def _take(letters: Iterator[DeadLetter], flt: Filter, n: int) -> _Batch:
    """The next n letters that pass the filter (blocking: runs in a thread)."""
    taken: list[DeadLetter] = []
    passed: dict[int, int] = {}
    for letter in letters:
        passed[letter.partition] = letter.offset + 1
        if flt.admits(letter):
            taken.append(letter)
            if len(taken) >= n:
                return _Batch(taken, passed, exhausted=False)
    return _Batch(taken, passed, exhausted=True)


def _message(rt: Runtime, letter: DeadLetter, action: str, job_id: int) -> OutboxMessage:
    if action == "quarantine":
        record = KafkaRecord(key=letter.key, value=letter.value or b"", headers=letter.headers)
        return OutboxMessage(rt.settings.topics.quarantine, record)
    record = KafkaRecord(
        key=letter.key, value=letter.value or b"", headers=redriven(letter, job_id)
    )
    # Pending until its consumer applies or dead-letters it again (only a binary-mode
    # event names its id in a header, which is what settling looks for).
    awaits = letter.consumer if letter.header("ce_id") else None
    return OutboxMessage(letter.origin_topic, record, awaits=awaits)


def _bump(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1
