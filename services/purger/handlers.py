"""Purger handlers: fan a tombstone out to every sink, read back, write a receipt."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from govindex.core import events, metrics
from govindex.core.envelope import (
    Envelope,
    encode,
    encode_document_event,
    parse_payload,
    validate_data,
)
from govindex.core.errors import InvalidEvent, PermanentError, TransientError
from govindex.core.events import (
    AccessRevoked,
    ArtifactInvalidated,
    DocumentDeleted,
    DocumentPurged,
    SinkResult,
)
from govindex.core.ports import (
    Deletion,
    DocumentKey,
    Invalidated,
    OutboxMessage,
    Purged,
    PurgeSink,
    PurgeStore,
    TaggedCache,
    TombstoneRow,
)
from govindex.core.records import DeletionMode
from govindex.core.settings import Consumers

log = structlog.get_logger(__name__)
CONSUMER = Consumers.PURGER


@dataclass(frozen=True)
class PurgerPorts:
    store: PurgeStore
    sinks: Sequence[PurgeSink]  # in order; see purger.sinks.purge_sinks
    receipts_topic: str
    cache: TaggedCache | None = None  # revocations evict from it
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


@dataclass(frozen=True)
class _Pending:
    """A deletion whose tombstone is recorded and not yet purged."""

    envelope: Envelope
    payload: DocumentDeleted
    tombstone: TombstoneRow


async def purge_document(envelope: Envelope, ports: PurgerPorts) -> DocumentPurged | None:
    """Remove a deleted document's content from every sink, verify, and write a receipt:
    the batch's purge (`purge_batch`) with a batch of one.

    The tombstones topic carries only deletions the indexer recorded: anything else, or
    one with no tombstone at its sequence, is an InvalidEvent. Idempotent.
    """
    payload = parse_payload(envelope)
    if not isinstance(payload, DocumentDeleted):
        raise InvalidEvent(f"the tombstones topic only carries deletions, got {envelope.type}")
    tombstone = await ports.store.tombstone(_key(payload), payload.sequence)
    if tombstone is None:
        raise InvalidEvent(
            f"no tombstone recorded for {payload.key} at sequence {payload.sequence}; "
            "tombstones reach the purger only through the indexer"
        )
    if tombstone.purge_state == "purged":
        log.info("purge.already_done", doc_key=payload.key, sequence=payload.sequence)
        return None
    [receipt] = await _purge([_Pending(envelope, payload, tombstone)], ports)
    return receipt


async def purge_batch(
    envelopes: Sequence[Envelope], ports: PurgerPorts
) -> list[DocumentPurged | PermanentError | None]:
    """The deletion lane's purge: every tombstone of the batch leaves every sink, with one
    OpenSearch sweep, one refresh and one read-back for the whole batch.

    A deletion with no tombstone at its sequence (stale: a newer event got there first) or
    one already purged returns None; one that is no deletion, its PermanentError.
    """
    results: list[DocumentPurged | PermanentError | None] = [None] * len(envelopes)
    work: list[tuple[int, _Pending]] = []
    for i, envelope in enumerate(envelopes):
        try:
            payload = parse_payload(envelope)
        except PermanentError as error:
            results[i] = error
            continue
        if not isinstance(payload, DocumentDeleted):
            results[i] = InvalidEvent(
                f"the deletion lane only applies deletions, got {envelope.type}"
            )
            continue
        tombstone = await ports.store.tombstone(_key(payload), payload.sequence)
        if tombstone is not None and tombstone.purge_state != "purged":
            work.append((i, _Pending(envelope, payload, tombstone)))
    if work:
        receipts = await _purge([pending for _, pending in work], ports)
        for (i, _), receipt in zip(work, receipts, strict=True):
            results[i] = receipt
    return results


async def _purge(batch: Sequence[_Pending], ports: PurgerPorts) -> list[DocumentPurged | None]:
    """The one fan-out: the batch goes through every sink in order, then each deletion's
    receipt is written. A sink whose read-back finds content left raises TransientError
    before the next sink runs (every failure is noted on the batch's tombstones and the
    batch is retried; everything here is idempotent), never a receipt."""
    started = time.monotonic()
    deletions = [_deletion(p.payload, p.tombstone) for p in batch]
    try:
        swept = [(sink.name, await _through(sink, deletions)) for sink in ports.sinks]
        receipts = []
        for n, pending in enumerate(batch):
            purged = [(name, by_deletion[n]) for name, by_deletion in swept]
            receipts.append(await _complete(pending, purged, ports, started))
    except TransientError as exc:
        for pending in batch:
            await ports.store.note_failure(pending.tombstone, str(exc))
        raise
    return receipts


async def _through(sink: PurgeSink, deletions: Sequence[Deletion]) -> list[Purged]:
    """One sink's purge of the batch, verified: content left behind is retried."""
    purged = await sink.purge(deletions)
    left = {d.doc_key: p.remaining for d, p in zip(deletions, purged, strict=True) if p.remaining}
    if left:
        metrics.PURGE_VERIFY_FAILURES.inc(len(left))
        raise TransientError(
            f"purge of {len(left)} documents left content behind in {sink.name} "
            f"(entries left: {left}); retrying"
        )
    return purged


def _deletion(payload: DocumentDeleted, tombstone: TombstoneRow) -> Deletion:
    return Deletion(
        key=_key(payload),
        sequence=payload.sequence,
        chunk_ids=tombstone.chunk_ids,
        keeps_history=tombstone.deletion_mode != DeletionMode.TOMBSTONE_AND_PURGE.value,
        reason=payload.reason,
    )


async def _complete(
    pending: _Pending,
    purged: Sequence[tuple[str, Purged]],
    ports: PurgerPorts,
    started: float,
) -> DocumentPurged | None:
    """The receipt, the purge marked done and the event claimed, in one transaction."""
    envelope, payload, tombstone = pending.envelope, pending.payload, pending.tombstone
    sinks = [
        SinkResult(
            sink=name, removed=p.removed, remaining=p.remaining, verified=True, detail=p.detail
        )
        for name, p in purged
    ]
    invalidated = [artifact for _, p in purged for artifact in p.invalidated]
    now = ports.clock()
    receipt = DocumentPurged(
        **payload.identity(),
        event_id=envelope.id,
        deletion_mode=tombstone.deletion_mode,
        sinks=sinks,
        deleted_at=payload.deleted_at,
        purged_at=now,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    record = encode_document_event(
        events.DOCUMENT_PURGED,
        receipt,
        op=f"purged:{payload.sequence}",
        time=now,
        cause=envelope.extensions,
    )
    done = await ports.store.complete(
        CONSUMER,
        envelope.id,
        tombstone,
        receipt.model_dump(mode="json"),
        [OutboxMessage(ports.receipts_topic, record)]
        + [
            _invalidation(payload, artifact, ports, now, envelope.extensions)
            for artifact in invalidated
        ],
    )
    if done:
        latency = (now - payload.deleted_at).total_seconds()
        metrics.PURGE_SECONDS.labels(tombstone.deletion_mode).observe(max(latency, 0.0))
        log.info(
            "purge.completed",
            doc_key=payload.key,
            sequence=payload.sequence,
            mode=tombstone.deletion_mode,
            sinks={s.sink: s.removed for s in sinks},
            duration_ms=receipt.duration_ms,
        )
    return receipt if done else None


def _invalidation(
    payload: DocumentDeleted,
    artifact: Invalidated,
    ports: PurgerPorts,
    now: datetime,
    cause: Mapping[str, Any],
) -> OutboxMessage:
    body = ArtifactInvalidated(
        tenant_id=payload.tenant_id,
        kind=artifact.kind,
        artifact_id=artifact.artifact_id,
        location=artifact.location,
        reason=f"built from {payload.key}, which was deleted",
        caused_by=payload.key,
        invalidated_at=now,
    )
    record = encode(
        event_type=events.ARTIFACT_INVALIDATED,
        event_id=events.event_id(
            payload.tenant_id,
            artifact.kind,
            artifact.artifact_id,
            payload.key,
            f"invalidated:{payload.sequence}",
        ),
        tenant_id=payload.tenant_id,
        source_id=payload.source_id,
        subject=f"{artifact.kind}/{artifact.artifact_id}",
        key=payload.key,
        payload=body,
        time=now,
        cause=cause,
    )
    return OutboxMessage(ports.receipts_topic, record)


def _key(payload: DocumentDeleted) -> DocumentKey:
    return DocumentKey(payload.tenant_id, payload.source_id, payload.doc_id)


async def on_tombstones_record(envelope: Envelope, ports: PurgerPorts) -> object:
    """The tombstones topic carries deletions and access revocations."""
    if envelope.type == events.ACCESS_REVOKED:
        return await revoke_access(envelope, ports)
    return await purge_document(envelope, ports)


async def revoke_access(envelope: Envelope, ports: PurgerPorts) -> int:
    """Evict cache entries built from the document for principals who lost access.

    The index was already re-stamped by the indexer in the same transaction that emitted
    this event; eviction is idempotent, so a redelivery is harmless.
    """
    revoked = validate_data(AccessRevoked, envelope)
    evicted = 0
    if ports.cache is not None:
        evicted = await ports.cache.evict_for(revoked.key, revoked.principals)
    await ports.store.mark_processed(CONSUMER, envelope.id)  # settles its emission
    log.info(
        "access.revoked",
        doc_key=revoked.key,
        principals=revoked.principals,
        cache_entries_evicted=evicted,
    )
    return evicted
