"""`/metrics` for a worker process: the Prometheus endpoint and the sampler behind gauges.

Counters and histograms are recorded where things happen (`govindex.core.metrics`); the
gauges (consumer lag in records and seconds, outbox and purge backlogs, jobs) are sampled
here every `GOVINDEX_METRICS_SAMPLE_S` from the broker and Postgres.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

import structlog

from govindex.adapters.kafka import OffsetReader
from govindex.adapters.kafka_security import PLAINTEXT, KafkaSecurity
from govindex.adapters.postgres.inspect import PostgresGauges
from govindex.core import metrics as m
from govindex.core.settings import Consumers
from govindex.runtime.composition import Runtime

log = structlog.get_logger(__name__)


def groups_of(rt: Runtime, kinds: Sequence[str]) -> list[tuple[str, str]]:
    """(group, topic) of every consumer group the given worker kinds run (CDC aside: its
    topics belong to the sources)."""
    topics, found = rt.settings.topics, []
    if "indexer" in kinds:
        found += [
            (rt.settings.group(Consumers.INDEXER), topics.documents),
            (rt.settings.group(Consumers.DELETIONS), topics.deletions),
        ]
    if "purger" in kinds:
        found.append((rt.settings.group(Consumers.PURGER), topics.tombstones))
    return found


async def cdc_groups(rt: Runtime) -> list[tuple[str, str]]:
    """(group, topic) of every CDC feed registered now (sources come and go)."""
    return [
        (rt.settings.group(f"{Consumers.CDC}.{manifest.source_id}"), manifest.cdc.topic)
        for manifest in await rt.registry.cdc_sources()
        if manifest.cdc is not None
    ]


def _records(bootstrap: str, topic: str, security: KafkaSecurity = PLAINTEXT) -> int:
    """How many records a topic holds (the sum of its partitions' end offsets)."""
    reader = OffsetReader(bootstrap, security)
    try:
        return sum(reader.end_offsets(topic).values())
    finally:
        reader.close()


def _lag(
    bootstrap: str, groups: list[tuple[str, str]], security: KafkaSecurity = PLAINTEXT
) -> list[tuple[str, str, int, int, float]]:
    """(group, topic, partition, records behind, seconds behind) for every partition."""
    now_ms = time.time() * 1000
    out = []
    reader = OffsetReader(bootstrap, security)
    try:
        for group, topic in groups:
            behind = {}
            for lag in reader.lag(topic, group):
                behind[lag.partition] = (lag.committed or 0, lag.lag)
            stamps = reader.timestamps(topic, {p: c for p, (c, n) in behind.items() if n > 0})
            for partition, (_, records) in sorted(behind.items()):
                age = max(0.0, (now_ms - stamps[partition]) / 1000) if partition in stamps else 0.0
                out.append((group, topic, partition, records, age))
    finally:
        reader.close()
    return out


async def sample_forever(rt: Runtime, kinds: Sequence[str], stop: asyncio.Event) -> None:
    gauges = PostgresGauges(rt.pool)
    groups = groups_of(rt, kinds)
    cdc = rt.settings.group(Consumers.CDC)  # every CDC feed's lag, under one label
    while not stop.is_set():
        try:
            feeds = await cdc_groups(rt) if Consumers.CDC in kinds else []
            lags = await asyncio.to_thread(
                _lag, rt.servers.kafka_bootstrap, groups + feeds, rt.kafka_security
            )
            behind, oldest = 0, 0.0
            for group, topic, partition, records, age in lags:
                if (group, topic) in feeds:
                    behind, oldest = behind + records, max(oldest, age)
                    continue
                m.LAG_RECORDS.labels(group, topic, str(partition)).set(records)
                m.LAG_SECONDS.labels(group, topic, str(partition)).set(age)
            if feeds:
                m.LAG_RECORDS.labels(cdc, "cdc", "all").set(behind)
                m.LAG_SECONDS.labels(cdc, "cdc", "all").set(oldest)
            m.QUARANTINED.set(
                await asyncio.to_thread(
                    _records,
                    rt.servers.kafka_bootstrap,
                    rt.settings.topics.quarantine,
                    rt.kafka_security,
                )
            )
            sample = await gauges.sample()
            m.OUTBOX_PENDING.set(sample["outbox_pending"])
            m.OUTBOX_OLDEST.set(sample["outbox_oldest_s"])
            m.OUTBOX_UNSENT.set(sample["outbox_unsent"])
            m.PURGES_PENDING.set(sample["purges_pending"])
            m.PURGES_OLDEST.set(sample["purges_oldest_s"])
            m.EMBEDDING_BACKLOG.set(sample["embedding_backlog"])
            m.EMBEDDING_BACKLOG_OLDEST.set(sample["embedding_backlog_oldest_s"])
            m.SOURCE_FRESHNESS.set(sample["source_freshness_s"])
            m.SOURCES_STALE.set(sample["sources_stale"])
            m.JOBS.clear()
            m.JOB_ITEMS_DONE.clear()
            m.JOB_ITEMS_TOTAL.clear()
            for kind, state, count, done, total in sample["jobs"]:
                m.JOBS.labels(kind, state).set(count)
                if state == "running":
                    m.JOB_ITEMS_DONE.labels(kind).set(done)
                    m.JOB_ITEMS_TOTAL.labels(kind).set(total)
        except Exception as exc:  # a server away: the gauges keep their last values
            log.warning("metrics.sample_failed", error=str(exc))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rt.settings.metrics_sample_s)
