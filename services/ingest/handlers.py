"""Ingest handlers: sync a snapshot (emit what differs from what was last emitted for it),
backfill documents, emit operator deletions.

Emission is durable before it is acknowledged: a batch's sequences, its events (in the
outbox) and the fingerprints recorded for it commit in one Postgres transaction, and the
outbox relay publishes them. Content travels by reference only: each event names a
content-addressed blob in Postgres, so a purge that removes the blob leaves nothing of the
document readable on any topic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import structlog

from govindex.core import events, formats
from govindex.core.envelope import encode_document_event
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.ports import ConnectorState, OutboxMessage
from govindex.core.records import SourceManifest
from govindex.core.retry import retry_transient
from govindex.core.settings import Consumers, Topics
from ingest.sources import GitSnapshot, Skipped, SourceFile, decode_text

log = structlog.get_logger(__name__)

INDEXER = Consumers.INDEXER  # the consumer every document event waits for
# Documents per connector transaction: a crash loses no committed batch, and a large
# snapshot never holds one long transaction or all its contents in memory at once.
BATCH = 256


class Snapshot(Protocol):
    def files(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        among: Collection[str] | None = None,
    ) -> list[SourceFile]: ...

    def read(self, files: Sequence[SourceFile]) -> Iterator[tuple[SourceFile, bytes]]: ...


@dataclass
class IngestReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[Skipped] = field(default_factory=list)


Versions = Callable[[Sequence[SourceFile]], dict[str, tuple[str, datetime]]]


@dataclass(frozen=True)
class IngestContext:
    """`versions` gives each changed file's (source_version, observed_at); `observed_at` and
    `deletion_version` stamp deletions (the snapshot's own time and version)."""

    manifest: SourceManifest
    topics: Topics
    versions: Versions
    observed_at: datetime
    deletion_version: str
    include: Sequence[str]
    exclude: Sequence[str]


@dataclass(frozen=True)
class SourceView:
    """A source as read now: its files, how to stamp them, and the checkpoint to record
    once it is synced (None: a read that is not the source's own position to remember)."""

    snapshot: Snapshot
    ctx: IngestContext
    checkpoint: str | None


async def sync_snapshot(
    view: SourceView,
    *,
    state: ConnectorState,
    progress: Callable[[int, int], None] | None = None,
) -> IngestReport:
    """Emit created / updated / deleted for what differs between the snapshot and what was
    last emitted for the source (the state's fingerprints), then record the view's checkpoint.

    Comparing whole states (not trusting a diff) makes a first run, a re-run after a crash,
    a force push and a missed change all converge to the snapshot. Each batch commits its
    events and its fingerprints together: what is recorded as emitted is in the outbox.
    Idempotent: a second sync of the same snapshot emits nothing.
    """
    snapshot, ctx = view.snapshot, view.ctx
    tenant, source = ctx.manifest.tenant, ctx.manifest.source_id
    present = {f.doc_id: f for f in snapshot.files(ctx.include, ctx.exclude)}
    known = await state.known(tenant, source)
    report = IngestReport()
    changed = [f for doc_id, f in sorted(present.items()) if known.get(doc_id) != f.fingerprint]
    gone = sorted(set(known) - set(present))
    report.unchanged = len(present) - len(changed)
    texts = _decode(snapshot, changed, report)
    versions = ctx.versions([f for f, _ in texts])
    work: list[tuple[str, tuple[SourceFile, str] | None]] = [
        (file.doc_id, (file, text)) for file, text in texts
    ] + [(doc_id, None) for doc_id in gone]
    for start in range(0, len(work), BATCH):
        batch = work[start : start + BATCH]

        async def commit(batch: list[tuple[str, tuple[SourceFile, str] | None]] = batch) -> None:
            async with state.transaction() as tx:
                sequences = await tx.reserve_sequences(tenant, source, [d for d, _ in batch])
                messages: list[OutboxMessage] = []
                blobs: list[tuple[str, str]] = []
                seen: dict[str, str | None] = {}
                for doc_id, item in batch:
                    if item is None:
                        messages.append(_deletion(ctx, doc_id, sequences[doc_id]))
                        seen[doc_id] = None
                        continue
                    file, text = item
                    version = versions.get(doc_id, (ctx.deletion_version, ctx.observed_at))
                    messages.append(
                        _change(ctx, file, text, sequences[doc_id], version, known.get(doc_id))
                    )
                    blobs.append((sha256_hex(text), text))
                    seen[doc_id] = file.fingerprint
                await tx.put_blobs(blobs)
                await tx.emit(messages)
                await tx.record(tenant, source, seen)

        # A transaction that lost a race (a deadlock victim, say) rolled back whole: run again.
        await retry_transient(commit, what="ingest batch")
        for doc_id, item in batch:
            if item is None:
                report.deleted.append(doc_id)
            else:
                (report.updated if doc_id in known else report.created).append(doc_id)
        if progress:
            progress(start + len(batch), len(work))
    if view.checkpoint is not None:
        await state.set_checkpoint(tenant, source, view.checkpoint)
    await state.synced(tenant, source)  # the whole snapshot is in: fresh as of now
    return report


async def backfill_documents(
    manifest: SourceManifest,
    doc_ids: Sequence[str],
    read: Callable[[], Awaitable[SourceView]],
    *,
    state: ConnectorState,
    op: str,
) -> IngestReport:
    """Emit the current content of these documents again (a deletion for one the source no
    longer has), whatever was emitted before: a backfill's step.

    Each document's sequence is reserved, and committed, before the source is read: an
    update emitted before the reservation was read from an older source, and the backfill
    reads a source at least as new; one emitted after it has a higher sequence and wins.
    So a backfill racing live updates never overwrites newer content with older. `op` makes
    the event ids the step's own, and the same again when a resumed job repeats the step,
    so the indexer takes a repeat as a duplicate.
    """
    if not doc_ids:
        return IngestReport()
    tenant, source = manifest.tenant, manifest.source_id

    async def reserve() -> dict[str, int]:
        async with state.transaction() as tx:
            return await tx.reserve_sequences(tenant, source, list(doc_ids))

    sequences = await retry_transient(reserve, what="backfill reserve")
    view = await read()  # read after reserving: at least as new as any earlier emit
    snapshot, ctx = view.snapshot, view.ctx
    present = {f.doc_id: f for f in snapshot.files(ctx.include, ctx.exclude, among=set(doc_ids))}
    known = await state.known(tenant, source)
    report = IngestReport()
    texts = _decode(snapshot, [present[d] for d in doc_ids if d in present], report)
    versions = ctx.versions([f for f, _ in texts])
    messages: list[OutboxMessage] = []
    blobs: list[tuple[str, str]] = []
    seen: dict[str, str | None] = {}
    for file, text in texts:
        version = versions.get(file.doc_id, (ctx.deletion_version, ctx.observed_at))
        prior = known.get(file.doc_id)
        messages.append(_change(ctx, file, text, sequences[file.doc_id], version, prior, op))
        blobs.append((sha256_hex(text), text))
        (report.created if prior is None else report.updated).append(file.doc_id)
        seen[file.doc_id] = file.fingerprint
    for doc_id in doc_ids:
        if doc_id not in present:
            messages.append(_deletion(ctx, doc_id, sequences[doc_id], op))
            report.deleted.append(doc_id)
            seen[doc_id] = None

    async def commit() -> None:
        async with state.transaction() as tx:
            await tx.put_blobs(blobs)
            await tx.emit(messages)
            # Only where no event was emitted since: a live sync that reserved after this step
            # read its source before this step did, perhaps, but its event wins in the index,
            # so its fingerprint is the one the next sync must compare with.
            await tx.record(tenant, source, seen, at=sequences)

    await retry_transient(commit, what="backfill step")
    return report


def _decode(
    snapshot: Snapshot, changed: Sequence[SourceFile], report: IngestReport
) -> list[tuple[SourceFile, str]]:
    """The changed files' text; binary, non-UTF-8 and oversized files are skipped, said why."""
    texts: list[tuple[SourceFile, str]] = []
    for file, data in snapshot.read(changed):
        text = decode_text(data, file.doc_id)
        if isinstance(text, Skipped):
            report.skipped.append(text)
            log.warning("ingest.skipped", doc_id=file.doc_id, reason=text.reason)
            continue
        texts.append((file, text))
    return texts


def _change(
    ctx: IngestContext,
    file: SourceFile,
    text: str,
    sequence: int,
    version: tuple[str, datetime],
    prior: str | None,
    op_key: str | None = None,
) -> OutboxMessage:
    """A create or update; its content goes in as a blob in the same transaction."""
    content_hash = sha256_hex(text)
    source_version, observed_at = version
    payload = DocumentChanged(
        tenant_id=ctx.manifest.tenant,
        source_id=ctx.manifest.source_id,
        doc_id=file.doc_id,
        source_version=source_version,
        sequence=sequence,
        observed_at=observed_at,
        content_hash=content_hash,
        content_ref=content_hash,
        media_type=formats.media_type(file.doc_id),
        content_encoding="base64" if formats.is_binary(file.doc_id) else "utf-8",
        path=file.doc_id,
    )
    op = "created" if prior is None else "updated"
    event_type = events.DOCUMENT_CREATED if prior is None else events.DOCUMENT_UPDATED
    # The previous fingerprint is part of the identity so A -> B -> A is three changes.
    return document_message(ctx.topics, event_type, payload, op_key or f"{op}:{prior or ''}")


def _deletion(
    ctx: IngestContext, doc_id: str, sequence: int, op_key: str | None = None
) -> OutboxMessage:
    payload = DocumentDeleted(
        tenant_id=ctx.manifest.tenant,
        source_id=ctx.manifest.source_id,
        doc_id=doc_id,
        source_version=ctx.deletion_version,
        sequence=sequence,
        deleted_at=ctx.observed_at,
    )
    return document_message(ctx.topics, events.DOCUMENT_DELETED, payload, op_key or "deleted")


def document_message(
    topics: Topics, event_type: str, payload: DocumentChanged | DocumentDeleted, op: str
) -> OutboxMessage:
    """A document event for the outbox, pending until the indexer applied it.

    Deletions go to their own topic, whose lane never waits behind queued updates; the
    sequence guard orders the two lanes (an update overtaken by its delete is stale).
    """
    deletion = isinstance(payload, DocumentDeleted)
    when = payload.deleted_at if isinstance(payload, DocumentDeleted) else payload.observed_at
    return OutboxMessage(
        topics.deletions if deletion else topics.documents,
        encode_document_event(event_type, payload, op=op, time=when),
        awaits=INDEXER,
        tenant_id=payload.tenant_id,
        source_id=payload.source_id,
        content_hash=payload.content_ref if isinstance(payload, DocumentChanged) else None,
        sequence=payload.sequence,
    )


def git_versions(snapshot: GitSnapshot) -> Versions:
    """source_version = git:<sha> of the commit that last changed the file; observed_at = its
    commit time."""

    def versions(files: Sequence[SourceFile]) -> dict[str, tuple[str, datetime]]:
        changes = snapshot.last_changes([f.doc_id for f in files])
        return {path: (f"git:{sha}", when) for path, (sha, when) in changes.items()}

    return versions


def fingerprint_versions(observed_at: datetime) -> Versions:
    """A folder: the version is the content hash, observed when the folder was read."""

    def versions(files: Sequence[SourceFile]) -> dict[str, tuple[str, datetime]]:
        return {f.doc_id: (f.fingerprint, observed_at) for f in files}

    return versions


def _operator_deletion(
    manifest: SourceManifest, doc_id: str, sequence: int, deleted_at: datetime, reason: str
) -> DocumentDeleted:
    return DocumentDeleted(
        tenant_id=manifest.tenant,
        source_id=manifest.source_id,
        doc_id=doc_id,
        source_version=f"operator:{deleted_at.astimezone(UTC):%Y%m%dT%H%M%S.%fZ}",
        sequence=sequence,
        deleted_at=deleted_at,
        reason=reason,
    )


async def delete_document(
    manifest: SourceManifest,
    doc_id: str,
    *,
    topics: Topics,
    state: ConnectorState,
    deleted_at: datetime,
    reason: str,
    applied: int | None = None,
) -> tuple[int, str]:
    """Emit a tombstone for one document at its next sequence; return that sequence and
    the event's id. `applied`: the last sequence the index applied to it; the tombstone
    goes above it, or it would be stale (a document indexed by events the connector never
    emitted)."""
    tenant, source = manifest.tenant, manifest.source_id
    async with state.transaction() as tx:
        if applied is not None:
            await tx.raise_sequences(tenant, source, {doc_id: applied})
        sequence = (await tx.reserve_sequences(tenant, source, [doc_id]))[doc_id]
        payload = _operator_deletion(manifest, doc_id, sequence, deleted_at, reason)
        message = document_message(topics, events.DOCUMENT_DELETED, payload, "deleted")
        await tx.emit([message])
        await tx.record(tenant, source, {doc_id: None})
    assert message.event_id is not None  # every document event carries its CloudEvents id
    return sequence, message.event_id


async def delete_source(
    manifest: SourceManifest,
    *,
    held: dict[str, int],
    topics: Topics,
    state: ConnectorState,
    deleted_at: datetime,
    reason: str,
) -> list[str]:
    """Emit a deletion for every document of the source the index holds (`held`: doc id →
    last applied sequence), each above what the index applied, so none is stale."""
    tenant, source = manifest.tenant, manifest.source_id
    doc_ids = sorted(held)
    for start in range(0, len(doc_ids), BATCH):
        batch = doc_ids[start : start + BATCH]
        async with state.transaction() as tx:
            await tx.raise_sequences(tenant, source, {d: held[d] for d in batch})
            sequences = await tx.reserve_sequences(tenant, source, batch)
            await tx.emit(
                [
                    document_message(
                        topics,
                        events.DOCUMENT_DELETED,
                        _operator_deletion(manifest, d, sequences[d], deleted_at, reason),
                        reason,
                    )
                    for d in batch
                ]
            )
            await tx.record(tenant, source, dict.fromkeys(batch))
    return doc_ids
