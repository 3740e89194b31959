"""Packing: a pack from ranked candidates: hydration read once per request, the selection
(`reader.selection`), flags, what was left out and why, and the manifest that pins it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from govindex.core.metrics import observe_tokens_packed
from govindex.core.ports import ReadAccess, ReadSnapshot
from govindex.core.records import Chunk
from govindex.core.tokens import HEURISTIC, TokenEstimator
from reader.flags import conflicts, doc_keys, flag_contradictions, flag_relations
from reader.gates import Gate
from reader.manifest import anchor_of, pack_hash, pin_from_anchor
from reader.models import (
    MAX_OMISSIONS,
    Manifest,
    ManifestItem,
    MissingEvidence,
    Omission,
    OmissionStage,
    Pack,
    PackItem,
    PackRequest,
    Subject,
    Versions,
)
from reader.retrieval import Ranked
from reader.selection import omission, select

PACKER = "govindex-packer/2"
_STAGES: dict[Gate, OmissionStage] = {
    "valid_time": "time",
    "system_time": "time",
    "deletion": "deletion",
    "integrity": "integrity",
    "trust": "trust",
}


async def assemble(
    request: PackRequest,
    ranked: Ranked,
    snap: ReadSnapshot,
    *,
    built_at: datetime,
    versions: Versions,
    tokens: TokenEstimator = HEURISTIC,
) -> tuple[Pack, list[Chunk]]:
    """The pack, and every chunk it holds (items, context and corroborating copies). The copies
    folded into items are counted on `ranked.refused` as `dedup`; the tokens packed are
    observed. The manifest lists what was left out and why (`omissions`)."""
    # Which candidates become items depends on what earlier items' context takes, so the
    # context of every candidate is read up front, in one statement for the request.
    extra = [c for ids in ranked.evidence.values() for c in ids]
    around = await snap.facts_around(
        list(dict.fromkeys([*(chunk_id for chunk_id, _, _ in ranked.fused), *extra])),
        parent=request.hydration.parent,
        neighbours=request.hydration.neighbours,
    )
    chosen = select(request, ranked, around, tokens)
    if chosen.folded:
        ranked.refused["dedup"] = ranked.refused.get("dedup", 0) + chosen.folded
    observe_tokens_packed(chosen.used)
    items = flag_contradictions(chosen.items, chosen.contradictions)
    if items:
        items = flag_relations(items, await snap.edges_about(ranked.access, doc_keys(items)))
    left_out = [*await gate_omissions(ranked, snap), *chosen.left_out][:MAX_OMISSIONS]
    manifest = manifest_of(
        request,
        ranked.access,
        items,
        await snap.generation(),
        built_at=built_at,
        versions=versions,
        omissions=left_out,
        missing=chosen.missing,
    )
    pack = Pack(
        as_of=ranked.access.as_of,
        known_at=ranked.access.known_at,
        items=items,
        used_tokens=chosen.used,
        max_tokens=request.budget.max_tokens,
        manifest=manifest,
        degraded=ranked.degraded,
        trace=ranked.trace if request.trace else None,
    )
    return pack, chosen.held


async def gate_omissions(ranked: Ranked, snap: ReadSnapshot) -> list[Omission]:
    """The candidates a gate that may be told refused; a time refusal names the version of
    the same document valid at as_of (else the newer one) the subject may see."""
    timed = [ranked.facts[c].chunk for c, gate, _ in ranked.omitted if _STAGES[gate] == "time"]
    replaced = await snap.replacements(ranked.access, timed)
    found = []
    for chunk_id, gate, reason in ranked.omitted:
        c = ranked.facts[chunk_id].chunk
        replacement = replaced.get(chunk_id)
        if gate == "valid_time":
            until = c.valid_to.isoformat() if c.valid_to is not None else "open"
            reason = f"not valid at as_of (valid {c.valid_from.isoformat()} to {until})"
        pin = pin_from_anchor(anchor_of(replacement.chunk)) if replacement else None
        found.append(omission(c, _STAGES[gate], reason, pin))
    return found


def manifest_of(
    request: PackRequest,
    access: ReadAccess,
    items: Sequence[PackItem],
    generation: int | None,
    *,
    built_at: datetime,
    versions: Versions,
    omissions: Sequence[Omission] = (),
    missing: Sequence[MissingEvidence] = (),
) -> Manifest:
    """Every item pinned with its hydrated chunks, for whom, why and when, what was left
    out and the conflicts flagged; then hashed."""
    entries = [
        ManifestItem(
            **pin_from_anchor(item.anchor).model_dump(),
            key=item.key,
            hydrated=[pin_from_anchor(h.anchor) for h in item.hydrated],
        )
        for item in items
    ]
    draft = Manifest(
        pack_id=uuid.uuid4().hex,
        built_at=built_at,
        versions=versions,
        tenant=request.tenant,
        subject=Subject(principals=list(access.principals), scopes=list(access.scopes)),
        purpose=request.purpose,
        query=request.query,
        entities=list(request.entities),
        as_of=access.as_of,
        known_at=access.known_at,
        budget=request.budget,
        index_generation=generation,
        items=entries,
        omissions=list(omissions),
        conflicts=conflicts(items),
        required_evidence=list(request.required_evidence),
        status="partial" if missing else "complete",
        missing_evidence=list(missing),
        pack_hash="",
    )
    return draft.model_copy(update={"pack_hash": pack_hash(draft)})
