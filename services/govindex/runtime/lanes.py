"""How a batched worker handles a batch of records: decode, handle, dead-letter what is
permanent, and return only when every record is applied or durably dead-lettered.

The lane that calls this commits the batch's offsets when it returns, so nothing here may
return early: transient failures (a server down, a restart) are retried with capped
backoff for as long as it takes, unless the worker is stopping, in which case the batch
is abandoned uncommitted and redelivered to whoever owns the partition next.

A handler may finish in two steps (`Deferred`): what readers must see at once (a deletion's
tombstone), then the slow rest (the purge of every sink). The first step's return lets the
lane take its next batch; the rest comes back as the batch's tail, which the lane runs in
order after the tails before it and awaits before it commits the batch's offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from govindex.core import metrics, tracing
from govindex.core.envelope import Delivery, Envelope, decode
from govindex.core.errors import PermanentError, TransientError
from govindex.core.ports import DeadLetterLog, EventPublisher
from govindex.core.retry import retry_transient
from govindex.runtime.deadletter import dead_letter

log = structlog.get_logger(__name__)

HandleBatch = Callable[[Sequence[Envelope]], Awaitable["Sequence[Any] | Deferred"]]
Tail = Callable[[], Awaitable[None]]
MAX_BACKOFF_S = 5.0


@dataclass(frozen=True)
class Deferred:
    """A handler's results so far, one per envelope, and the rest of its work: `rest`
    returns one more per envelope (a PermanentError to dead-letter, anything else: done)
    and raises TransientError when it should be run again. Idempotent, like every handler:
    a crash before the batch commits runs both steps again."""

    results: Sequence[Any]
    rest: Callable[[], Awaitable[Sequence[Any]]]


class Abandoned(Exception):
    """The worker stopped while a batch was still failing: leave its offsets alone."""


def batch_processor(
    handle: HandleBatch,
    *,
    consumer: str,
    dead_letters_topic: str,
    publisher: EventPublisher,
    dead_letters: DeadLetterLog,
    stopping: asyncio.Event,
) -> Callable[[Sequence[Delivery]], Awaitable[Tail | None]]:
    """`handle` returns one result per envelope, in order: a PermanentError for each one
    to dead-letter; it raises TransientError when nothing of the batch was decided. A
    `Deferred` return makes the batch's tail (None: the batch is done)."""

    label = metrics.consumer_label(consumer)  # a CDC feed's source id is never a label

    async def dead_letter_all(
        deliveries: Sequence[Delivery],
        envelopes: dict[int, Envelope],
        failed: dict[int, PermanentError],
    ) -> None:
        for i, reason in sorted(failed.items()):
            await _dead_letter(
                deliveries[i],
                envelopes.get(i),
                reason,
                consumer=consumer,
                topic=dead_letters_topic,
                publisher=publisher,
                dead_letters=dead_letters,
            )

    async def on_batch(deliveries: Sequence[Delivery]) -> Tail | None:
        started = time.monotonic()
        failed: dict[int, PermanentError] = {}
        decoded: list[tuple[int, Envelope]] = []
        for i, delivery in enumerate(deliveries):
            try:
                decoded.append((i, decode(delivery.key, delivery.value, delivery.headers)))
            except PermanentError as error:
                failed[i] = error
        with tracing.consuming(consumer, [env.extensions for _, env in decoded]):
            answer = await _until_done(handle, [env for _, env in decoded], consumer, stopping)
        deferred = answer if isinstance(answer, Deferred) else None
        results = answer.results if isinstance(answer, Deferred) else answer
        for (i, envelope), result in zip(decoded, results, strict=True):
            if isinstance(result, PermanentError):
                failed[i] = result
            else:
                metrics.EVENTS.labels(label, envelope.type, metrics.outcome_of(result)).inc()
        envelopes = dict(decoded)
        for i, problem in failed.items():
            kind = envelopes[i].type if i in envelopes else "undecodable"
            metrics.EVENTS.labels(label, kind, "dead_lettered").inc()
            metrics.DEAD_LETTERS.labels(label, problem.reason).inc()
        metrics.BATCH_EVENTS.labels(label).observe(len(deliveries))
        metrics.BATCH_SECONDS.labels(label).observe(time.monotonic() - started)
        log.info(
            "batch.applied",
            consumer=consumer,
            partition=deliveries[0].partition if deliveries else None,
            events=len(deliveries),
            failed=len(failed),
            seconds=round(time.monotonic() - started, 3),
        )
        await dead_letter_all(deliveries, envelopes, failed)
        if deferred is None:
            return None
        rest = deferred.rest

        async def tail() -> None:
            later = await _until_done(
                lambda _: rest(), list(envelopes.values()), consumer, stopping
            )
            assert not isinstance(later, Deferred), "a handler's rest is not deferred again"
            failed_later = {
                i: result
                for (i, _), result in zip(decoded, later, strict=True)
                if isinstance(result, PermanentError) and i not in failed
            }
            for problem in failed_later.values():
                metrics.DEAD_LETTERS.labels(label, problem.reason).inc()
            await dead_letter_all(deliveries, envelopes, failed_later)

        return tail

    return on_batch


async def _until_done(
    handle: HandleBatch, envelopes: list[Envelope], consumer: str, stopping: asyncio.Event
) -> Sequence[Any] | Deferred:
    if not envelopes:
        return []
    delay, attempt = 0.2, 0
    while True:
        attempt += 1
        try:
            return await handle(envelopes)
        except TransientError as exc:
            if stopping.is_set():
                raise Abandoned(f"stopping while the batch still fails: {exc}") from exc
            metrics.RETRIES.labels(f"{metrics.consumer_label(consumer)} batch").inc()
            log.warning(
                "batch.retry",
                consumer=consumer,
                events=len(envelopes),
                attempt=attempt,
                delay_s=round(delay, 2),
                error=str(exc),
            )
            with contextlib.suppress(TimeoutError):  # wake at once on stop
                await asyncio.wait_for(stopping.wait(), delay * (0.5 + random.random() / 2))
            delay = min(MAX_BACKOFF_S, delay * 2)


async def _dead_letter(
    delivery: Delivery,
    envelope: Envelope | None,
    error: PermanentError,
    *,
    consumer: str,
    topic: str,
    publisher: EventPublisher,
    dead_letters: DeadLetterLog,
) -> None:
    """On the dead-letter topic, and recorded as settled, before the offset moves."""
    record = dead_letter(delivery, error, consumer)
    await retry_transient(
        lambda: publisher.publish(topic, record), what="dead-letter publish", give_up_after=3600
    )
    if envelope is not None:
        event_id, reason = envelope.id, error.reason
        await retry_transient(
            lambda: dead_letters.dead_lettered(consumer, event_id, reason),
            what="dead-letter record",
            give_up_after=3600,
        )
    log.warning(
        "event.dead_lettered",
        consumer=consumer,
        partition=delivery.partition,
        offset=delivery.offset,
        event_id=envelope.id if envelope else None,
        reason=error.reason,
        error=str(error),
    )
