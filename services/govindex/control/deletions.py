"""The deletion lane: deletions on their own topic, consumer group and Postgres pool.

A deletion used to wait behind every update queued on the documents topic, then behind the
relay and the tombstones topic. Here it is applied on arrival, in micro-batches: the
indexer's verbs record the tombstones (sequence-guarded: an update the deletion overtook
is stale when it arrives; a later re-create still applies), then the purger's verbs purge
every sink with one OpenSearch sweep and refresh per batch, read back and write receipts,
and only then does the lane commit its offsets. The tombstones topic still carries each
deletion (the outbox keeps it pending until purged): if the lane dies between the two,
the purger finishes the work.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import structlog

from govindex.core import metrics
from govindex.core.envelope import Envelope
from govindex.core.errors import PermanentError
from govindex.core.ports import ApplyResult
from govindex.core.settings import Consumers
from govindex.runtime.composition import Runtime
from govindex.runtime.subscription import Subscription
from indexer.app import indexer_ports
from indexer.handlers import CONSUMER, IndexerPorts, index_batch
from purger.app import purger_ports
from purger.handlers import PurgerPorts, purge_batch

log = structlog.get_logger(__name__)
LANE = Consumers.DELETIONS


async def apply_deletions(
    envelopes: Sequence[Envelope], *, indexer: IndexerPorts, purger: PurgerPorts
) -> list[Any]:
    """Tombstones, then the purge of every sink; one result per envelope, in order."""
    started = time.monotonic()
    results: list[Any] = list(await index_batch(envelopes, indexer, purging_now=True))
    recorded_s = time.monotonic() - started
    # A duplicate may be a redelivery after a crash between the tombstone and its purge.
    recorded = [
        i
        for i, r in enumerate(results)
        if isinstance(r, ApplyResult) and r.outcome in ("tombstoned", "duplicate")
    ]
    if recorded:
        purged = await purge_batch([envelopes[i] for i in recorded], purger)
        for i, outcome in zip(recorded, purged, strict=True):
            if isinstance(outcome, PermanentError):
                results[i] = outcome
    metrics.STAGE_SECONDS.labels("tombstones").observe(recorded_s)
    metrics.STAGE_SECONDS.labels("purge").observe(time.monotonic() - started - recorded_s)
    log.info(
        "deletions.applied",
        events=len(envelopes),
        purged=len(recorded),
        tombstones_s=round(recorded_s, 3),
        purge_s=round(time.monotonic() - started - recorded_s, 3),
    )
    return results


def deletion_subscription(rt: Runtime, generation: int) -> Subscription:
    """The lane's subscription; `rt` should be a Runtime of its own (its own pool)."""
    iports, pports = indexer_ports(rt, generation), purger_ports(rt)

    async def handle(envelopes: Sequence[Envelope]) -> list[Any]:
        return await apply_deletions(envelopes, indexer=iports, purger=pports)

    settings = rt.settings
    return Subscription(
        name=LANE,
        topic=settings.topics.deletions,
        group=settings.group(LANE),
        consumer=CONSUMER,  # the same claims as the documents lane: a copy on both is a dup
        handle=handle,
        batched=True,
    )
