"""Packing: hydration (one query per request), dedup, budget, flags and the manifest.

Candidates are taken in fused order. A copy of content already in the pack (same hash, or a
near-duplicate that makes the same claims) corroborates that item instead of becoming one; a
near-duplicate with different numbers or negations becomes an item flagged as a possible
contradiction. Hydrated parents and neighbours pass the same gates as hits, stay within the
hit's version and ACL, and hold no content hash the pack already holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from govindex.core.metrics import observe_tokens_packed
from govindex.core.ports import ChunkFacts, ReadAccess, ReadSnapshot
from govindex.core.records import Chunk
from reader import text as textual
from reader.cache import doc_key
from reader.flags import doc_keys, flag_contradictions, flag_relations
from reader.gates import refusal
from reader.manifest import anchor_of, pack_hash, pin_from_anchor
from reader.models import (
    Budget,
    Hydrated,
    Hydration,
    Manifest,
    ManifestItem,
    Pack,
    PackItem,
    PackRequest,
    Subject,
    TraceLine,
)
from reader.retrieval import Fused, Ranked, highlights_of

Relation = Literal["parent", "previous", "next"]
Context = list[tuple[Relation, Chunk]]


async def assemble(
    request: PackRequest, ranked: Ranked, snap: ReadSnapshot
) -> tuple[Pack, list[Chunk]]:
    """The pack, and every chunk it holds (items, context and corroborating copies). The copies
    folded into items are counted on `ranked.refused` as `dedup`; the tokens packed are
    observed."""
    # Which candidates become items depends on what earlier items' context takes, so the
    # context of every candidate is read up front, in one statement for the request.
    around = await snap.facts_around(
        [chunk_id for chunk_id, _, _ in ranked.fused],
        parent=request.hydration.parent,
        neighbours=request.hydration.neighbours,
    )
    chosen = select(request, ranked, around)
    if chosen.folded:
        ranked.refused["dedup"] = ranked.refused.get("dedup", 0) + chosen.folded
    observe_tokens_packed(chosen.used)
    items = flag_contradictions(chosen.items, chosen.contradictions)
    if items:
        items = flag_relations(items, await snap.edges_about(ranked.access, doc_keys(items)))
    manifest = manifest_of(request, ranked.access, items, await snap.generation())
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


def hydrate(
    hit: Chunk, hydration: Hydration, access: ReadAccess, around: Mapping[str, ChunkFacts]
) -> Context:
    """Parent, then up to N neighbours each side: same version, same ACL, every gate. A
    neighbour that fails ends the walk on its side."""

    def admitted(chunk_id: str | None) -> Chunk | None:
        facts = around.get(chunk_id) if chunk_id is not None else None
        if facts is None or refusal(facts, access) is not None:
            return None
        c = facts.chunk
        if c.version_id != hit.version_id or set(c.acl) != set(hit.acl):
            return None  # a version or ACL boundary ends hydration
        return c

    found: Context = []
    if hydration.parent and (parent := admitted(hit.parent_id)) is not None:
        found.append(("parent", parent))
    steps: tuple[tuple[Relation, str], ...] = (("previous", "prev_id"), ("next", "next_id"))
    for relation, step in steps:
        current = hit
        for _ in range(hydration.neighbours):
            following = admitted(getattr(current, step))
            if following is None:
                break
            found.append((relation, following))
            current = following
    return found


def near_duplicate(c: Chunk, simhashes: Sequence[int], threshold: int) -> int | None:
    """The first item whose SimHash is within `threshold` bits of this chunk's."""
    if threshold <= 0:
        return None
    for i, other in enumerate(simhashes):
        if textual.hamming(c.simhash, other) <= threshold:
            return i
    return None


@dataclass
class Selection:
    """The items chosen so far, and what the next candidate is judged against."""

    budget: Budget
    trace: list[TraceLine]
    items: list[PackItem] = field(default_factory=list)
    held: list[Chunk] = field(default_factory=list)
    used: int = 0
    folded: int = 0  # copies folded into an item as its corroboration
    contradictions: list[tuple[int, int]] = field(default_factory=list)
    taken_hashes: dict[str, int] = field(default_factory=dict)  # content hash -> item index
    taken_chunks: set[str] = field(default_factory=set)
    simhashes: list[int] = field(default_factory=list)  # one per item, in item order
    per_doc: dict[str, int] = field(default_factory=dict)

    def full(self) -> bool:
        return len(self.items) >= self.budget.max_items

    def corroborate(self, index: int, c: Chunk, why: str) -> None:
        """Fold a copy into item `index`: its anchor is in the pack, so it is held (a change
        to it must reach the cache)."""
        item = self.items[index]
        self.items[index] = item.model_copy(
            update={"corroboration": [*item.corroboration, anchor_of(c)]}
        )
        self.held.append(c)
        self.folded += 1
        self._say("dedup", c, "folded", why + item.key)

    def document_full(self, c: Chunk) -> bool:
        if self.per_doc.get(doc_key(c), 0) < self.budget.max_per_document:
            return False
        self._say("budget", c, "skipped", "max_per_document reached")
        return True

    def fresh(self, hit: Chunk, context: Context) -> Context:
        """The context minus what the pack holds: one content hash once, context included."""
        seen = {hit.content_hash}
        kept: Context = []
        for relation, h in context:
            if (
                h.chunk_id in self.taken_chunks
                or h.content_hash in self.taken_hashes
                or h.content_hash in seen
            ):
                continue
            seen.add(h.content_hash)
            kept.append((relation, h))
        return kept

    def fit(self, hit: Chunk, context: Context) -> tuple[Context, int] | None:
        """The context and tokens the item takes: with its context if that fits, else
        without it if that fits, else None (skipped)."""
        own = textual.tokens(hit.text)
        total = own + sum(textual.tokens(h.text) for _, h in context)
        if self.used + total > self.budget.max_tokens:
            context, total = [], own
        if self.used + total > self.budget.max_tokens:
            self._say("budget", hit, "skipped", "over max_tokens")
            return None
        return context, total

    def take(self, item: PackItem, hit: Chunk, context: Context, near: int | None) -> None:
        self.used += item.tokens
        self.per_doc[doc_key(hit)] = self.per_doc.get(doc_key(hit), 0) + 1
        reason = f"{item.key}: {item.tokens} tokens with {len(context)} hydrated, {self.used} used"
        self._say("select", hit, "selected", reason)
        index = len(self.items)
        if near is not None:
            self.contradictions.append((near, index))
        self.taken_hashes[hit.content_hash] = index
        self.taken_hashes.update((h.content_hash, index) for _, h in context)
        self.simhashes.append(hit.simhash)
        self.taken_chunks.add(hit.chunk_id)
        self.taken_chunks.update(h.chunk_id for _, h in context)
        self.held.append(hit)
        self.held.extend(h for _, h in context)
        self.items.append(item)

    def _say(self, stage: str, c: Chunk, decision: str, reason: str) -> None:
        self.trace.append(
            TraceLine(stage=stage, chunk_id=c.chunk_id, decision=decision, reason=reason)
        )


def select(request: PackRequest, ranked: Ranked, around: Mapping[str, ChunkFacts]) -> Selection:
    """Walk the fused candidates until the pack holds `max_items` items; each decision
    leaves a trace line on `ranked.trace`."""
    chosen = Selection(budget=request.budget, trace=ranked.trace)
    for candidate in ranked.fused:
        if chosen.full():
            break
        chunk_id = candidate[0]
        c = ranked.facts[chunk_id].chunk
        if chunk_id in chosen.taken_chunks:
            continue
        if c.content_hash in chosen.taken_hashes:  # the same content: corroboration
            chosen.corroborate(chosen.taken_hashes[c.content_hash], c, "same content hash as ")
            continue
        near = near_duplicate(c, chosen.simhashes, request.dedup_threshold)
        if near is not None and not textual.claims_differ(c.text, chosen.items[near].text):
            chosen.corroborate(near, c, "near-duplicate of ")
            continue
        if chosen.document_full(c):
            continue
        context = chosen.fresh(c, hydrate(c, request.hydration, ranked.access, around))
        fitted = chosen.fit(c, context)
        if fitted is None:
            continue
        position = len(chosen.items) + 1
        item = pack_item(position, candidate, c, *fitted, request.query, ranked.paths)
        chosen.take(item, c, fitted[0], near)
    return chosen


def pack_item(
    position: int,
    candidate: Fused,
    hit: Chunk,
    context: Context,
    tokens: int,
    query: str,
    paths: Mapping[str, tuple[str, ...]],
) -> PackItem:
    """The item at `position` in the pack, cited as S<position>."""
    chunk_id, score, channels = candidate
    return PackItem(
        key=f"S{position}",
        rank=position,
        score=round(score, 8),
        channels=channels,
        anchor=anchor_of(hit),
        kind=hit.kind,
        text=hit.text,
        tokens=tokens,
        highlights=highlights_of(hit, query),
        hydrated=[
            Hydrated(relation=r, anchor=anchor_of(h), text=h.text, tokens=textual.tokens(h.text))
            for r, h in context
        ],
        graph_path=list(paths.get(chunk_id, ())),
    )


def manifest_of(
    request: PackRequest, access: ReadAccess, items: Sequence[PackItem], generation: int | None
) -> Manifest:
    """Every item pinned with its hydrated chunks, for whom, why and when; then hashed."""
    entries = [
        ManifestItem(
            **pin_from_anchor(item.anchor).model_dump(),
            key=item.key,
            hydrated=[pin_from_anchor(h.anchor) for h in item.hydrated],
        )
        for item in items
    ]
    draft = Manifest(
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
        pack_hash="",
    )
    return draft.model_copy(update={"pack_hash": pack_hash(draft)})
