"""Indexer handlers: plain async verbs over ports (DESIGN §2, §5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import structlog
from pydantic import ValidationError

from govindex.adapters.postgres.store import (
    ApplyResult,
    GraphEdge,
    OutboxMessage,
    TombstonePlan,
    VersionPlan,
)
from govindex.core import events
from govindex.core.envelope import Envelope, encode_document_event
from govindex.core.errors import ContentUnavailable, InvalidEvent, SourceDisabled, UnknownSource
from govindex.core.events import AccessRevoked, DocumentChanged, DocumentDeleted, DocumentIndexed
from govindex.core.hashing import sha256_hex
from govindex.core.records import Chunk, DeletionMode, SourceManifest
from govindex.core.settings import Topics
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


class SourceRegistry(Protocol):
    async def get(self, tenant_id: str, source_id: str) -> SourceManifest | None: ...


class ChunkStore(Protocol):
    async def apply_version(
        self, plan: VersionPlan, announce: Callable[[ApplyResult], Sequence[OutboxMessage]]
    ) -> ApplyResult: ...

    async def record_tombstone(
        self, plan: TombstonePlan, announce: Callable[[ApplyResult], Sequence[OutboxMessage]]
    ) -> ApplyResult: ...

    async def chunks_changed_by(
        self, tenant_id: str, source_id: str, doc_id: str, sequence: int
    ) -> list[Chunk]: ...

    async def blob(self, content_hash: str) -> str | None: ...


class SearchIndex(Protocol):
    async def upsert(self, chunks: Sequence[Chunk], *, index: str | None = None) -> int: ...


@dataclass(frozen=True)
class IndexerPorts:
    registry: SourceRegistry
    store: ChunkStore
    index: SearchIndex
    topics: Topics
    generation: int
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


def parse_payload(envelope: Envelope) -> DocumentChanged | DocumentDeleted:
    """Validate the event type and payload; InvalidEvent says exactly what is wrong."""
    if envelope.type not in events.DOCUMENT_EVENT_TYPES:
        raise InvalidEvent(
            f"unknown event type {envelope.type!r}; expected one of "
            f"{', '.join(sorted(events.DOCUMENT_EVENT_TYPES))}"
        )
    model: type[DocumentChanged] | type[DocumentDeleted] = (
        DocumentDeleted if envelope.type == events.DOCUMENT_DELETED else DocumentChanged
    )
    try:
        payload = model.model_validate(envelope.data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'data'}: {err['msg']}"
            for err in exc.errors()
        )
        raise InvalidEvent(f"{envelope.type} payload is invalid: {problems}") from exc
    tenant = envelope.extensions.get("tenantid")
    if tenant is not None and str(tenant) != payload.tenant_id:
        raise InvalidEvent(
            f"tenantid extension {tenant!r} does not match payload tenant_id {payload.tenant_id!r}"
        )
    sequence = envelope.extensions.get("sequence")
    if sequence is not None and str(sequence) != str(payload.sequence):
        raise InvalidEvent(
            f"sequence extension {sequence!r} does not match payload sequence {payload.sequence}"
        )
    return payload


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
        changed = await ports.store.chunks_changed_by(
            payload.tenant_id, payload.source_id, payload.doc_id, payload.sequence
        )
        await ports.index.upsert(changed)
    log.info(
        "document.applied",
        doc_key=payload.key,
        sequence=payload.sequence,
        outcome=result.outcome,
        chunks=result.chunk_count,
    )
    return result


async def _apply_change(
    envelope: Envelope,
    payload: DocumentChanged,
    manifest: SourceManifest,
    ports: IndexerPorts,
    now: datetime,
) -> ApplyResult:
    content = payload.content
    if content is None:
        assert payload.content_ref is not None
        content = await ports.store.blob(payload.content_ref)
        if content is None:
            raise ContentUnavailable(
                f"claim-check blob {payload.content_ref} is not in Postgres; the producer must "
                "store the blob before emitting the event"
            )
    if sha256_hex(content) != payload.content_hash:
        raise InvalidEvent(
            f"content does not match content_hash {payload.content_hash}; the event was "
            "altered or built wrongly"
        )
    parser = parser_for(manifest.parser, payload.path or payload.doc_id)
    parsed = parser.parse(content)
    access = resolve_access(manifest, payload, parsed.frontmatter)
    valid_from, valid_to = resolve_validity(manifest, payload, parsed.frontmatter)
    ctx = StampContext(
        manifest=manifest,
        event=payload,
        access=access,
        valid_from=valid_from,
        valid_to=valid_to,
        recorded_at=now,
        parser=parser.name,
        parser_version=parser.version,
        index_generation=ports.generation,
    )
    chunks = stamp_chunks(ctx, parsed.chunks)
    title = payload.title or _title(parsed.frontmatter, chunks)
    plan = VersionPlan(
        consumer=CONSUMER,
        event_id=envelope.id,
        **payload.identity(),
        content_hash=payload.content_hash,
        content=content,
        media_type=payload.media_type,
        title=title,
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

    def announce(result: ApplyResult) -> list[OutboxMessage]:
        messages = [_receipt(envelope, payload, result, ports, now, payload.content_hash)]
        if result.revoked:  # the purger evicts what was built for them
            revoked = AccessRevoked(
                **payload.identity(), principals=list(result.revoked), revoked_at=now
            )
            messages.append(
                OutboxMessage(
                    ports.topics.tombstones,
                    encode_document_event(
                        events.ACCESS_REVOKED, revoked, op=f"revoked:{payload.sequence}", time=now
                    ),
                )
            )
        return messages

    return await ports.store.apply_version(plan, announce)


async def _record_deletion(
    envelope: Envelope,
    payload: DocumentDeleted,
    manifest: SourceManifest,
    ports: IndexerPorts,
    now: datetime,
) -> ApplyResult:
    plan = TombstonePlan(
        consumer=CONSUMER,
        event_id=envelope.id,
        **payload.identity(),
        reason=payload.reason,
        deletion_mode=_deletion_mode(manifest, payload),
        deleted_at=payload.deleted_at,
        recorded_at=now,
    )

    def announce(result: ApplyResult) -> list[OutboxMessage]:
        forward = encode_document_event(
            events.DOCUMENT_DELETED,
            payload,
            op="deleted",
            time=now,
            event_id=envelope.id,
            extensions={"deletionmode": plan.deletion_mode},
        )
        return [
            OutboxMessage(ports.topics.tombstones, forward),
            _receipt(envelope, payload, result, ports, now, None),
        ]

    return await ports.store.record_tombstone(plan, announce)


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
