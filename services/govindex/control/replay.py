"""`govindex replay`: re-publish one source's events of a time range, as a job.

The scope is fixed when the job starts: per partition of the documents and deletions
topics, the offsets of the two times (records appended later, the replayed ones included,
are never in it). Records are taken by key and headers (core.replays); each is predicted
with the indexer's own preparation and guard, read-only (`indexer.handlers.predict_batch`),
and an execute re-publishes it with the same key, value and headers plus the job's id,
through the outbox, in the transaction that records the step's checkpoint and what was
predicted for each record. A replay can bring nothing deleted back: the tombstone's
sequence is above every event it deleted, and the consumer drops those as stale.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from govindex.adapters.kafka import TopicScanner
from govindex.core.deadletters import JOB_HEADER
from govindex.core.envelope import Envelope, KafkaRecord, TopicRecord, decode
from govindex.core.errors import PermanentError
from govindex.core.jobs import Job, JobItem, JobState, Pacer
from govindex.core.ports import OutboxMessage
from govindex.core.replays import Scope, identity, replayed_headers
from govindex.runtime.composition import Runtime
from govindex.runtime.job_types import Progress
from indexer.app import indexer_ports
from indexer.decisions import Overlay
from indexer.handlers import CONSUMER, Predicted, predict_batch

REPLAY = "replay"
STEP = 200  # records per step at most (fewer at a low rate)
Ranges = dict[str, dict[str, dict[str, int]]]  # topic -> {"next"|"end": {partition: offset}}


def scope_of(args: dict[str, Any]) -> Scope:
    return Scope(
        source_id=args["source"],
        tenant_id=args.get("tenant"),
        docs=tuple(args.get("docs") or ()),
        kinds=tuple(args.get("kinds") or ()),
    )


def _ms(value: str) -> int:
    return int(datetime.fromisoformat(value).timestamp() * 1000)


def _ranges(rt: Runtime, since: str, until: str) -> Ranges:
    """Per topic and partition: the first offset at or after `since`, and the first at or
    after `until` (the end offset when nothing is that late)."""
    found: Ranges = {}
    topics = rt.settings.topics
    with TopicScanner(rt.servers.kafka_bootstrap, rt.kafka_security) as scanner:
        for topic in (topics.documents, topics.deletions):
            first, end = scanner.bounds(topic)
            start = scanner.at_time(topic, end, _ms(since))
            stop = scanner.at_time(topic, end, _ms(until))
            found[topic] = {
                "next": {str(p): max(first[p], _or(start[p], end[p])) for p in end},
                "end": {str(p): min(end[p], _or(stop[p], end[p])) for p in end},
            }
    return found


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _records(rt: Runtime, ranges: Ranges) -> Generator[TopicRecord, None, None]:
    with TopicScanner(rt.servers.kafka_bootstrap, rt.kafka_security) as scanner:
        for topic, bounds in ranges.items():
            start = {int(p): o for p, o in bounds["next"].items()}
            end = {int(p): o for p, o in bounds["end"].items()}
            yield from scanner.read(topic, start, end)


def _count(rt: Runtime, ranges: Ranges, scope: Scope) -> int:
    return sum(1 for record in _records(rt, ranges) if scope.admits(record))


@dataclass(frozen=True)
class _Batch:
    records: list[TopicRecord]
    passed: dict[tuple[str, int], int]  # (topic, partition): the offset after the last read
    exhausted: bool


def _take(records: Iterator[TopicRecord], scope: Scope, n: int) -> _Batch:
    """The next n records in scope (blocking: runs in a thread)."""
    taken: list[TopicRecord] = []
    passed: dict[tuple[str, int], int] = {}
    for record in records:
        passed[(record.topic, record.partition)] = record.offset + 1
        if scope.admits(record):
            taken.append(record)
            if len(taken) >= n:
                return _Batch(taken, passed, exhausted=False)
    return _Batch(taken, passed, exhausted=True)


async def predict_records(
    rt: Runtime, records: list[TopicRecord], overlay: Overlay, generation: int
) -> list[Predicted]:
    """What the consumer would do with each record now, in order (read-only)."""
    decoded: dict[int, Envelope] = {}
    results: dict[int, Predicted] = {}
    for i, record in enumerate(records):
        try:
            decoded[i] = decode(record.key, record.value, record.headers)
        except PermanentError as error:
            results[i] = Predicted("dead_letter", error.reason)
    ports = indexer_ports(rt, generation)
    predicted = await predict_batch(list(decoded.values()), ports, overlay)
    results.update(zip(decoded, predicted, strict=True))
    return [results[i] for i in range(len(records))]


def _item(record: TopicRecord, predicted: Predicted) -> JobItem:
    found = identity(record)
    headers = {k: v.decode(errors="replace") for k, v in record.headers}
    sequence = headers.get("ce_sequence", "")
    return JobItem(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        event_id=headers.get("ce_id", ""),
        doc_key=f"{found.tenant_id}/{found.source_id}/{found.doc_id}" if found else "",
        event_type=found.type if found else "",
        sequence=int(sequence) if sequence.isdigit() else None,
        outcome=predicted.outcome,
        reason=predicted.reason,
    )


async def run_replay(rt: Runtime, job: Job, progress: Progress) -> Job:
    """Run (or continue) a replay job to its end, a pause or a cancel."""
    scope = scope_of(job.args)
    if "ranges" not in job.checkpoint:  # first start: fix the scope, count what is in it
        ranges = await asyncio.to_thread(_ranges, rt, job.args["since"], job.args["until"])
        total = await asyncio.to_thread(_count, rt, ranges, scope)
        await rt.jobs.start(job.id, total, {"ranges": ranges})
        job = job.model_copy(update={"total": total, "checkpoint": {"ranges": ranges}})
    ranges = job.checkpoint["ranges"]
    overlay = Overlay.load(job.checkpoint.get("overlay") or {})
    generation = await rt.index.live_generation() or 1  # only stamps; the workers write
    counts, done = dict(job.counts), job.done
    pacer = Pacer(None if job.dry_run else job.rate)
    progress(done, job.total)
    records = _records(rt, ranges)
    try:
        while True:
            batch = await asyncio.to_thread(_take, records, scope, pacer.batch(STEP))
            predicted = await predict_records(rt, batch.records, overlay, generation)
            items = [_item(r, p) for r, p in zip(batch.records, predicted, strict=True)]
            for item in items:
                _bump(counts, item.outcome)
            done += len(items)
            for (topic, partition), offset in batch.passed.items():
                ranges[topic]["next"][str(partition)] = offset
            step = {"ranges": ranges, "overlay": overlay.dump()}
            if job.dry_run:
                outcome = await rt.jobs.record(
                    job.id,
                    done=done,
                    counts=counts,
                    checkpoint=step,
                    finished=batch.exhausted,
                    items=items,
                )
            else:
                _bump(counts, "republished", len(items))
                outcome = await rt.jobs.publish_step(
                    job.id,
                    messages=[_message(r, job.id) for r in batch.records],
                    unsettle=[(CONSUMER, x.event_id) for x in items if x.event_id],
                    done=done,
                    counts=counts,
                    checkpoint=step,
                    finished=batch.exhausted,
                    items=items,
                )
            progress(done, job.total)
            if batch.exhausted or outcome.state != JobState.RUNNING:
                break
            pacer.retune(None if job.dry_run else outcome.rate)
            await pacer.pace(len(batch.records))
    finally:
        records.close()
    final = await rt.jobs.get(job.id)
    assert final is not None
    return final


def _message(record: TopicRecord, job_id: int) -> OutboxMessage:
    replayed = KafkaRecord(
        key=record.key,
        value=record.value or b"",
        headers=replayed_headers(record.headers, JOB_HEADER, job_id),
    )
    # Pending until the consumer has processed or dead-lettered it (binary mode names the
    # id in a header, which is what settling looks for).
    awaits = CONSUMER if any(k == "ce_id" for k, _ in record.headers) else None
    return OutboxMessage(record.topic, replayed, awaits=awaits)


def _bump(counts: dict[str, int], key: str, by: int = 1) -> None:
    counts[key] = counts.get(key, 0) + by
