"""Workers of one process: consumers on their topics and the outbox relay, started together.

Each service's `app.py` says what it subscribes (`Subscription`s built from a Runtime);
this module gives each a FastStream broker (one consumer group per subscription) or
per-partition lanes (batched consumers), runs every record through the consumer loop, and
relays the outbox. `govindex worker pause KIND` is a flag in Postgres: every process stops
that kind's consumers (in-flight batches finish and commit; the groups empty, so their
offsets can be reset) and starts them again on `resume`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import structlog

from govindex.adapters.faststream import Broker, new_broker, subscribe
from govindex.adapters.kafka_lanes import LanePolicy, PartitionLanes
from govindex.control.deletions import DeletionLane
from govindex.core.errors import TransientError
from govindex.core.ports import EventPublisher
from govindex.core.settings import Consumers
from govindex.runtime.composition import Runtime
from govindex.runtime.consumer import processor
from govindex.runtime.job_types import runner_id
from govindex.runtime.lanes import batch_processor
from govindex.runtime.relay import RelayPolicy, relay_forever
from govindex.runtime.subscription import Subscription

log = structlog.get_logger(__name__)

WORKERS = Consumers.KINDS
# The indexer's two lanes, each of which a process may run alone: the documents lanes, and
# the deletion lane (control/deletions.py). `indexer` runs both. On its own process the
# deletion lane shares no interpreter with the documents lanes' CPU, so a tombstone never
# waits for their turn (docs/benchmarks/purge-latency.md). Pausing `indexer` pauses both.
INDEXER_PARTS: Final = ("documents", "deletions")


def parts(kinds: Sequence[str]) -> tuple[str, ...]:
    """What each kind runs, in order, once: `indexer` is its two lanes."""
    found: list[str] = []
    for kind in kinds:
        for part in INDEXER_PARTS if kind == Consumers.INDEXER else (kind,):
            if part not in found:
                found.append(part)
    return tuple(found)


def kind_of(part: str) -> str:
    """The kind a part belongs to (what `pause`, heartbeats and offsets speak of)."""
    return Consumers.INDEXER if part in INDEXER_PARTS else part


RELAY_STOP_S = 30.0  # a relay round publishes at most 1000 rows
# Deletions in micro-batches: a short linger and a short fetch wait, so a lone delete is
# applied at once. Up to 1,000 batches recorded ahead of their purges (grouped: see
# control/deletions.py), so a stalled search server does not hold back tombstones.
DELETION_LANE = LanePolicy(
    max_events=100, linger_s=0.005, queue_events=1000, max_tails=1000, fetch_wait_ms=50
)


async def subscriptions(rt: Runtime, names: Sequence[str], generation: int) -> list[Subscription]:
    """What the named workers subscribe, from each service's app."""
    from indexer.app import indexer_subscriptions
    from ingest.app import cdc_subscriptions
    from purger.app import purger_subscriptions

    found: list[Subscription] = []
    if "indexer" in names:
        found += indexer_subscriptions(rt, generation)
    if "purger" in names:
        found += purger_subscriptions(rt)
    if "cdc" in names:
        found += await cdc_subscriptions(rt)
    return found


Consumer = Broker | PartitionLanes | DeletionLane


@dataclass
class Workers:
    """Consumers and the outbox relay of one process, on one Runtime."""

    rt: Runtime
    run: tuple[str, ...] = WORKERS  # kinds, or the indexer's parts (`INDEXER_PARTS`)
    relay: RelayPolicy | None = None  # default: from settings
    metrics: bool = False  # sample the gauges of `/metrics` (lag, backlogs, jobs)
    heal: bool = False  # repair what a restarted broker or index lost (servers' processes)
    _consumers: dict[str, list[Consumer]] = field(default_factory=dict)  # by worker kind
    _halts: dict[str, asyncio.Event] = field(default_factory=dict)
    _paused: set[str] = field(default_factory=set)
    _healing: str | None = None  # what this process is putting back (in its heartbeat)
    _known_cdc: set[str] = field(default_factory=set)
    _generation: int = 0
    _publisher: EventPublisher | None = None
    _relay: asyncio.Task[None] | None = None
    _background: list[asyncio.Task[None]] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    # When the control loop last went round, and last wrote its heartbeat (monotonic):
    # what `/livez` reports (`govindex.control.health`).
    round_at: float = field(default_factory=time.monotonic)
    beat_at: float | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds this process runs (a part counts as its kind)."""
        return tuple(dict.fromkeys(kind_of(part) for part in parts(self.run)))

    async def start(self) -> int:
        """Subscribe and join the groups; returns the index generation written to."""
        generation = await self.rt.index.live_generation()
        if generation is None:
            raise TransientError(
                f"the index alias {self.rt.settings.index_alias!r} does not exist; run "
                "`govindex up`, `govindex bootstrap` or `govindex reindex` first"
            )
        self._generation = generation
        self._publisher = await self.rt.publisher()
        settings = self.rt.settings
        self._paused = await self.rt.controls.paused() & set(self.kinds)
        if "documents" in parts(self.run):
            from indexer.app import warm_up

            await asyncio.to_thread(warm_up, self.rt)
        # Each consumer joins its own group; joining in parallel halves start-up.
        await asyncio.gather(*(self._start_kind(k) for k in self.kinds if k not in self._paused))
        policy = self.relay or RelayPolicy(
            republish_after_s=settings.republish_after_s,
            republish_on_start=settings.republish_on_start,
        )
        self._relay = asyncio.create_task(
            relay_forever(self.rt.outbox, self._publisher, policy, self._stop),
            name="outbox-relay",
        )
        self._background.append(asyncio.create_task(self._obey(), name="worker-controls"))
        self._background.append(asyncio.create_task(self._heartbeat(), name="worker-heartbeat"))
        if "cdc" in self.kinds:
            self._background.append(asyncio.create_task(self._watch_cdc(), name="cdc-rescan"))
        if "documents" in parts(self.run) and self.rt.embedders:
            from indexer.embedding import embed_backlog_forever

            backlog = embed_backlog_forever(
                self.rt.vectors,
                self.rt.embedders,
                self._stop,
                every_s=settings.embed_backlog_every_s,
                # After the commit the backlog is the dense channel's only way in: two
                # batches in flight keep the model and PostgreSQL both at work.
                drainers=2 if settings.embed_deferred else 1,
            )
            self._background.append(asyncio.create_task(backlog, name="embedding-backlog"))
        if self.heal:
            from govindex.control.healing import heal_forever

            healer = heal_forever(
                self.rt,
                every_s=settings.heal_every_s,
                stopped=self._every,
                on_topics_lost=self._rejoin,
            )
            self._background.append(asyncio.create_task(healer, name="self-heal"))
        if self.metrics:
            from govindex.control.metrics import sample_forever

            sampler = sample_forever(self.rt, self.kinds, self._stop)
            self._background.append(asyncio.create_task(sampler, name="metrics-sampler"))
        log.info(
            "workers.started",
            workers=list(self.run),
            paused=sorted(self._paused),
            generation=generation,
        )
        return generation

    async def _start_kind(self, kind: str, *, rewind: bool = False) -> None:
        """Build and start the consumers of one worker kind (`rewind`: reading their first
        partitions from the beginning, after the broker lost its log)."""
        assert self._publisher is not None
        settings = self.rt.settings
        halt = self._halts[kind] = asyncio.Event()
        mine = [part for part in parts(self.run) if kind_of(part) == kind]
        found = (
            await subscriptions(self.rt, (kind,), self._generation)
            if kind != Consumers.INDEXER or "documents" in mine
            else []
        )
        if kind == "cdc":
            self._known_cdc = {sub.consumer for sub in found}
        lane_policy = LanePolicy(
            max_events=settings.batch_max_events,
            max_bytes=settings.batch_max_bytes,
            linger_s=settings.batch_linger_ms / 1000,
            queue_events=max(settings.lane_queue_events, settings.batch_max_events),
        )
        consumers: list[Consumer] = []
        for sub in found:
            if not sub.batched:
                consumers.append(self._broker(sub, self._publisher, rewind=rewind))
                continue
            on_batch = batch_processor(
                sub.handle,
                consumer=sub.consumer,
                dead_letters_topic=settings.topics.dead_letters,
                publisher=self._publisher,
                dead_letters=self.rt.outbox,
                stopping=halt,
            )
            consumers.append(
                PartitionLanes(
                    self.rt.servers.kafka_bootstrap,
                    security=self.rt.kafka_security,
                    topic=sub.topic,
                    group_id=sub.group,
                    client_id=f"govindex-{sub.name}",
                    on_batch=on_batch,
                    policy=lane_policy,
                    rewind=rewind,
                )
            )
        if "deletions" in mine:  # the deletion lane, on a loop and Postgres pool of its own
            consumers.append(
                DeletionLane(
                    self.rt,
                    self._generation,
                    DELETION_LANE,
                    dead_letters_topic=settings.topics.dead_letters,
                    rewind=rewind,
                )
            )
        self._consumers[kind] = consumers
        await asyncio.gather(*(c.start() for c in consumers))

    async def _stop_kind(self, kind: str) -> None:
        """Stop one kind's consumers: batches still failing give up (uncommitted, so they
        are redelivered), in-flight batches finish and commit, the groups are left."""
        self._halts.get(kind, asyncio.Event()).set()

        async def stop(consumer: Consumer) -> None:
            try:  # every one is stopped, whatever another's stop raised
                await consumer.stop()
            except Exception as exc:
                log.warning("workers.consumer_stop_failed", kind=kind, error=repr(exc))

        await asyncio.gather(*map(stop, self._consumers.pop(kind, [])))

    def _broker(
        self, sub: Subscription, publisher: EventPublisher, *, rewind: bool = False
    ) -> Broker:
        """An event-at-a-time consumer of its own (started by the caller)."""
        broker = new_broker(
            self.rt.servers.kafka_bootstrap, f"govindex-{sub.name}", self.rt.kafka_security
        )
        on_delivery = processor(
            sub.handle,
            consumer=sub.consumer,
            dead_letters_topic=self.rt.settings.topics.dead_letters,
            publisher=publisher,
            dead_letters=self.rt.outbox,
            raw=sub.raw,
        )
        subscribe(
            broker,
            topic=sub.topic,
            group_id=sub.group,
            name=sub.name,
            on_delivery=on_delivery,
            rewind=rewind,
        )
        return broker

    async def _beat(self, runner: str) -> None:
        """Write the heartbeat; `beat_at` says when one was last written."""
        await self.rt.controls.beat(runner, self.kinds, sorted(self._paused), self._healing)
        self.beat_at = time.monotonic()

    async def _rejoin(self, lost: list[str]) -> None:
        """The broker lost its log: consumers start again, reading the new log from its
        beginning (the groups' commits are worthless now), and every pending event is
        published again at once, not after its backoff.

        Every kind stops at once, then every kind starts at once: each new consumer's
        join waits on the broker's rebalance (seconds to tens of seconds), and the
        republished events feed the new log only once every kind has started. A kind that
        does not start raises, and the healer calls this again at its next check."""
        self._healing = f"rejoining the broker, which lost {len(lost)} topics"
        with contextlib.suppress(Exception):  # status says so while it lasts
            await self._beat(runner_id())
        started = time.monotonic()
        try:
            async with self._lock:
                kinds = [k for k in self.kinds if k not in self._paused]
                await asyncio.gather(*(self._stop_kind(kind) for kind in kinds))
                stopped = time.monotonic()
                starts = await asyncio.gather(
                    *(self._start_kind(kind, rewind=True) for kind in kinds),
                    return_exceptions=True,  # every start ends before the lock is let go
                )
                failed = [(k, o) for k, o in zip(kinds, starts, strict=True) if o is not None]
                for kind, error in failed:
                    log.warning("workers.rejoin_failed", kind=kind, error=repr(error))
                if failed:
                    raise failed[0][1]
            count = await self.rt.outbox.republish(None)
        finally:
            self._healing = None
        with contextlib.suppress(Exception):
            await self._beat(runner_id())
        log.warning(
            "workers.rejoined",
            topics=lost,
            kinds=kinds,
            republished=count,
            stop_s=round(stopped - started, 2),
            seconds=round(time.monotonic() - started, 2),
        )

    async def _every(self, seconds: float) -> bool:
        """Sleep `seconds`; False once the workers are stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
        return not self._stop.is_set()

    async def _obey(self) -> None:
        """Follow `govindex worker pause|resume`; the heartbeat says where this process
        stands, and is written again as soon as it has changed."""
        while True:
            try:
                wanted = await self.rt.controls.paused() & set(self.kinds)
                changed = False
                async with self._lock:
                    for kind in sorted(wanted - self._paused):
                        await self._stop_kind(kind)
                        self._paused.add(kind)
                        changed = True
                        log.info("workers.paused", worker=kind)
                    for kind in sorted(self._paused - wanted):
                        await self._start_kind(kind)
                        self._paused.discard(kind)
                        changed = True
                        log.info("workers.resumed", worker=kind)
                if changed:
                    await self._beat(runner_id())
            except Exception as exc:  # Postgres away: keep running as we are, try again
                log.warning("workers.control_failed", error=str(exc))
            self.round_at = time.monotonic()  # the loop goes round: the process is alive
            if not await self._every(self.rt.settings.control_poll_s):
                return

    async def _heartbeat(self) -> None:
        """Every control poll, the kinds this process runs and those it has paused, from
        a task of its own: a process stopping or starting its lanes (a batch's time, or
        longer) still beats, so `govindex worker pause` waits for it to report the new
        state instead of taking it for gone. A process stuck there beats all the same;
        `/livez` watches the control loop's rounds, not the heartbeat."""
        runner = runner_id()
        while True:
            try:
                await self._beat(runner)
            except Exception as exc:  # Postgres away: beat again next round
                log.warning("workers.heartbeat_failed", error=str(exc))
            if not await self._every(self.rt.settings.control_poll_s):
                return

    async def _watch_cdc(self) -> None:
        """Subscribe CDC sources registered after the start, without a restart."""
        from ingest.app import cdc_subscriptions

        while await self._every(self.rt.settings.cdc_rescan_s):
            try:
                async with self._lock:
                    if "cdc" in self._paused or self._publisher is None:
                        continue
                    for sub in await cdc_subscriptions(self.rt, self._known_cdc):
                        broker = self._broker(sub, self._publisher)
                        await broker.start()
                        self._consumers.setdefault("cdc", []).append(broker)
                        self._known_cdc.add(sub.consumer)
            except Exception as exc:  # the registry or broker is away: try next round
                log.warning("cdc.rescan_failed", error=str(exc))

    async def stop(self) -> None:
        self._stop.set()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._background.clear()
        async with self._lock:
            for kind in list(self._consumers):
                await self._stop_kind(kind)
        if self._relay is not None:
            try:  # the relay ends its current round and returns
                await asyncio.wait_for(asyncio.shield(self._relay), RELAY_STOP_S)
            except TimeoutError:
                log.warning("outbox.relay_stop_timeout", seconds=RELAY_STOP_S)
                self._relay.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._relay
        with contextlib.suppress(Exception):  # a clean stop says so at once
            await self.rt.controls.gone(runner_id())
        log.info("workers.stopped")
