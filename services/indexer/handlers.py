"""Indexer handlers: plain async verbs over ports (DESIGN §2, §5).

`index_document` parses and stamps outside any transaction, then opens one document
transaction: claim the event, read the document under its lock, decide (a pure function of
`indexer.decisions`), execute the decision, announce it through the outbox. OpenSearch is
written after the commit, from what Postgres now holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import structlog

from govindex.core import events, metrics, tracing
from govindex.core.envelope import Envelope, KafkaRecord, encode_document_event, parse_payload
from govindex.core.errors import (
    ContentUnavailable,
    InvalidEvent,
    PermanentError,
    RejectedByIndex,
    SourceDisabled,
    TransientError,
    UnknownSource,
)
from govindex.core.events import (
    AccessRevoked,
    DocumentChanged,
    DocumentDeleted,
    DocumentIndexed,
)
from govindex.core.hashing import sha256_hex
from govindex.core.ports import (
    ApplyResult,
    BlobStore,
    BulkResult,
    ChunkStore,
    DocumentKey,
    Embedder,
    GenerationRegistry,
    GraphEdge,
    OutboxMessage,
    SearchIndex,
    SourceRegistry,
    TaggedCache,
    TombstonePlan,
    VersionPlan,
)
from govindex.core.records import Chunk, DeletionMode, SourceManifest
from govindex.core.retry import retry_transient
from govindex.core.settings import Consumers, Topics
from indexer.decisions import Incoming, Overlay, decide_change, decide_deletion
from indexer.graph import extract_edges
from indexer.parsers import parse, parser_for
from indexer.parsers.markdown import Frontmatter
from indexer.stamping import (
    StampContext,
    resolve_access,
    resolve_validity,
    stamp_chunks,
    version_id,
)

log = structlog.get_logger(__name__)
CONSUMER = Consumers.INDEXER
PROJECTION_RETRY_S = 300.0  # then the batch fails and is redelivered: Postgres is idempotent
PURGER = Consumers.PURGER  # the consumer of the tombstones topic


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
    embedder: Embedder | None = None
    generations: GenerationRegistry | None = None  # rebuilds in progress get writes too


async def require_source(
    registry: SourceRegistry, tenant_id: str, source_id: str, *, deletion: bool = False
) -> SourceManifest:
    manifest = await registry.get(tenant_id, source_id)
    if manifest is None:
        raise UnknownSource(
            f"source {source_id!r} of tenant {tenant_id!r} is not registered; register it with "
            "`govindex source apply MANIFEST.yaml` and replay the event"
        )
    if not manifest.enabled and not deletion:  # a deletion is always honoured
        raise SourceDisabled(
            f"source {source_id!r} is disabled in its manifest; events from it are refused"
        )
    return manifest


async def index_document(envelope: Envelope, ports: IndexerPorts) -> ApplyResult:
    """Apply one document event: a batch of one (raises what would dead-letter it)."""
    (result,) = await index_batch([envelope], ports)
    if isinstance(result, PermanentError):
        raise result
    return result


BatchResult = ApplyResult | PermanentError


@dataclass(frozen=True)
class _Item:
    """One event of a batch, ready for the transaction: parsed, chunked and stamped."""

    position: int
    envelope: Envelope
    payload: DocumentChanged | DocumentDeleted
    plan: VersionPlan | TombstonePlan | None  # None: its content was purged, stale at best
    incoming: Incoming | None = None

    @property
    def key(self) -> DocumentKey:
        p = self.payload
        return DocumentKey(p.tenant_id, p.source_id, p.doc_id)


async def index_batch(
    envelopes: Sequence[Envelope], ports: IndexerPorts, *, purging_now: bool = False
) -> list[BatchResult]:
    """Apply a batch of document events: Postgres first, then OpenSearch (DESIGN §5.3).

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

    `purging_now`: the caller (the deletion lane) purges every sink right after, so the
    chunks of a purge-mode tombstone are not projected first only to be deleted.
    """
    now = ports.clock()
    results: list[BatchResult | None] = [None] * len(envelopes)
    items: list[_Item] = []
    started = time.monotonic()
    for position, envelope in enumerate(envelopes):
        try:
            items.append(await _prepare(position, envelope, ports, now))
        except PermanentError as error:
            results[position] = error
        await asyncio.sleep(0)  # parsing is CPU: let the deletion lane in between events
    await asyncio.to_thread(_embed, items, ports)
    prepared = time.monotonic()
    metrics.STAGE_SECONDS.labels("prepare").observe(prepared - started)
    for position, applied in (await _apply_bisecting(items, ports)).items():
        results[position] = applied
    written = time.monotonic()
    metrics.STAGE_SECONDS.labels("postgres").observe(written - prepared)
    await _project([it for it in items if not (purging_now and _purged_next(it))], results, ports)
    metrics.STAGE_SECONDS.labels("opensearch").observe(time.monotonic() - written)
    for item in items:
        result = results[item.position]
        log.info(
            "document.applied",
            doc_key=item.payload.key,
            trace_id=tracing.trace_id(item.envelope.extensions),
            sequence=item.payload.sequence,
            outcome=result.outcome if isinstance(result, ApplyResult) else "dead_lettered",
            chunks=result.chunk_count if isinstance(result, ApplyResult) else 0,
        )
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


async def _prepare(position: int, envelope: Envelope, ports: IndexerPorts, now: datetime) -> _Item:
    payload = parse_payload(envelope)
    deletion = isinstance(payload, DocumentDeleted)
    manifest = await require_source(
        ports.registry, payload.tenant_id, payload.source_id, deletion=deletion
    )
    if isinstance(payload, DocumentDeleted):
        tombstone = TombstonePlan(
            **payload.identity(),
            event_id=envelope.id,
            reason=payload.reason,
            deletion_mode=_deletion_mode(manifest, payload),
            deleted_at=payload.deleted_at,
            recorded_at=now,
        )
        return _Item(position, envelope, payload, tombstone)
    content = await _content(payload, ports)
    if content is None:
        return _Item(position, envelope, payload, None)
    plan = plan_version(payload, content, manifest, generation=ports.generation, now=now)
    incoming = Incoming(
        sequence=plan.sequence,
        content_hash=plan.content_hash,
        parser=plan.parser,
        parser_version=plan.parser_version,
        acl=plan.chunks[0].acl if plan.chunks else (),
        has_chunks=bool(plan.chunks),
    )
    return _Item(position, envelope, payload, plan, incoming)


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
    now = ports.clock()
    results: list[Predicted | None] = [None] * len(envelopes)
    items: list[_Item] = []
    for position, envelope in enumerate(envelopes):
        try:
            items.append(await _prepare(position, envelope, ports, now))
        except PermanentError as error:
            results[position] = Predicted("dead_letter", error.reason)
        await asyncio.sleep(0)
    processed, states = await ports.store.peek(
        CONSUMER, [it.envelope.id for it in items], [it.key for it in items]
    )
    for item in items:
        outcome = overlay.predict(
            item.envelope.id,
            item.payload.key,
            item.payload.sequence,
            deletion=isinstance(item.payload, DocumentDeleted),
            processed=item.envelope.id in processed,
            state=states.get(item.key),
        )
        results[item.position] = Predicted(outcome)
    return [r for r in results if r is not None]


def _embed(items: list[_Item], ports: IndexerPorts) -> None:
    """One call to the model for every chunk of the batch."""
    if ports.embedder is None:
        return
    plans = [(i, it.plan) for i, it in enumerate(items) if isinstance(it.plan, VersionPlan)]
    texts = [c.text for _, plan in plans for c in plan.chunks]
    if not texts:
        return
    vectors = iter(ports.embedder.embed(texts))
    made_by = (ports.embedder.name, ports.embedder.version)
    for i, plan in plans:
        if plan.chunks:
            own = [next(vectors) for _ in plan.chunks]
            items[i] = replace(items[i], plan=replace(plan, vectors=own, embedder=made_by))


async def _apply_bisecting(items: list[_Item], ports: IndexerPorts) -> dict[int, BatchResult]:
    """Apply in one transaction; when Postgres refuses the batch, split it in halves (in
    delivery order) until the event it refuses is alone, and dead-letter only that one."""
    if not items:
        return {}
    try:
        return dict(await _apply(items, ports))
    except PermanentError as error:
        if len(items) == 1:
            return {items[0].position: error}
        log.warning("batch.bisect", events=len(items), reason=error.reason)
        half = len(items) // 2
        first = await _apply_bisecting(items[:half], ports)
        return first | await _apply_bisecting(items[half:], ports)


async def _apply(items: list[_Item], ports: IndexerPorts) -> dict[int, ApplyResult]:
    """One transaction for the batch; results count only once it commits."""
    results: dict[int, ApplyResult] = {}
    by_key: dict[DocumentKey, list[_Item]] = {}
    for item in items:
        by_key.setdefault(item.key, []).append(item)
    async with ports.store.transaction() as tx:
        fresh = await tx.claim_all(CONSUMER, [it.envelope.id for it in items])
        states = await tx.lock_all(list(by_key))
        messages: list[OutboxMessage] = []
        reshaped: list[str] = []
        depth = max(len(q) for q in by_key.values())
        # Round r holds each document's r-th event in delivery order, exactly what one event
        # at a time would decide: an older version delivered after a newer one is stale,
        # never history. A document is at most once per round, so writes are set-based.
        for round_ in range(depth):
            batch = [q[round_] for q in by_key.values() if len(q) > round_]
            if round_:
                states = await tx.states([it.key for it in batch])
            inserts: list[tuple[_Item, VersionPlan, tuple[str, ...]]] = []
            applied: list[tuple[_Item, VersionPlan, ApplyResult]] = []
            for item in batch:
                claimed = item.envelope.id in fresh
                fresh.discard(item.envelope.id)  # a second copy in the batch is a duplicate
                state = states.get(item.key) if claimed else None
                plan = item.plan
                if isinstance(plan, TombstonePlan):
                    outcome = decide_deletion(claimed, state, plan.sequence)
                    if outcome != "tombstoned":
                        results[item.position] = ApplyResult(outcome)
                        continue
                    result = await tx.record_tombstone(plan)
                    results[item.position] = result
                    messages += _announce_deletion(item, plan, result, ports)
                    continue
                if plan is None or item.incoming is None:  # claimed, so its emission settles
                    results[item.position] = ApplyResult("stale" if claimed else "duplicate")
                    continue
                decision = decide_change(claimed, state, item.incoming)
                if decision.outcome in ("duplicate", "stale"):
                    results[item.position] = ApplyResult(decision.outcome)
                    continue
                if decision.lost_principals:
                    await tx.revoke_principals(plan.key, decision.lost_principals, plan.sequence)
                if decision.keep_version is None:
                    inserts.append((item, plan, decision.lost_principals))
                    continue
                updated = await tx.update_metadata(plan, decision.keep_version)
                applied.append((item, plan, replace(updated, revoked=decision.lost_principals)))
            written = await tx.insert_versions([plan for _, plan, _ in inserts])
            for (item, plan, lost), inserted in zip(inserts, written, strict=True):
                applied.append((item, plan, replace(inserted, revoked=lost)))
            await tx.mark_active_all([(plan, result.version_id) for _, plan, result in applied])
            for item, plan, result in applied:
                results[item.position] = result
                assert isinstance(item.payload, DocumentChanged)
                messages += _announce_change(item.envelope, item.payload, result, ports, plan)
                if _reshapes_answers(result):
                    reshaped.append(item.payload.key)
        await tx.enqueue(messages)
        if reshaped:  # before the commit: once it is seen, it is done
            await _evict_answers(ports, reshaped)
    return results


def _purged_next(item: _Item) -> bool:
    plan = item.plan
    return (
        isinstance(plan, TombstonePlan)
        and plan.deletion_mode == DeletionMode.TOMBSTONE_AND_PURGE.value
    )


async def _project(
    items: list[_Item], results: list[BatchResult | None], ports: IndexerPorts
) -> None:
    """One bulk for the batch, built from Postgres after the commit.

    Every event that was not stale is projected (a duplicate too: its first delivery may
    have died between the sinks). 429 and 5xx are retried with backoff, and every retry
    re-reads Postgres: a payload kept from before a purge would resurrect its chunks. A
    chunk OpenSearch refuses for good dead-letters its event with the reason.
    """
    changes: dict[tuple[DocumentKey, int], int] = {}
    for item in items:
        result = results[item.position]
        if isinstance(result, ApplyResult) and result.outcome != "stale":
            changes.setdefault((item.key, item.payload.sequence), item.position)
    if not changes:
        return

    async def bulk() -> BulkResult:
        chunks = await ports.store.chunks_changed_by_many(list(changes))
        # Read after the commit, on every attempt: a rebuild registers its generation
        # before it copies, so a change it does not copy is written to it here.
        building = await ports.generations.building() if ports.generations else []
        result = await ports.index.project(chunks, building=building)
        # The deletion lane may have purged a document between the read and the write: a
        # chunk Postgres no longer holds leaves the index again (readers gate on Postgres
        # meanwhile, so it is never served).
        written = [c.chunk_id for c in chunks if c.chunk_id not in result.rejected]
        gone = set(written) - await ports.store.chunks_present(written)
        if gone:
            await ports.index.delete_chunks(sorted(gone))
            log.info("projection.purged_meanwhile", chunks=len(gone))
        for chunk in chunks:
            if chunk.chunk_id in result.rejected:
                key = DocumentKey(chunk.tenant_id, chunk.source_id, chunk.doc_id)
                owner = changes.get((key, chunk.sequence))
                if owner is not None and not isinstance(results[owner], PermanentError):
                    results[owner] = RejectedByIndex(
                        f"OpenSearch refused chunk {chunk.chunk_id} of {key.doc_id!r}: "
                        f"{result.rejected[chunk.chunk_id]}; fix the mapping or the parser, "
                        "then redrive the event"
                    )
        return result

    await retry_transient(bulk, what="opensearch bulk", give_up_after=PROJECTION_RETRY_S)


async def _content(payload: DocumentChanged, ports: IndexerPorts) -> str | None:
    """The event's text; None when its blob is gone because the document was deleted (and
    purged) at a later sequence: the event is stale, and its content must stay gone."""
    content = payload.content
    if content is None:
        assert payload.content_ref is not None
        content = await ports.blobs.blob(payload.content_ref)
        if content is None:
            key = DocumentKey(payload.tenant_id, payload.source_id, payload.doc_id)
            if payload.sequence <= await ports.store.last_sequence(key):
                return None
            raise ContentUnavailable(
                f"claim-check blob {payload.content_ref} is not in Postgres; the producer must "
                "store the blob before emitting the event"
            )
    if sha256_hex(content) != payload.content_hash:
        raise InvalidEvent(
            f"content does not match content_hash {payload.content_hash}; the event was "
            "altered or built wrongly"
        )
    return content


def plan_version(
    payload: DocumentChanged,
    content: str,
    manifest: SourceManifest,
    *,
    generation: int,
    now: datetime,
) -> VersionPlan:
    """Parse, chunk and stamp a new version (pure; fails with InvalidEvent, of which
    InvalidFrontmatter, or MissingAcl)."""
    parser = parser_for(manifest.parser, payload.path or payload.doc_id)
    parsed = parse(parser, content)
    frontmatter = Frontmatter.of(parsed.frontmatter)  # InvalidFrontmatter: never stamped
    valid_from, valid_to = resolve_validity(manifest, payload, frontmatter)
    ctx = StampContext(
        manifest=manifest,
        event=payload,
        access=resolve_access(manifest, payload, frontmatter),
        valid_from=valid_from,
        valid_to=valid_to,
        recorded_at=now,
        parser=parser.name,
        parser_version=parser.version,
        index_generation=generation,
    )
    chunks = stamp_chunks(ctx, parsed.chunks)
    return VersionPlan(
        **payload.identity(),
        content_hash=payload.content_hash,
        content=content,
        media_type=payload.media_type,
        title=payload.title or _title(frontmatter, chunks),
        path=payload.path,
        metadata={**payload.metadata, **frontmatter.metadata()},
        valid_from=valid_from,
        valid_to=valid_to,
        observed_at=payload.observed_at,
        recorded_at=now,
        parser=parser.name,
        parser_version=parser.version,
        chunks=chunks,
        version_id=version_id(payload.key, payload.sequence),
        edges=[
            GraphEdge(e.subject, e.relation, e.object, e.subject_alias, e.object_alias)
            for e in extract_edges(payload.source_id, payload.doc_id, frontmatter)
        ],
    )


def _announce_change(
    envelope: Envelope,
    payload: DocumentChanged,
    result: ApplyResult,
    ports: IndexerPorts,
    plan: VersionPlan,
) -> list[OutboxMessage]:
    now = plan.recorded_at
    messages = [_receipt(envelope, payload, result, ports, now, payload.content_hash)]
    if result.revoked:  # the purger evicts what was built for them
        revoked = AccessRevoked(
            **payload.identity(), principals=list(result.revoked), revoked_at=now
        )
        record = encode_document_event(
            events.ACCESS_REVOKED,
            revoked,
            op=f"revoked:{payload.sequence}",
            time=now,
            cause=envelope.extensions,
        )
        messages.append(_to_purger(ports, record, payload.tenant_id, payload.source_id))
    return messages


def _announce_deletion(
    item: _Item, plan: TombstonePlan, result: ApplyResult, ports: IndexerPorts
) -> list[OutboxMessage]:
    payload = item.payload
    assert isinstance(payload, DocumentDeleted)
    forward = encode_document_event(
        events.DOCUMENT_DELETED,
        payload,
        op="deleted",
        time=plan.recorded_at,
        event_id=item.envelope.id,
        extensions={"deletionmode": plan.deletion_mode},
        cause=item.envelope.extensions,
    )
    return [
        _to_purger(ports, forward, payload.tenant_id, payload.source_id),
        _receipt(item.envelope, payload, result, ports, plan.recorded_at, None),
    ]


async def _evict_answers(ports: IndexerPorts, doc_keys: Sequence[str]) -> None:
    """Best effort: the read service never serves an entry whose documents moved on (it
    checks their sequences on every hit), so Redis being down must not stop indexing."""
    if ports.cache is None:
        return
    try:
        await ports.cache.evict_documents(doc_keys)
    except TransientError as exc:
        log.warning("cache.evict_failed", documents=len(doc_keys), error=str(exc))


def _reshapes_answers(result: ApplyResult) -> bool:
    """A new version, or changed access or validity that is not a plain loss of principals,
    evicts every cached answer built from the document. A loss of principals evicts only
    the answers built for them (the purger, on the revocation event); a tombstone evicts
    on purge. Entries are never served past a change anyway: the read service checks each
    held document's sequence on every hit; eviction keeps Redis from holding them."""
    if result.outcome == "indexed":
        return True
    return result.outcome == "metadata_updated" and not result.revoked


def _to_purger(
    ports: IndexerPorts, record: KafkaRecord, tenant_id: str, source_id: str
) -> OutboxMessage:
    """A deletion or revocation for the purger: pending (re-published) until it is done."""
    return OutboxMessage(
        ports.topics.tombstones, record, awaits=PURGER, tenant_id=tenant_id, source_id=source_id
    )


def _receipt(
    envelope: Envelope,
    payload: DocumentChanged | DocumentDeleted,
    result: ApplyResult,
    ports: IndexerPorts,
    now: datetime,
    content_hash: str | None,
) -> OutboxMessage:
    outcome = result.outcome
    assert outcome in ("indexed", "metadata_updated", "tombstoned")
    receipt = DocumentIndexed(
        **payload.identity(),
        event_id=envelope.id,
        outcome=outcome,
        version_id=result.version_id,
        chunk_count=result.chunk_count,
        content_hash=content_hash,
        index_generation=ports.generation,
        indexed_at=now,
    )
    record = encode_document_event(
        events.DOCUMENT_INDEXED,
        receipt,
        op=f"indexed:{payload.sequence}",
        time=now,
        cause=envelope.extensions,
    )
    return OutboxMessage(ports.topics.receipts, record)


def _title(frontmatter: Frontmatter, chunks: Sequence[Chunk]) -> str | None:
    if frontmatter.title is not None:
        return frontmatter.title
    for chunk in chunks:
        if chunk.heading_path:
            return chunk.heading_path[0]
    return None


SOURCE_LEVEL_REASONS = frozenset({"source_deleted", "source_disabled"})


def _deletion_mode(manifest: SourceManifest, payload: DocumentDeleted) -> str:
    """A source that is deleted or disabled loses its content whatever its deletion_mode."""
    if payload.reason in SOURCE_LEVEL_REASONS:
        return DeletionMode.TOMBSTONE_AND_PURGE.value
    return manifest.deletion_mode.value
