"""The deletion lane: deletions on their own topic, consumer group, Postgres pool and loop.

A deletion used to wait behind every update queued on the documents topic, then behind the
relay and the tombstones topic; then, on this lane, behind the previous batch's purge,
which waits for the search server; then for its turn on the event loop the documents lanes
keep busy. Here each batch is applied in two steps:

1. the indexer's verbs record the tombstones in one short transaction (sequence-guarded:
   an update the deletion overtook is stale when it arrives; a later re-create still
   applies). Once it commits, readers no longer see the document anywhere, and the lane
   takes its next batch. This step, the lane's Kafka consumer and its Postgres pool run on
   an event loop of their own thread (`DeletionLane`);
2. the batch's tail, run after the tails before it, on the process's main loop (its one
   OpenSearch client, whose purge-first gate holds bulks back): the projection of
   history-keeping tombstones, then the purger's verbs purge every sink with one OpenSearch
   sweep and refresh, read back and write receipts, for every batch waiting (`PurgeGroup`).
   Only then does the lane commit the batch's offsets (`PartitionLanes`), so a crash in
   between runs both steps again (the first then finds duplicates).

The tombstones topic still carries each deletion (the outbox keeps it pending until
purged): if the lane is gone for good, the purger finishes the work.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import structlog

from govindex.adapters.kafka_lanes import LanePolicy, PartitionLanes
from govindex.adapters.loop_thread import LoopThread
from govindex.core import metrics
from govindex.core.envelope import Envelope
from govindex.core.errors import PermanentError
from govindex.core.events import DocumentDeleted
from govindex.core.ports import ApplyResult
from govindex.core.settings import Consumers
from govindex.runtime.composition import Runtime
from govindex.runtime.lanes import Deferred, batch_processor
from indexer.app import indexer_ports
from indexer.handlers import CONSUMER, IndexerPorts, Recorded, project_recorded, record_batch
from indexer.planning import purged_next
from purger.app import purger_ports
from purger.handlers import PurgerPorts, purge_batch

log = structlog.get_logger(__name__)
LANE = Consumers.DELETIONS


GROUP_EVENTS = 1000  # deletions purged together at most (a tail's own batch always)
SWITCH_INTERVAL_S = 0.001


@dataclass
class _Waiting:
    envelopes: Sequence[Envelope]
    recorded: Recorded


def _hidden_after(recorded: Recorded, now: datetime) -> list[float]:
    """Seconds from each deletion's time to `now`, for the tombstones this step committed."""
    return [
        max((now - e.payload.deleted_at).total_seconds(), 0.0)
        for e in recorded.planned
        if isinstance(e.payload, DocumentDeleted)
        and isinstance(result := recorded.results[e.position], ApplyResult)
        and result.outcome == "tombstoned"
    ]


class PurgeGroup:
    """Recorded batches waiting for their purge, purged together: the first tail to run
    takes every batch waiting (its own and those recorded since, on any partition), and
    the later tails find theirs done. A purge costs the search server a few requests
    whatever its size, so under a burst the purges keep up with the tombstones.

    A purge that fails puts its batches back: each tail is retried until its own is done.
    A batch whose lane was revoked before its tail ran is purged by the next group all the
    same (harmless: the purge is idempotent) and redelivered to the partition's next owner.

    `record` are the ports of the tombstone step, `indexer` and `purger` those of the
    purge, which runs on `purge_loop` (the lane's own loop is another thread's).
    """

    def __init__(
        self,
        record: IndexerPorts,
        indexer: IndexerPorts,
        purger: PurgerPorts,
        *,
        purge_loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._record, self._indexer, self._purger = record, indexer, purger
        self._purge_loop = purge_loop
        self._waiting: dict[int, _Waiting] = {}  # written from both loops: under `_guard`
        self._guard = threading.Lock()
        self._done: dict[int, list[Any]] = {}  # the purge loop's only
        self._ids = itertools.count()
        self._lock: asyncio.Lock | None = None  # the purge loop's, made there

    async def apply(self, envelopes: Sequence[Envelope]) -> Deferred:
        """The tombstones now (one result per envelope, in order); the purge as the rest."""
        started = time.monotonic()
        recorded = await record_batch(envelopes, self._record)
        recorded_s = time.monotonic() - started
        metrics.STAGE_SECONDS.labels("tombstones").observe(recorded_s)
        hidden = _hidden_after(recorded, datetime.now(UTC))
        for seconds in hidden:
            metrics.HIDDEN_SECONDS.observe(seconds)
        log.info(
            "deletions.recorded",
            events=len(envelopes),
            tombstones_s=round(recorded_s, 3),
            # from the oldest deletion's time: to this step's start, and to its commit
            waited_s=round(max(hidden) - recorded_s, 3) if hidden else None,
            hidden_s=round(max(hidden), 3) if hidden else None,
        )
        with self._guard:
            batch = next(self._ids)
            self._waiting[batch] = _Waiting(envelopes, recorded)

        async def rest() -> list[Any]:
            future = asyncio.run_coroutine_threadsafe(self.purged(batch), self._purge_loop)
            return await asyncio.wrap_future(future)  # a cancelled wait cancels the purge

        return Deferred(list(recorded.results), rest)

    async def purged(self, batch: int) -> list[Any]:
        """Once `batch` is purged: a PermanentError per envelope refused (None: done)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if batch not in self._done:
                taken = self._take(batch)
                try:
                    self._done.update(await self._purge(taken))
                except BaseException:
                    with self._guard:  # not purged: their tails run them again
                        self._waiting.update(taken)
                    raise
            return self._done.pop(batch)

    def _take(self, batch: int) -> dict[int, _Waiting]:
        with self._guard:
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


class DeletionLane:
    """The deletion lane's consumer, on an event loop of its own thread.

    The documents lanes spend their CPU (parse, chunk, stamp, bulk bodies) on the main
    loop, in steps of up to half a second under load; a tombstone ready to be recorded
    waited for each. Here the lane's Kafka consumer, its Postgres pool (a Runtime of its
    own) and its tombstone transaction run on a loop of their own: a ready tombstone waits
    for the interpreter's switch interval, not for a step of another lane to end. Its
    purge hops back to the main loop, to the process's one OpenSearch client and pool.
    Started and stopped from the main loop, like the other consumers.
    """

    POOL_SIZE = 3

    def __init__(
        self,
        rt: Runtime,
        generation: int,
        policy: LanePolicy,
        *,
        dead_letters_topic: str,
        rewind: bool = False,
    ) -> None:
        self._rt, self._generation, self._policy = rt, generation, policy
        self._dead_letters_topic = dead_letters_topic
        self._rewind = rewind
        self._thread: LoopThread | None = None
        self._lane_rt: Runtime | None = None
        self._lanes: PartitionLanes | None = None
        self._stopping: asyncio.Event | None = None  # the lane loop's

    async def start(self) -> None:
        main = asyncio.get_running_loop()
        # A thread woken by its socket waits for the interpreter's lock until the thread
        # holding it has run this long (5 ms by default): at each of the step's round trips
        # while the documents lanes keep the main thread busy. 1 ms bounds that wait.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        # Built here, on the main loop: the purge's ports, and the model (loaded once; a
        # tombstone batch never embeds, a stray change on the topic would).
        indexer, purger = indexer_ports(self._rt, self._generation), purger_ports(self._rt)
        self._thread = LoopThread(f"govindex-{LANE}")
        try:
            await self._thread.call(self._start_there(main, indexer, purger))
        except BaseException:
            try:  # what had started (the lane's Runtime) is closed, and the thread ends
                await self._thread.call(self._stop_there())
            finally:
                await self._close_thread()
            raise

    async def _start_there(
        self, main: asyncio.AbstractEventLoop, indexer: IndexerPorts, purger: PurgerPorts
    ) -> None:
        settings = self._rt.settings
        # The main Runtime's OpenSearch client is shared, never used here: the tombstone
        # step does not touch OpenSearch (`record_batch`).
        lane_rt = Runtime(settings, pool_size=self.POOL_SIZE, index=self._rt.index)
        self._lane_rt = await lane_rt.__aenter__()
        record = replace(
            indexer,
            registry=lane_rt.registry,
            store=lane_rt.chunks,
            blobs=lane_rt.blobs,
            cache=lane_rt.cache,
            generations=lane_rt.generations,
        )
        group = PurgeGroup(record, indexer, purger, purge_loop=main)
        self._stopping = asyncio.Event()
        on_batch = batch_processor(
            group.apply,
            consumer=CONSUMER,  # the same claims as the documents lane: a copy on both is a dup
            dead_letters_topic=self._dead_letters_topic,
            publisher=await lane_rt.publisher(),
            dead_letters=lane_rt.outbox,
            stopping=self._stopping,
        )
        lanes = PartitionLanes(
            lane_rt.servers.kafka_bootstrap,
            security=lane_rt.kafka_security,
            topic=settings.topics.deletions,
            group_id=settings.group(LANE),
            client_id=f"govindex-{LANE}",
            on_batch=on_batch,
            policy=self._policy,
            rewind=self._rewind,
        )
        await lanes.start()  # stops its consumer itself if it cannot start
        self._lanes = lanes

    async def stop(self) -> None:
        """Stop the lane (in-flight batches and their purges finish and commit, as every
        lane's), then its Runtime and its thread."""
        if self._thread is None:
            return
        if self._stopping is not None:
            self._thread.loop.call_soon_threadsafe(self._stopping.set)
        try:
            await self._thread.call(self._stop_there())
        finally:
            await self._close_thread()

    async def _stop_there(self) -> None:
        try:
            if self._lanes is not None:
                await self._lanes.stop()
        finally:
            self._lanes = None
            if self._lane_rt is not None:
                await self._lane_rt.__aexit__(None, None, None)
                self._lane_rt = None

    async def _close_thread(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.close)
