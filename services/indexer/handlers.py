"""Indexer handlers: plain async verbs over ports.

See docs/design/data-flow.md, docs/design/guarantees.md.

`index_batch` prepares each event outside any transaction (`indexer.preparing`: manifest
and content, then `indexer.planning` parses, chunks and stamps), applies the batch in one
unit of work (`indexer.applying`: claim, lock, decide, execute, announce through the outbox
with `indexer.announcing`), then writes OpenSearch after the commit, from what Postgres now
holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from govindex.core import metrics, tracing
from govindex.core.envelope import Envelope
from govindex.core.errors import PermanentError
from govindex.core.events import DocumentDeleted
from govindex.core.ports import (
    ApplyResult,
    BlobStore,
    ChunkStore,
    Embedder,
    GenerationRegistry,
    SearchIndex,
    SourceRegistry,
    TaggedCache,
    VersionPlan,
)
from govindex.core.settings import Topics
from govindex.core.tokens import HEURISTIC, TokenEstimator
from indexer.announcing import Announcer
from indexer.applying import CONSUMER, BatchResult, apply_batch, project
from indexer.decisions import Overlay
from indexer.planning import PlannedEvent, plan_version
from indexer.preparing import embed, prepare_batch, queue_for_embedding

__all__ = [
    "CONSUMER",
    "BatchResult",
    "IndexerPorts",
    "Predicted",
    "Recorded",
    "index_batch",
    "index_document",
    "plan_version",
    "predict_batch",
    "project_recorded",
    "record_batch",
]

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class IndexerPorts:
    registry: SourceRegistry
    store: ChunkStore
    blobs: BlobStore
    index: SearchIndex
    topics: Topics
    generation: int
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    cache: TaggedCache | None = None
    embedders: Sequence[Embedder] = ()  # the live model's, and one being built beside it
    embed_deferred: bool = False  # commit without vectors; the backlog loop embeds them
    generations: GenerationRegistry | None = None  # rebuilds in progress get writes too
    tokens: TokenEstimator = HEURISTIC  # stamps `token_estimate` (the read API's counter)


def _never(_: PlannedEvent) -> bool:
    return False


async def index_document(envelope: Envelope, ports: IndexerPorts) -> ApplyResult:
    """Apply one document event: a batch of one (raises what would dead-letter it)."""
    (result,) = await index_batch([envelope], ports)
    if isinstance(result, PermanentError):
        raise result
    return result


async def index_batch(envelopes: Sequence[Envelope], ports: IndexerPorts) -> list[BatchResult]:
    """Apply a batch of document events: Postgres first, then OpenSearch.

    See docs/design/guarantees.md#postgres-first.

    Parsing, chunking, stamping and embedding happen before the transaction; then one
    transaction claims every event, locks every document in one sorted order, decides per
    document in delivery order (the sequence guard does the rest) and writes set-based;
    then one bulk projects what Postgres now holds. Returns one result per event, in order:
    what it did, or the permanent error that dead-letters it (only it: a batch Postgres
    refuses is bisected down to the event it refuses). A TransientError means nothing was
    decided: retry the whole batch.

    Idempotent: a duplicate or stale event changes nothing in Postgres, and the projection
    re-reads what Postgres holds for each event, so a redelivery after a crash between the
    two sinks completes the projection.
    """
    recorded = await record_batch(envelopes, ports)
    await project_recorded(recorded, ports)
    return recorded.outcomes()


@dataclass(frozen=True)
class Recorded:
    """A batch committed to Postgres and not yet projected: the events as planned and one
    result per envelope (None: refused nowhere, decided by the transaction)."""

    planned: list[PlannedEvent]
    results: list[BatchResult | None]

    def outcomes(self) -> list[BatchResult]:
        assert all(r is not None for r in self.results)
        return [r for r in self.results if r is not None]


async def record_batch(envelopes: Sequence[Envelope], ports: IndexerPorts) -> Recorded:
    """The first half of `index_batch`: prepare, then the one Postgres transaction. Once it
    returns, what it decided is what readers see (a tombstone hides its document at once);
    OpenSearch is not touched."""
    started = time.monotonic()
    planned, refused = await _prepare(envelopes, ports)
    if ports.embedders and any(isinstance(e.plan, VersionPlan) for e in planned):
        if ports.embed_deferred:
            planned = queue_for_embedding(planned)
        else:
            planned = await asyncio.to_thread(embed, planned, ports.embedders)
    # (a batch of tombstones has nothing to embed: no hop through a thread pool that
    # the documents lanes may keep busy)
    prepared = time.monotonic()
    metrics.STAGE_SECONDS.labels("prepare").observe(prepared - started)
    results: list[BatchResult | None] = [refused.get(i) for i in range(len(envelopes))]
    announcer = Announcer(ports.topics, ports.generation)
    applied = await apply_batch(planned, store=ports.store, announcer=announcer, cache=ports.cache)
    for position, result in applied.items():
        results[position] = result
    metrics.STAGE_SECONDS.labels("postgres").observe(time.monotonic() - prepared)
    return Recorded(planned, results)


async def project_recorded(
    recorded: Recorded, ports: IndexerPorts, *, skip: Callable[[PlannedEvent], bool] = _never
) -> None:
    """The second half: one bulk from what Postgres now holds (see `project`); a chunk
    OpenSearch refuses for good turns its event's result into a PermanentError. `skip`:
    events whose chunks a purge removes next, so they are not written only to be deleted."""
    started = time.monotonic()
    await project(
        [e for e in recorded.planned if not skip(e)],
        recorded.results,
        store=ports.store,
        index=ports.index,
        generations=ports.generations,
    )
    metrics.STAGE_SECONDS.labels("opensearch").observe(time.monotonic() - started)
    _log_applied(recorded.planned, recorded.results)


@dataclass(frozen=True)
class Predicted:
    """What the indexer would do with an event: a `Prediction`, or dead_letter with the
    reason it would give."""

    outcome: str
    reason: str = ""


async def predict_batch(
    envelopes: Sequence[Envelope], ports: IndexerPorts, overlay: Overlay
) -> list[Predicted]:
    """Predict, read-only, what `index_batch` would do with these events now, in order.

    The same preparation (payload, source, content, parse and stamp) finds the same
    permanent errors; the same guard over the same facts, read without locks, decides the
    rest. `overlay` carries what earlier predicted events of the same run will have done.
    """
    planned, refused = await _prepare(envelopes, ports)
    results: list[Predicted | None] = [None] * len(envelopes)
    for position, error in refused.items():
        results[position] = Predicted("dead_letter", error.reason)
    processed, states = await ports.store.peek(
        CONSUMER, [e.envelope.id for e in planned], [e.key for e in planned]
    )
    for event in planned:
        outcome = overlay.predict(
            event.envelope.id,
            event.payload.key,
            event.payload.sequence,
            deletion=isinstance(event.payload, DocumentDeleted),
            processed=event.envelope.id in processed,
            state=states.get(event.key),
        )
        results[event.position] = Predicted(outcome)
    return [r for r in results if r is not None]


async def _prepare(
    envelopes: Sequence[Envelope], ports: IndexerPorts
) -> tuple[list[PlannedEvent], dict[int, PermanentError]]:
    planned, refused = await prepare_batch(
        envelopes,
        registry=ports.registry,
        blobs=ports.blobs,
        store=ports.store,
        generation=ports.generation,
        now=ports.clock(),
        tokens=ports.tokens,
    )
    return planned, refused


def _log_applied(planned: Sequence[PlannedEvent], results: Sequence[BatchResult | None]) -> None:
    for event in planned:
        result = results[event.position]
        log.info(
            "document.applied",
            doc_key=event.payload.key,
            trace_id=tracing.trace_id(event.envelope.extensions),
            sequence=event.payload.sequence,
            outcome=result.outcome if isinstance(result, ApplyResult) else "dead_lettered",
            chunks=result.chunk_count if isinstance(result, ApplyResult) else 0,
        )
