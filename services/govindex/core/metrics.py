"""Prometheus metrics of a govindex process, named by Prometheus conventions.

Labels are bounded: consumers, event types, outcomes, reasons, deletion modes, groups,
topics, partitions, job kinds and states. Never a document id, a tenant or a source:
those grow without bound and belong in logs and traces.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def consumer_label(consumer: str) -> str:
    """A consumer as a label: a CDC feed's (`cdc:<source>`) is `cdc`, so no source id
    becomes a label (logs and traces name the feed)."""
    return consumer.split(":", 1)[0]


QUARANTINED = Gauge(
    "govindex_quarantine_records",
    "Dead letters moved to the quarantine topic after every redrive failed (kept, never consumed).",
)
EMBEDDING_DEFERRED = Counter(
    "govindex_embedding_deferred_chunks",
    "Chunks committed without a model's vectors because it failed or was slow, by model.",
    ["model"],
)
EMBEDDING_BACKLOG = Gauge(
    "govindex_embedding_backlog_chunks",
    "Chunks waiting for a vector (absent from the dense channel until embedded).",
)
EMBEDDING_BACKLOG_OLDEST = Gauge(
    "govindex_embedding_backlog_oldest_seconds",
    "How long the oldest chunk waiting for a vector has waited (0: none waits).",
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
HIDDEN_SECONDS = Histogram(
    "govindex_deletion_hidden_seconds",
    "From a deletion's time to its tombstone committed: from then on no read serves the "
    "document (its purge from every sink follows).",
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
# Sources are never labels (one series per source would grow with the catalog): the
# stalest source's age, and how many are past their refresh_sla.
SOURCE_FRESHNESS = Gauge(
    "govindex_source_freshness_seconds",
    "Seconds since the least recently synced source last synced (of the sources that sync).",
)
SOURCES_STALE = Gauge(
    "govindex_sources_stale", "Enabled sources whose last sync is older than their refresh_sla."
)
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


# --- the read path --------------------------------------------------------------------

_READ_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_TOKENS = (100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)

# The only values the read path's labels take (never a principal, a tenant, a document id
# or text: those belong in the read audit); anything else is counted as OTHER, so a
# caller's typo or a new route never becomes a series of its own.
OTHER = "other"
READ_ENDPOINTS = frozenset({"search", "pack", "chunk", "verify", "lineage", "stored_pack", "probe"})
READ_CHANNELS = frozenset({"bm25", "fulltext", "structured", "graph", "dense"})
READ_GATES = frozenset(
    {"tenant", "acl", "scope", "purpose", "time", "deletion", "integrity", "trust", "dedup"}
)
# The read gates name valid and system time apart; as a label they are one gate kind.
_GATE_KINDS = {"valid_time": "time", "system_time": "time"}
READ_STATUSES = frozenset(
    {200, 201, 204, 304, 400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 500, 502, 503, 504}
)

READ_REQUESTS = Counter(
    "govindex_read_requests",
    "Read API requests answered, by endpoint and HTTP status.",
    ["endpoint", "status"],
)
READ_SECONDS = Histogram(
    "govindex_read_request_duration_seconds",
    "Time to answer one read API request, by endpoint.",
    ["endpoint"],
    buckets=_READ_LATENCY,
)
READ_CHANNEL_SECONDS = Histogram(
    "govindex_read_channel_duration_seconds",
    "Time one retrieval channel took for one request (degraded answers included).",
    ["channel"],
    buckets=_READ_LATENCY,
)
READ_CACHE = Counter(
    "govindex_read_cache", "Read answer cache lookups, by result: hit, miss.", ["result"]
)
READ_REFUSALS = Counter(
    "govindex_read_refusals",
    "Candidates refused, by the kind of gate that refused them.",
    ["gate"],
)
READ_DEGRADED = Counter(
    "govindex_read_degraded_channels",
    "Channels that could not answer a request (the request was answered without them).",
    ["channel"],
)
READ_TOKENS_PACKED = Histogram(
    "govindex_read_tokens_packed", "Tokens in one built pack.", buckets=_TOKENS
)


def _bounded(value: str, allowed: frozenset[str]) -> str:
    return value if value in allowed else OTHER


def status_label(status: int) -> str:
    """An HTTP status as a label: itself if the read API answers it, else its class
    (`4xx`), else OTHER."""
    if status in READ_STATUSES:
        return str(status)
    return f"{status // 100}xx" if 100 <= status <= 599 else OTHER


def observe_read(endpoint: str, status: int, seconds: float) -> None:
    """One answered request: counted by endpoint and status, timed by endpoint."""
    label = _bounded(endpoint, READ_ENDPOINTS)
    READ_REQUESTS.labels(endpoint=label, status=status_label(status)).inc()
    READ_SECONDS.labels(endpoint=label).observe(max(seconds, 0.0))


def observe_channel(channel: str, seconds: float, degraded: bool) -> None:
    """One channel of one request: timed, and counted as degraded if it could not answer."""
    label = _bounded(channel, READ_CHANNELS)
    READ_CHANNEL_SECONDS.labels(channel=label).observe(max(seconds, 0.0))
    if degraded:
        READ_DEGRADED.labels(channel=label).inc()


def observe_cache(hit: bool) -> None:
    """One lookup of the read answer cache."""
    READ_CACHE.labels(result="hit" if hit else "miss").inc()


def observe_refusals(gates: Mapping[str, int]) -> None:
    """One request's refusals, as counts by gate (`valid_time` and `system_time` are
    `time`); counts under 1 are ignored."""
    for gate, count in gates.items():
        if count > 0:
            kind = _GATE_KINDS.get(gate, gate)
            READ_REFUSALS.labels(gate=_bounded(kind, READ_GATES)).inc(count)


def observe_tokens_packed(n: int) -> None:
    """The tokens of one pack built (a negative count is recorded as 0)."""
    READ_TOKENS_PACKED.observe(max(n, 0))
