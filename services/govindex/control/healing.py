"""Self-healing after one server's restart: topics back, the index back and rebuilt.

A worker process checks every `heal_every_s` what a restarted server may have lost:
- the broker: a topic missing, short of partitions, or under a new topic id (it lost its
  log and a client re-created it) is repaired; the process's consumers then start again
  (their groups and positions went with the log) and every pending event is published
  again at once instead of after its backoff, so nothing waits for the next start; if
  they could not start again (the broker flapping), the next check tries again;
- the OpenSearch-compatible server: with no alias while Postgres records a live
  generation, the template, the generation's index and the alias are recreated and a
  `reindex --verify --execute` job (visible in `govindex jobs`) copies Postgres's chunks
  back. Until then BM25 finds fewer chunks; every read stays gated (fail closed).
PostgreSQL and Redis need nothing here: their clients reconnect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

import structlog

from govindex.adapters.kafka import TopicKeeper, TopicState
from govindex.adapters.kafka_security import PLAINTEXT, KafkaSecurity
from govindex.core.jobs import SELF_HEAL, JobState
from govindex.runtime.composition import Runtime

log = structlog.get_logger(__name__)


class TopicHealer:
    """Remembers the topics' ids between checks, to see a broker that lost its log, and
    the losses whose consumers have not yet started again."""

    def __init__(self, bootstrap: str, security: KafkaSecurity = PLAINTEXT) -> None:
        self._keeper = TopicKeeper(bootstrap, security)
        self._ids: dict[str, str | None] = {}
        self._unsettled: set[str] = set()

    async def check(
        self,
        wanted: Mapping[str, int],
        on_lost: Callable[[list[str]], Awaitable[None]],
    ) -> list[str]:
        """Repair what the broker lost and call `on_lost` with the topics it had lost;
        return them (none: all well). A loss whose `on_lost` raised is not forgotten: the
        next check calls it again with the same topics, though the topics look whole by
        then (a consumer that could not start again would otherwise never run)."""
        states = await asyncio.to_thread(self._keeper.states, wanted)
        lost = [
            name
            for name, state in states.items()
            if name in self._unsettled or self._lost(name, state, wanted)
        ]
        if lost:
            await asyncio.to_thread(self._keeper.repair, wanted, states)
            states = await asyncio.to_thread(self._keeper.states, wanted)
        self._ids.update({name: state.topic_id for name, state in states.items()})
        if lost:
            self._unsettled.update(lost)
            log.warning("kafka.topics_restored", topics=lost)
            await on_lost(lost)
            self._unsettled.difference_update(lost)
        return lost

    def _lost(self, name: str, state: TopicState, wanted: Mapping[str, int]) -> bool:
        if state.topic_id is None or state.partitions < wanted[name]:
            return True
        known = self._ids.get(name)
        return known is not None and known != state.topic_id

    def close(self) -> None:
        self._keeper.close()


async def wanted_topics(rt: Runtime) -> dict[str, int]:
    """Every topic the pipeline needs, with its partitions (CDC feeds' included)."""
    partitions = rt.settings.partitions
    wanted = dict.fromkeys(rt.settings.topics.all(), partitions)
    for manifest in await rt.registry.cdc_sources():
        if manifest.cdc is not None:
            wanted.setdefault(manifest.cdc.topic, partitions)
    return wanted


async def heal_index(rt: Runtime) -> int | None:
    """Recreate the alias and rebuild its generation if the server lost them; returns the
    id of the rebuild job started (None: nothing was missing)."""
    if await rt.index.live_generation() is not None:
        return None
    generation = await rt.generations.live()
    if generation is None:  # never prepared: `govindex bootstrap` / `up` does that
        return None
    from govindex.control.jobs import launch_job
    from govindex.control.reindex import REINDEX

    await rt.index.ensure_template()
    await rt.index.restore_alias(generation)
    for job in await rt.jobs.recent(20, kind=REINDEX):
        if job.state == JobState.RUNNING and job.requested_by == SELF_HEAL:
            return None  # another process of this deployment is rebuilding already
    job, _task = await launch_job(
        rt,
        REINDEX,
        {"mode": "verify", "generation": generation},
        dry_run=False,
        rate=None,
        requested_by=SELF_HEAL,
    )
    log.warning("opensearch.index_restored", generation=generation, job=job.id)
    return job.id


async def heal_forever(
    rt: Runtime,
    *,
    every_s: float,
    stopped: Callable[[float], Awaitable[bool]],
    on_topics_lost: Callable[[list[str]], Awaitable[None]],
) -> None:
    """Check and repair every `every_s` until `stopped` says so; failures are retried."""
    topics = TopicHealer(rt.servers.kafka_bootstrap, rt.kafka_security)
    try:
        while await stopped(every_s):
            try:
                await topics.check(await wanted_topics(rt), on_topics_lost)
            except Exception as exc:  # the broker or Postgres is away: next round
                log.info("heal.topics_unchecked", error=str(exc))
            try:
                await heal_index(rt)
            except Exception as exc:
                log.info("heal.index_unchecked", error=str(exc))
    finally:
        topics.close()
