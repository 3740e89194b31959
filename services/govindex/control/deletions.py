"""The deletion lane: deletions on their own topic, consumer group and Postgres pool.

A deletion used to wait behind every update queued on the documents topic, then behind the
relay and the tombstones topic; then, on this lane, behind the previous batch's purge,
which waits for the search server. Here each batch is applied in two steps:

1. the indexer's verbs record the tombstones in one short transaction (sequence-guarded:
   an update the deletion overtook is stale when it arrives; a later re-create still
   applies). Once it commits, readers no longer see the document anywhere, and the lane
   takes its next batch;
2. the batch's tail, run after the tails before it: the projection of history-keeping
   tombstones, then the purger's verbs purge every sink with one OpenSearch sweep and
   refresh, read back and write receipts, for every batch waiting (`PurgeGroup`). Only
   then does the lane commit the batch's offsets (`PartitionLanes`), so a crash in between
   runs both steps again (the first then finds duplicates).

The tombstones topic still carries each deletion (the outbox keeps it pending until
purged): if the lane is gone for good, the purger finishes the work.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from govindex.core import metrics
from govindex.core.envelope import Envelope
from govindex.core.errors import PermanentError
from govindex.core.ports import ApplyResult
from govindex.core.settings import Consumers
from govindex.runtime.composition import Runtime
from govindex.runtime.lanes import Deferred
from govindex.runtime.subscription import Subscription
from indexer.app import indexer_ports
from indexer.handlers import CONSUMER, IndexerPorts, Recorded, project_recorded, record_batch
from indexer.planning import purged_next
from purger.app import purger_ports
from purger.handlers import PurgerPorts, purge_batch

log = structlog.get_logger(__name__)
LANE = Consumers.DELETIONS


GROUP_EVENTS = 1000  # deletions purged together at most (a tail's own batch always)


@dataclass
class _Waiting:
    envelopes: Sequence[Envelope]
    recorded: Recorded


class PurgeGroup:
    """Recorded batches waiting for their purge, purged together: the first tail to run
    takes every batch waiting (its own and those recorded since, on any partition), and
    the later tails find theirs done. A purge costs the search server a few requests
    whatever its size, so under a burst the purges keep up with the tombstones.

    A purge that fails puts its batches back: each tail is retried until its own is done.
    A batch whose lane was revoked before its tail ran is purged by the next group all the
    same (harmless: the purge is idempotent) and redelivered to the partition's next owner.
    """

    def __init__(self, indexer: IndexerPorts, purger: PurgerPorts) -> None:
        self._indexer, self._purger = indexer, purger
        self._waiting: dict[int, _Waiting] = {}
        self._done: dict[int, list[Any]] = {}
        self._ids = itertools.count()
        self._lock = asyncio.Lock()

    async def apply(self, envelopes: Sequence[Envelope]) -> Deferred:
        """The tombstones now (one result per envelope, in order); the purge as the rest."""
        started = time.monotonic()
        recorded = await record_batch(envelopes, self._indexer)
        recorded_s = time.monotonic() - started
        metrics.STAGE_SECONDS.labels("tombstones").observe(recorded_s)
        log.info("deletions.recorded", events=len(envelopes), tombstones_s=round(recorded_s, 3))
        batch = next(self._ids)
        self._waiting[batch] = _Waiting(envelopes, recorded)

        async def rest() -> list[Any]:
            return await self.purged(batch)

        return Deferred(list(recorded.results), rest)

    async def purged(self, batch: int) -> list[Any]:
        """Once `batch` is purged: a PermanentError per envelope refused (None: done)."""
        async with self._lock:
            if batch not in self._done:
                taken = self._take(batch)
                try:
                    self._done.update(await self._purge(taken))
                except BaseException:
                    self._waiting.update(taken)  # not purged: their tails run them again
                    raise
            return self._done.pop(batch)

    def _take(self, batch: int) -> dict[int, _Waiting]:
        taken = {batch: self._waiting.pop(batch)}
        size = len(taken[batch].envelopes)
        for other in sorted(self._waiting):
            if size >= GROUP_EVENTS:
                break
            size += len(self._waiting[other].envelopes)
            taken[other] = self._waiting.pop(other)
        return taken

    async def _purge(self, taken: dict[int, _Waiting]) -> dict[int, list[Any]]:
        """Project what keeps history, then one purge of every sink for the whole group."""
        started = time.monotonic()
        later: dict[int, list[Any]] = {}
        tombstoned: list[tuple[int, int, Envelope]] = []
        for batch, waiting in taken.items():
            recorded = waiting.recorded
            await project_recorded(recorded, self._indexer, skip=purged_next)
            later[batch] = [r if isinstance(r, PermanentError) else None for r in recorded.results]
            # A duplicate may be a redelivery after a crash between tombstone and purge.
            tombstoned += [
                (batch, i, waiting.envelopes[i])
                for i, r in enumerate(recorded.results)
                if isinstance(r, ApplyResult) and r.outcome in ("tombstoned", "duplicate")
            ]
        if tombstoned:
            purged = await purge_batch([envelope for _, _, envelope in tombstoned], self._purger)
            for (batch, i, _), outcome in zip(tombstoned, purged, strict=True):
                if isinstance(outcome, PermanentError):
                    later[batch][i] = outcome
        purge_s = time.monotonic() - started
        metrics.STAGE_SECONDS.labels("purge").observe(purge_s)
        log.info(
            "deletions.purged",
            batches=len(taken),
            purged=len(tombstoned),
            purge_s=round(purge_s, 3),
        )
        return later


def deletion_subscription(rt: Runtime, generation: int) -> Subscription:
    """The lane's subscription; `rt` should be a Runtime of its own (its own pool)."""
    group = PurgeGroup(indexer_ports(rt, generation), purger_ports(rt))

    settings = rt.settings
    return Subscription(
        name=LANE,
        topic=settings.topics.deletions,
        group=settings.group(LANE),
        consumer=CONSUMER,  # the same claims as the documents lane: a copy on both is a dup
        handle=group.apply,
        batched=True,
    )
