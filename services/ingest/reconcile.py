"""Anti-entropy: compare a source with what the index holds, and emit the difference.

`sync_snapshot` emits what differs from what the connector last emitted (its own memory);
`reconcile_snapshot` compares with what the *index* holds, so a lost, dead-lettered or
never-acknowledged event is repaired, and a document deleted in the source never stays
searchable.
"""

from __future__ import annotations

from dataclasses import dataclass

from govindex.core.hashing import sha256_hex
from govindex.core.ports import ConnectorState, SourceCatalog
from ingest.handlers import IngestReport, SourceView, sync_snapshot
from ingest.sources import decode_text


@dataclass(frozen=True)
class Drift:
    """Where the index disagrees with the source."""

    missing_or_stale: list[str]
    only_in_index: list[str]


async def reconcile_snapshot(
    view: SourceView, *, catalog: SourceCatalog, state: ConnectorState
) -> tuple[Drift, IngestReport]:
    """Compare the snapshot with what the index holds (`catalog`) and emit the creates,
    updates and deletes that make them equal, with sequences above everything the index
    applied; then record the view's checkpoint.

    The connector state is first made to say what the index holds (a stale document's
    fingerprint forgotten, a document only the index holds assumed present), so the sync
    that follows emits exactly the difference. Idempotent once the index has applied it.
    """
    manifest, ctx = view.ctx.manifest, view.ctx
    tree: dict[str, str] = {}
    files = view.snapshot.files(ctx.include, ctx.exclude)
    for file, data in view.snapshot.read(files):
        text = decode_text(data, file.doc_id)
        if isinstance(text, str):
            tree[file.doc_id] = sha256_hex(text)
    held, applied = await catalog.index_state(manifest.source_id)
    drift = Drift(
        missing_or_stale=sorted(d for d, h in tree.items() if held.get(d) != h),
        only_in_index=sorted(set(held) - set(tree)),
    )
    tenant, source = manifest.tenant, manifest.source_id
    await state.forget(tenant, source, drift.missing_or_stale)
    await state.assume_present(tenant, source, drift.only_in_index)
    await state.raise_sequences(tenant, source, applied)
    return drift, await sync_snapshot(view, state=state)
