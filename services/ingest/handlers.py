"""Ingest handlers: diff a snapshot against what was last emitted, emit the difference."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import structlog

from govindex.core import events
from govindex.core.envelope import KafkaRecord, encode_document_event
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.ports import BlobStore, EventPublisher, IngestState
from govindex.core.records import SourceManifest
from govindex.core.settings import Topics
from ingest.sources import GitSnapshot, Skipped, SourceFile, decode_text

log = structlog.get_logger(__name__)


class Snapshot(Protocol):
    def files(self, include: Sequence[str], exclude: Sequence[str]) -> list[SourceFile]: ...

    def read(self, files: Sequence[SourceFile]) -> Iterator[tuple[SourceFile, bytes]]: ...


# Events are sent in batches of this many and acknowledged together: a push of thousands
# of files neither holds the event loop nor keeps every event's content in memory at once.
PUBLISH_BATCH = 256


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
    inline_limit: int
    include: Sequence[str]
    exclude: Sequence[str]


async def ingest_snapshot(
    snapshot: Snapshot,
    ctx: IngestContext,
    *,
    state: IngestState,
    publisher: EventPublisher,
    blobs: BlobStore,
    progress: Callable[[int, int], None] | None = None,
) -> IngestReport:
    """Emit created / updated / deleted for what differs from the last emitted state.

    Comparing whole states (not trusting a diff) makes a first run, a re-run after a crash,
    a force push and a missed change all converge to the snapshot. Fingerprints are recorded
    only after the broker acknowledged the events, so a crash re-emits rather than loses.
    """
    tenant, source = ctx.manifest.tenant, ctx.manifest.source_id
    present = {f.doc_id: f for f in snapshot.files(ctx.include, ctx.exclude)}
    known = await state.known(tenant, source)
    report = IngestReport()
    changed = [f for doc_id, f in sorted(present.items()) if known.get(doc_id) != f.fingerprint]
    gone = sorted(set(known) - set(present))
    report.unchanged = len(present) - len(changed)
    texts = _decode(snapshot, changed, report)
    sequences = await state.reserve_sequences(tenant, source, [f.doc_id for f, _ in texts] + gone)
    versions = ctx.versions([f for f, _ in texts])
    emitter = _Emitter(publisher, ctx.topics.documents, len(texts) + len(gone), progress)
    seen: dict[str, str | None] = {}
    for file, text in texts:
        op = "updated" if file.doc_id in known else "created"
        version = versions.get(file.doc_id, (ctx.deletion_version, ctx.observed_at))
        payload = await _changed(ctx, file, text, sequences[file.doc_id], version, blobs)
        event_type = events.DOCUMENT_UPDATED if op == "updated" else events.DOCUMENT_CREATED
        # The previous fingerprint is part of the identity so A -> B -> A is three changes.
        await emitter.emit(_record(event_type, payload, f"{op}:{known.get(file.doc_id, '')}"))
        (report.updated if op == "updated" else report.created).append(file.doc_id)
        seen[file.doc_id] = file.fingerprint
    for doc_id in gone:
        deleted = DocumentDeleted(
            tenant_id=tenant,
            source_id=source,
            doc_id=doc_id,
            source_version=ctx.deletion_version,
            sequence=sequences[doc_id],
            deleted_at=ctx.observed_at,
        )
        await emitter.emit(_record(events.DOCUMENT_DELETED, deleted, "deleted"))
        report.deleted.append(doc_id)
        seen[doc_id] = None
    await state.record(tenant, source, seen)
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


async def _changed(
    ctx: IngestContext,
    file: SourceFile,
    text: str,
    sequence: int,
    version: tuple[str, datetime],
    blobs: BlobStore,
) -> DocumentChanged:
    """The payload of a create/update; content over the inline limit goes by claim check."""
    content_hash = sha256_hex(text)
    inline = len(text.encode()) <= ctx.inline_limit
    if not inline:
        await blobs.put_blob(content_hash, text)
    source_version, observed_at = version
    return DocumentChanged(
        tenant_id=ctx.manifest.tenant,
        source_id=ctx.manifest.source_id,
        doc_id=file.doc_id,
        source_version=source_version,
        sequence=sequence,
        observed_at=observed_at,
        content_hash=content_hash,
        content=text if inline else None,
        content_ref=None if inline else content_hash,
        media_type="text/markdown" if file.doc_id.endswith((".md", ".markdown")) else "text/plain",
        path=file.doc_id,
    )


class _Emitter:
    """Sends records in batches of PUBLISH_BATCH, waiting for the broker on each batch."""

    def __init__(
        self,
        publisher: EventPublisher,
        topic: str,
        total: int,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self._publisher, self._topic, self._total = publisher, topic, total
        self._progress = progress
        self._batch: list[KafkaRecord] = []
        self._done = 0

    async def emit(self, record: KafkaRecord) -> None:
        self._batch.append(record)
        self._done += 1
        if len(self._batch) >= PUBLISH_BATCH or self._done == self._total:
            await self._publisher.publish_many(self._topic, self._batch)
            self._batch = []
        if self._progress:
            self._progress(self._done, self._total)


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


def _record(
    event_type: str, payload: DocumentChanged | DocumentDeleted, change: str
) -> KafkaRecord:
    when = payload.observed_at if isinstance(payload, DocumentChanged) else payload.deleted_at
    return encode_document_event(event_type, payload, op=change, time=when)


async def delete_document(
    manifest: SourceManifest,
    doc_id: str,
    *,
    topics: Topics,
    state: IngestState,
    publisher: EventPublisher,
    deleted_at: datetime,
    reason: str,
) -> int:
    """Emit a tombstone for one document at its next sequence; return that sequence."""
    tenant, source = manifest.tenant, manifest.source_id
    sequence = (await state.reserve_sequences(tenant, source, [doc_id]))[doc_id]
    payload = DocumentDeleted(
        tenant_id=tenant,
        source_id=source,
        doc_id=doc_id,
        source_version=f"operator:{deleted_at.astimezone(UTC):%Y%m%dT%H%M%S.%fZ}",
        sequence=sequence,
        deleted_at=deleted_at,
        reason=reason,
    )
    await publisher.publish(topics.documents, _record(events.DOCUMENT_DELETED, payload, "deleted"))
    await state.record(tenant, source, {doc_id: None})
    return sequence


async def delete_source(
    manifest: SourceManifest,
    *,
    held: dict[str, int],
    topics: Topics,
    state: IngestState,
    publisher: EventPublisher,
    deleted_at: datetime,
    reason: str,
) -> list[str]:
    """Emit a deletion for every document of the source the index holds (`held`: doc id →
    last applied sequence), each above what the index applied, so none is stale."""
    tenant, source = manifest.tenant, manifest.source_id
    doc_ids = sorted(held)
    await state.raise_sequences(tenant, source, held)
    sequences = await state.reserve_sequences(tenant, source, doc_ids)
    records = []
    for doc_id in doc_ids:
        payload = DocumentDeleted(
            tenant_id=tenant,
            source_id=source,
            doc_id=doc_id,
            source_version=f"operator:{deleted_at.astimezone(UTC):%Y%m%dT%H%M%S.%fZ}",
            sequence=sequences[doc_id],
            deleted_at=deleted_at,
            reason=reason,
        )
        records.append(_record(events.DOCUMENT_DELETED, payload, reason))
    for start in range(0, len(records), PUBLISH_BATCH):
        await publisher.publish_many(topics.documents, records[start : start + PUBLISH_BATCH])
    await state.record(tenant, source, dict.fromkeys(doc_ids))
    return doc_ids
