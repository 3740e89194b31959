"""Workers of one process: consumers on their topics and the outbox relay, started together.

Each service's `app.py` says what it subscribes (`Subscription`s built from a Runtime);
this module gives each a FastStream broker (one consumer group per subscription), runs
every record through `runtime.consumer.process`, and relays the outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from govindex.adapters.faststream import Broker, new_broker, subscribe
from govindex.adapters.kafka_lanes import LanePolicy, PartitionLanes
from govindex.core.errors import TransientError
from govindex.core.ports import EventPublisher
from govindex.runtime.composition import Runtime
from govindex.runtime.consumer import processor
from govindex.runtime.lanes import batch_processor
from govindex.runtime.relay import RelayPolicy, relay_forever
from govindex.runtime.subscription import Subscription

log = structlog.get_logger(__name__)

WORKERS = ("indexer", "purger", "cdc")
RELAY_STOP_S = 30.0  # a relay round publishes at most 1000 rows
# Deletions in micro-batches: a short linger, so a lone delete is applied at once.
DELETION_LANE = LanePolicy(max_events=100, linger_s=0.005, queue_events=1000)


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


@dataclass
class Workers:
    """Consumers and the outbox relay of one process, on one Runtime."""

    rt: Runtime
    run: tuple[str, ...] = WORKERS
    relay: RelayPolicy | None = None  # default: from settings
    _brokers: list[Broker] = field(default_factory=list)
    _lanes: list[PartitionLanes] = field(default_factory=list)
    _deletion_rt: Runtime | None = None
    _relay: asyncio.Task[None] | None = None
    _cdc_watch: asyncio.Task[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> int:
        """Subscribe and join the groups; returns the index generation written to."""
        generation = await self.rt.index.live_generation()
        if generation is None:
            raise TransientError(
                f"the index alias {self.rt.settings.index_alias!r} does not exist; run "
                "`govindex up`, `govindex bootstrap` or `govindex reindex` first"
            )
        publisher = await self.rt.publisher()
        dead_letters = self.rt.settings.topics.dead_letters
        settings = self.rt.settings
        lane_policy = LanePolicy(
            max_events=settings.batch_max_events,
            max_bytes=settings.batch_max_bytes,
            linger_s=settings.batch_linger_ms / 1000,
            queue_events=max(settings.lane_queue_events, settings.batch_max_events),
        )
        found = await subscriptions(self.rt, self.run, generation)
        if "indexer" in self.run:  # the deletion lane, on Postgres connections of its own
            from govindex.runtime.deletions import deletion_subscription

            # Its own Postgres pool; the same OpenSearch client, so its purges go first.
            deletion_rt = Runtime(settings, pool_size=3, index=self.rt.index)
            self._deletion_rt = await deletion_rt.__aenter__()
            found.append(deletion_subscription(self._deletion_rt, generation))
        for sub in found:
            if sub.batched:
                on_batch = batch_processor(
                    sub.handle,
                    consumer=sub.consumer,
                    dead_letters_topic=dead_letters,
                    publisher=publisher,
                    dead_letters=self.rt.outbox,
                    stopping=self._stop,
                )
                self._lanes.append(
                    PartitionLanes(
                        self.rt.servers.kafka_bootstrap,
                        topic=sub.topic,
                        group_id=sub.group,
                        client_id=f"govindex-{sub.name}",
                        on_batch=on_batch,
                        policy=DELETION_LANE
                        if sub.topic == settings.topics.deletions
                        else lane_policy,
                    )
                )
                continue
            self._brokers.append(self._broker(sub, publisher))
        # Each consumer joins its own group; joining in parallel halves start-up.
        await asyncio.gather(
            *(broker.start() for broker in self._brokers),
            *(lanes.start() for lanes in self._lanes),
        )
        policy = self.relay or RelayPolicy(
            republish_after_s=settings.republish_after_s,
            republish_on_start=settings.republish_on_start,
        )
        self._relay = asyncio.create_task(
            relay_forever(self.rt.outbox, publisher, policy, self._stop), name="outbox-relay"
        )
        if "cdc" in self.run:
            known = {sub.consumer for sub in found}
            self._cdc_watch = asyncio.create_task(self._watch_cdc(known, publisher))
        log.info("workers.started", workers=list(self.run), generation=generation)
        return generation

    def _broker(self, sub: Subscription, publisher: EventPublisher) -> Broker:
        """An event-at-a-time consumer of its own (started by the caller)."""
        broker = new_broker(self.rt.servers.kafka_bootstrap, f"govindex-{sub.name}")
        on_delivery = processor(
            sub.handle,
            consumer=sub.consumer,
            dead_letters_topic=self.rt.settings.topics.dead_letters,
            publisher=publisher,
            dead_letters=self.rt.outbox,
            raw=sub.raw,
        )
        subscribe(
            broker, topic=sub.topic, group_id=sub.group, name=sub.name, on_delivery=on_delivery
        )
        return broker

    async def _watch_cdc(self, known: set[str], publisher: EventPublisher) -> None:
        """Subscribe CDC sources registered after the start, without a restart."""
        from ingest.app import cdc_subscriptions

        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.rt.settings.cdc_rescan_s)
                return
            try:
                for sub in await cdc_subscriptions(self.rt, known):
                    broker = self._broker(sub, publisher)
                    await broker.start()
                    self._brokers.append(broker)
                    known.add(sub.consumer)
            except Exception as exc:  # the registry or broker is away: try next round
                log.warning("cdc.rescan_failed", error=str(exc))

    async def stop(self) -> None:
        self._stop.set()  # batches still failing give up (uncommitted, redelivered)
        if self._cdc_watch is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._cdc_watch
            self._cdc_watch = None
        for lanes in self._lanes:  # in-flight batches finish and commit
            await lanes.stop()
        self._lanes.clear()
        if self._deletion_rt is not None:
            await self._deletion_rt.__aexit__(None, None, None)
            self._deletion_rt = None
        if self._relay is not None:
            try:  # the relay ends its current round and returns
                await asyncio.wait_for(asyncio.shield(self._relay), RELAY_STOP_S)
            except TimeoutError:
                log.warning("outbox.relay_stop_timeout", seconds=RELAY_STOP_S)
                self._relay.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._relay
        for broker in self._brokers:
            await broker.stop()
        self._brokers.clear()
        log.info("workers.stopped")
