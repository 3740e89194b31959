"""Indexer handlers: plain async verbs over ports (DESIGN §2, §5).

`index_document` parses and stamps outside any transaction, then opens one document
transaction: claim the event, read the document under its lock, decide (a pure function of
`indexer.decisions`), execute the decision, announce it through the outbox. OpenSearch is
written after the commit, from what Postgres now holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import structlog

from govindex.core import events
from govindex.core.envelope import Envelope, KafkaRecord, encode_document_event
from govindex.core.errors import (
    ContentUnavailable,
    InvalidEvent,
    SourceDisabled,
    TransientError,
    UnknownSource,
)
from govindex.core.events import (
    AccessRevoked,
    DocumentChanged,
    DocumentDeleted,
    DocumentIndexed,
    parse_payload,
)
from govindex.core.hashing import sha256_hex
from govindex.core.ports import (
    ApplyResult,
    BlobStore,
    ChunkStore,
    DocumentKey,
    Embedder,
    GraphEdge,
    OutboxMessage,
    SearchIndex,
    SourceRegistry,
    TaggedCache,
    TombstonePlan,
    VersionPlan,
)
from govindex.core.records import Chunk, DeletionMode, SourceManifest
from govindex.core.settings import Topics
from indexer.decisions import Incoming, decide_change, decide_deletion
from indexer.graph import extract_edges
from indexer.parsers import parser_for
from indexer.stamping import (
    StampContext,
    resolve_access,
    resolve_validity,
    stamp_chunks,
    version_id,
)

log = structlog.get_logger(__name__)
CONSUMER = "indexer"
PURGER = "purger"  # the consumer of the tombstones topic


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
    """Apply one document event: Postgres first, then OpenSearch (DESIGN §5.3).

    Idempotent: a duplicate or stale event changes nothing in Postgres, and the OpenSearch
    step re-projects what Postgres holds for this event, so a redelivery after a crash
    between the two sinks completes the projection.
    """
    payload = parse_payload(envelope)
    manifest = await require_source(
        ports.registry,
        payload.tenant_id,
        payload.source_id,
        deletion=isinstance(payload, DocumentDeleted),
    )
    now = ports.clock()
    if isinstance(payload, DocumentDeleted):
        result = await _record_deletion(envelope, payload, manifest, ports, now)
    else:
        result = await _apply_change(envelope, payload, manifest, ports, now)
    if result.outcome != "stale":
        key = DocumentKey(payload.tenant_id, payload.source_id, payload.doc_id)
        await ports.index.upsert(await ports.store.chunks_changed_by(key, payload.sequence))
    log.info(
        "document.applied",
        doc_key=payload.key,
        sequence=payload.sequence,
        outcome=result.outcome,
        chunks=result.chunk_count,
    )
    return result


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
    """Parse, chunk and stamp a new version (pure; fails with InvalidEvent or MissingAcl)."""
    parser = parser_for(manifest.parser, payload.path or payload.doc_id)
    parsed = parser.parse(content)
    valid_from, valid_to = resolve_validity(manifest, payload, parsed.frontmatter)
    ctx = StampContext(
        manifest=manifest,
        event=payload,
        access=resolve_access(manifest, payload, parsed.frontmatter),
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
        title=payload.title or _title(parsed.frontmatter, chunks),
        path=payload.path,
        metadata={**payload.metadata, **_scalar_metadata(parsed.frontmatter)},
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
            for e in extract_edges(payload.source_id, payload.doc_id, parsed.frontmatter)
        ],
    )


async def _apply_change(
    envelope: Envelope,
    payload: DocumentChanged,
    manifest: SourceManifest,
    ports: IndexerPorts,
    now: datetime,
) -> ApplyResult:
    content = await _content(payload, ports)
    if content is None:
        async with ports.store.transaction() as tx:  # claimed, so its emission settles
            claimed = await tx.claim(CONSUMER, envelope.id)
        return ApplyResult("stale" if claimed else "duplicate")
    plan = plan_version(payload, content, manifest, generation=ports.generation, now=now)
    if ports.embedder is not None and plan.chunks:
        plan = replace(
            plan,
            vectors=ports.embedder.embed([c.text for c in plan.chunks]),
            embedder=(ports.embedder.name, ports.embedder.version),
        )
    incoming = Incoming(
        sequence=plan.sequence,
        content_hash=plan.content_hash,
        parser=plan.parser,
        parser_version=plan.parser_version,
        acl=plan.chunks[0].acl if plan.chunks else (),
        has_chunks=bool(plan.chunks),
    )
    async with ports.store.transaction() as tx:
        claimed = await tx.claim(CONSUMER, envelope.id)
        state = await tx.lock(plan.key) if claimed else None
        decision = decide_change(claimed, state, incoming)
        if decision.outcome in ("duplicate", "stale"):
            return ApplyResult(decision.outcome)
        if decision.lost_principals:
            await tx.revoke_principals(plan.key, decision.lost_principals, plan.sequence)
        if decision.keep_version is not None:
            result = await tx.update_metadata(plan, decision.keep_version)
        else:
            result = await tx.insert_version(plan)
        await tx.mark_active(plan, result.version_id)
        result = ApplyResult(
            result.outcome, result.version_id, result.chunk_count, decision.lost_principals
        )
        await tx.enqueue(_announce_change(envelope, payload, result, ports, now))
        if _reshapes_answers(result):  # before the commit: once it is seen, it is done
            await _evict_answers(ports, payload.key)
    return result


def _announce_change(
    envelope: Envelope,
    payload: DocumentChanged,
    result: ApplyResult,
    ports: IndexerPorts,
    now: datetime,
) -> list[OutboxMessage]:
    messages = [_receipt(envelope, payload, result, ports, now, payload.content_hash)]
    if result.revoked:  # the purger evicts what was built for them
        revoked = AccessRevoked(
            **payload.identity(), principals=list(result.revoked), revoked_at=now
        )
        record = encode_document_event(
            events.ACCESS_REVOKED, revoked, op=f"revoked:{payload.sequence}", time=now
        )
        messages.append(_to_purger(ports, record, payload.tenant_id, payload.source_id))
    return messages


async def _record_deletion(
    envelope: Envelope,
    payload: DocumentDeleted,
    manifest: SourceManifest,
    ports: IndexerPorts,
    now: datetime,
) -> ApplyResult:
    plan = TombstonePlan(
        **payload.identity(),
        event_id=envelope.id,
        reason=payload.reason,
        deletion_mode=_deletion_mode(manifest, payload),
        deleted_at=payload.deleted_at,
        recorded_at=now,
    )
    async with ports.store.transaction() as tx:
        claimed = await tx.claim(CONSUMER, envelope.id)
        state = await tx.lock(plan.key) if claimed else None
        outcome = decide_deletion(claimed, state, plan.sequence)
        if outcome != "tombstoned":
            return ApplyResult(outcome)
        result = await tx.record_tombstone(plan)
        forward = encode_document_event(
            events.DOCUMENT_DELETED,
            payload,
            op="deleted",
            time=now,
            event_id=envelope.id,
            extensions={"deletionmode": plan.deletion_mode},
        )
        await tx.enqueue(
            [
                _to_purger(ports, forward, payload.tenant_id, payload.source_id),
                _receipt(envelope, payload, result, ports, now, None),
            ]
        )
    return result


async def _evict_answers(ports: IndexerPorts, doc_key: str) -> None:
    """Best effort: the read service never serves an entry whose documents moved on (it
    checks their sequences on every hit), so Redis being down must not stop indexing."""
    if ports.cache is None:
        return
    try:
        await ports.cache.evict_document(doc_key)
    except TransientError as exc:
        log.warning("cache.evict_failed", doc_key=doc_key, error=str(exc))


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
        events.DOCUMENT_INDEXED, receipt, op=f"indexed:{payload.sequence}", time=now
    )
    return OutboxMessage(ports.topics.receipts, record)


def _title(frontmatter: dict[str, object] | object, chunks: Sequence[Chunk]) -> str | None:
    if isinstance(frontmatter, dict) and isinstance(frontmatter.get("title"), str):
        return str(frontmatter["title"])
    for chunk in chunks:
        if chunk.heading_path:
            return chunk.heading_path[0]
    return None


def _scalar_metadata(frontmatter: object) -> dict[str, str]:
    """Frontmatter fields kept as metadata (scalars only; ACL and dates are stamped apart)."""
    if not isinstance(frontmatter, dict):
        return {}
    skip = {"acl", "valid_from", "valid_to"}
    return {
        str(k): str(v)
        for k, v in frontmatter.items()
        if k not in skip and isinstance(v, str | int | float | bool)
    }


SOURCE_LEVEL_REASONS = frozenset({"source_deleted", "source_disabled"})


def _deletion_mode(manifest: SourceManifest, payload: DocumentDeleted) -> str:
    """A source that is deleted or disabled loses its content whatever its deletion_mode."""
    if payload.reason in SOURCE_LEVEL_REASONS:
        return DeletionMode.TOMBSTONE_AND_PURGE.value
    return manifest.deletion_mode.value
