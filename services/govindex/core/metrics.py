"""Prometheus metrics of a govindex process, named by Prometheus conventions.

Labels are bounded: consumers, event types, outcomes, reasons, deletion modes, groups,
topics, partitions, job kinds and states. Never a document id, a tenant or a source:
those grow without bound and belong in logs and traces.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Gauge, Histogram

_LATENCY = (0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 120, 300)
_BATCH = (1, 5, 10, 25, 50, 100, 250, 500, 1000)

EVENTS = Counter(
    "govindex_events",
    "Events handled, by consumer, CloudEvents type and outcome.",
    ["consumer", "type", "outcome"],
)
DEAD_LETTERS = Counter(
    "govindex_dead_letters",
    "Records dead-lettered, by consumer and reason.",
    ["consumer", "reason"],
)
RETRIES = Counter(
    "govindex_retries", "Transient failures retried, by what was retried.", ["operation"]
)
BATCH_EVENTS = Histogram(
    "govindex_batch_events", "Events per applied batch.", ["consumer"], buckets=_BATCH
)
BATCH_SECONDS = Histogram(
    "govindex_batch_duration_seconds",
    "Time to apply one batch (both stores, dead letters included).",
    ["consumer"],
    buckets=_LATENCY,
)
STAGE_SECONDS = Histogram(
    "govindex_stage_duration_seconds",
    "Time per stage of a batch: prepare (parse, chunk, stamp, embed), postgres, opensearch; "
    "for the deletion lane, tombstones and purge.",
    ["stage"],
    buckets=_LATENCY,
)
BULK_ITEMS = Counter(
    "govindex_opensearch_bulk_items",
    "OpenSearch bulk items by result: created, conflict (already newer), rejected, retryable.",
    ["result"],
)
BULK_SECONDS = Histogram(
    "govindex_opensearch_bulk_duration_seconds", "One bulk request.", buckets=_LATENCY
)
PURGE_SECONDS = Histogram(
    "govindex_purge_latency_seconds",
    "From a deletion's time to its verified purge receipt, by deletion mode.",
    ["deletion_mode"],
    buckets=_LATENCY,
)
PURGE_VERIFY_FAILURES = Counter(
    "govindex_purge_verification_failures",
    "Purges whose read-back found content left behind (retried).",
)
# Sampled every few seconds from the broker and Postgres by the process's collector.
LAG_RECORDS = Gauge(
    "govindex_consumer_lag_records",
    "Records a group has not committed yet.",
    ["group", "topic", "partition"],
)
LAG_SECONDS = Gauge(
    "govindex_consumer_lag_seconds",
    "Age of the oldest record a group has not committed yet (0 when caught up).",
    ["group", "topic", "partition"],
)
OUTBOX_PENDING = Gauge(
    "govindex_outbox_pending_events", "Emitted events not yet applied by their consumer."
)
OUTBOX_UNSENT = Gauge("govindex_outbox_unsent_rows", "Outbox rows not yet published.")
OUTBOX_OLDEST = Gauge(
    "govindex_outbox_oldest_pending_age_seconds", "Age of the oldest pending emitted event."
)
PURGES_PENDING = Gauge("govindex_purges_pending", "Tombstones whose purge is not done.")
PURGES_OLDEST = Gauge(
    "govindex_purge_oldest_pending_age_seconds", "Age of the oldest purge not done."
)
JOBS = Gauge("govindex_jobs", "Jobs by kind and state.", ["kind", "state"])
JOB_ITEMS_DONE = Gauge("govindex_job_items_done", "Items done by running jobs, by kind.", ["kind"])
JOB_ITEMS_TOTAL = Gauge(
    "govindex_job_items_total", "Items in scope of running jobs, by kind.", ["kind"]
)


def outcome_of(result: Any) -> str:
    """The outcome label of a handler's result."""
    found = getattr(result, "outcome", None)
    if isinstance(found, str):
        return found
    return "done" if result is not None else "skipped"
