"""Anti-entropy: compare a source with what the index holds, and emit the difference.

`sync` emits what differs from what the connector last emitted (its own memory); `reconcile`
compares with what the *index* holds, so a lost, dead-lettered or never-acknowledged event
is repaired, and a document deleted in the source never stays searchable.
"""

from __future__ import annotations

from dataclasses import dataclass

from govindex.core.hashing import sha256_hex
from govindex.core.ports import ConnectorState, Emitter, SourceCatalog
from ingest.handlers import IngestContext, IngestReport, Snapshot, ingest_snapshot
from ingest.sources import decode_text


@dataclass(frozen=True)
class SourceView:
    """A source as read now: its files, how to stamp them, and the position to record."""

    snapshot: Snapshot
    ctx: IngestContext
    checkpoint: str


@dataclass(frozen=True)
class Drift:
    """Where the index disagrees with the source."""

    missing_or_stale: list[str]
    only_in_index: list[str]


async def sync(view: SourceView, state: ConnectorState, emitter: Emitter) -> IngestReport:
    """Emit what changed since the connector's last emission, and record the position."""
    report = await ingest_snapshot(view.snapshot, view.ctx, state=state, emitter=emitter)
    manifest = view.ctx.manifest
    await state.set_checkpoint(manifest.tenant, manifest.source_id, view.checkpoint)
    return report


async def reconcile(
    view: SourceView, sources: SourceCatalog, state: ConnectorState, emitter: Emitter
) -> tuple[Drift, IngestReport]:
    """Compare the source with what the index holds and emit the creates, updates and
    deletes that make them equal, with sequences above everything the index applied."""
    manifest, ctx = view.ctx.manifest, view.ctx
    tree: dict[str, str] = {}
    files = view.snapshot.files(ctx.include, ctx.exclude)
    for file, data in view.snapshot.read(files):
        text = decode_text(data, file.doc_id)
        if isinstance(text, str):
            tree[file.doc_id] = sha256_hex(text)
    held, applied = await sources.index_state(manifest.source_id)
    drift = Drift(
        missing_or_stale=sorted(d for d, h in tree.items() if held.get(d) != h),
        only_in_index=sorted(set(held) - set(tree)),
    )
    tenant, source = manifest.tenant, manifest.source_id
    await state.forget(tenant, source, drift.missing_or_stale)
    await state.assume_present(tenant, source, drift.only_in_index)
    await state.raise_sequences(tenant, source, applied)
    return drift, await sync(view, state, emitter)
