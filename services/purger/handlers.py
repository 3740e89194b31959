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
    DocumentKey,
    Invalidated,
    Lineage,
    OutboxMessage,
    PurgeIndex,
    PurgeStore,
    PurgeTarget,
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
    index: PurgeIndex
    receipts_topic: str
    lineage: Lineage
    cache: TaggedCache | None = None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


async def purge_document(envelope: Envelope, ports: PurgerPorts) -> DocumentPurged | None:
    """Remove a deleted document's content from every sink, verify, and write a receipt.

    Postgres first (it is the gate: nothing without a row there can be re-projected), then
    every OpenSearch generation. A sink that still holds content after its purge raises
    TransientError so the purge is retried; it is never reported as done. Idempotent.
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
    started = time.monotonic()
    try:
        sinks = await _purge_sinks(payload, tombstone, ports)
        copies, invalidated = await _purge_copies(payload, tombstone, ports)
        sinks += copies
    except TransientError as exc:
        await ports.store.note_failure(tombstone, str(exc))
        raise
    return await _complete(envelope, payload, tombstone, sinks, invalidated, ports, started)


async def purge_batch(
    envelopes: Sequence[Envelope], ports: PurgerPorts
) -> list[DocumentPurged | PermanentError | None]:
    """The deletion lane's purge: every tombstone of the batch leaves every sink, with one
    OpenSearch sweep, one refresh and one read-back for the whole batch.

    A deletion with no tombstone at its sequence (stale: a newer event got there first) or
    one already purged returns None. Any sink left holding content raises TransientError
    (the batch is retried; everything here is idempotent), never a receipt.
    """
    results: list[DocumentPurged | PermanentError | None] = [None] * len(envelopes)
    work: list[tuple[int, Envelope, DocumentDeleted, TombstoneRow]] = []
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
            work.append((i, envelope, payload, tombstone))
    if not work:
        return results
    started = time.monotonic()
    purging = [w for w in work if w[3].deletion_mode == DeletionMode.TOMBSTONE_AND_PURGE.value]
    try:
        in_postgres: dict[int, tuple[int, int, int]] = {}
        for i, _, payload, _ in purging:
            chunks, versions = await ports.store.purge_content(_key(payload), payload.sequence)
            left = await ports.store.content_remaining(_key(payload), payload.sequence)
            in_postgres[i] = (chunks, versions, left)
        targets = [
            PurgeTarget(p.tenant_id, p.source_id, p.doc_id, p.sequence, t.chunk_ids)
            for _, _, p, t in purging
        ]
        async with ports.index.first():  # ahead of the documents lanes' bulks
            removed = await ports.index.delete_documents(targets)
            remaining = await ports.index.count_documents(targets)
            if any(remaining):  # ids the tombstone did not know: sweep by query, read again
                await ports.index.sweep_documents(targets)
                remaining = await ports.index.count_documents(targets)
        in_index = {w[0]: (r, left) for w, r, left in zip(purging, removed, remaining, strict=True)}
        stuck = {i: (in_postgres[i][2], in_index[i][1]) for i in in_postgres}
        stuck = {i: left for i, left in stuck.items() if any(left)}
        if stuck:
            metrics.PURGE_VERIFY_FAILURES.inc(len(stuck))
            raise TransientError(
                f"purge of {len(stuck)} documents left content behind (postgres rows, "
                f"opensearch chunks: {sorted(stuck.values())}); retrying"
            )
        for i, envelope, payload, tombstone in work:
            if i in in_postgres:
                chunks, versions, _ = in_postgres[i]
                sinks = _purged(chunks, versions, in_index[i][0])
            else:
                sinks = _history_kept()
            copies, invalidated = await _purge_copies(payload, tombstone, ports)
            results[i] = await _complete(
                envelope, payload, tombstone, sinks + copies, invalidated, ports, started
            )
    except TransientError as exc:
        for _, _, _, tombstone in work:
            await ports.store.note_failure(tombstone, str(exc))
        raise
    return results


async def _complete(
    envelope: Envelope,
    payload: DocumentDeleted,
    tombstone: TombstoneRow,
    sinks: list[SinkResult],
    invalidated: list[Invalidated],
    ports: PurgerPorts,
    started: float,
) -> DocumentPurged | None:
    """The receipt, the purge marked done and the event claimed, in one transaction."""
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


def _purged(chunks: int, versions: int, index_entries: int) -> list[SinkResult]:
    return [
        SinkResult(
            sink="postgres",
            removed=chunks + versions,
            remaining=0,
            verified=True,
            detail=f"{chunks} chunks deleted, {versions} versions emptied",
        ),
        SinkResult(sink="opensearch", removed=index_entries, remaining=0, verified=True),
    ]


def _history_kept() -> list[SinkResult]:
    """deletion_mode tombstone: history before the deletion stays queryable for as_of."""
    return [
        SinkResult(
            sink="postgres",
            removed=0,
            remaining=0,
            verified=True,
            detail="deletion_mode tombstone: history kept, document no longer current",
        ),
        SinkResult(
            sink="opensearch",
            removed=0,
            remaining=0,
            verified=True,
            detail="deletion_mode tombstone: validity ended at deleted_at",
        ),
    ]


async def _purge_sinks(
    payload: DocumentDeleted, tombstone: TombstoneRow, ports: PurgerPorts
) -> list[SinkResult]:
    key, seq = _key(payload), payload.sequence
    if tombstone.deletion_mode != DeletionMode.TOMBSTONE_AND_PURGE.value:
        return _history_kept()
    chunks_removed, versions_emptied = await ports.store.purge_content(key, seq)
    pg_left = await ports.store.content_remaining(key, seq)
    ids = (key.tenant_id, key.source_id, key.doc_id)
    async with ports.index.first():
        os_removed = await ports.index.delete_document(*ids, seq, tombstone.chunk_ids)
        os_left = await ports.index.count_document(*ids, seq)
    if pg_left or os_left:
        metrics.PURGE_VERIFY_FAILURES.inc()
        raise TransientError(
            f"purge of {payload.key} left content behind (postgres rows: {pg_left}, "
            f"opensearch chunks: {os_left}); retrying"
        )
    return _purged(chunks_removed, versions_emptied, os_removed)


async def _purge_copies(
    payload: DocumentDeleted, tombstone: TombstoneRow, ports: PurgerPorts
) -> tuple[list[SinkResult], list[Invalidated]]:
    """Caches and stored summaries built from the document: evicted and invalidated in both
    deletion modes (what they hold was current content, and it no longer is)."""
    key, chunks = payload.key, tombstone.chunk_ids
    results = []
    if ports.cache is None:
        results.append(
            SinkResult(
                sink="redis", removed=0, remaining=0, verified=True, detail="no cache configured"
            )
        )
    else:
        evicted = await ports.cache.evict_document(key, chunks)
        left = await ports.cache.count_document(key, chunks)
        if left:
            raise TransientError(f"{left} cache entries of {key} survived eviction; retrying")
        results.append(SinkResult(sink="redis", removed=evicted, remaining=0, verified=True))
    reason = f"{key} deleted ({payload.reason}) at sequence {payload.sequence}"
    invalidated = await ports.lineage.invalidate(payload.tenant_id, key, chunks, reason)
    left = await ports.lineage.remaining(payload.tenant_id, key, chunks)
    if left:
        raise TransientError(f"{left} stored summaries of {key} still hold text; retrying")
    results.append(
        SinkResult(
            sink="summaries",
            removed=len(invalidated),
            remaining=0,
            verified=True,
            detail="text removed, status and reason kept",
        )
    )
    return results, invalidated


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
