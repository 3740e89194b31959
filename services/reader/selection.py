"""Selection: which candidates become a pack's items, in which order.

Required evidence first, each type until it holds its `min` items; then the fused
candidates in rank order (or by maximal marginal relevance), held to the diversity asked
(distinct documents and sources, a cap per parent). A copy of content already in the pack
(same hash, or a near-duplicate that makes the same claims) corroborates that item instead
of becoming one; a near-duplicate with different numbers or negations becomes an item, and
both are flagged. Hydrated parents and neighbours pass the same gates as hits, stay within
the hit's version and ACL, and hold no content hash the pack already holds. Whatever is
left out is an omission with its reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from govindex.core.ports import ChunkFacts, ReadAccess
from govindex.core.records import Chunk
from govindex.core.tokens import HEURISTIC, TokenEstimator
from reader import text as textual
from reader.cache import doc_key
from reader.gates import refusal
from reader.manifest import anchor_of, described, pin_from_anchor
from reader.models import (
    Budget,
    Diversity,
    Hydrated,
    Hydration,
    MissingEvidence,
    Omission,
    OmissionStage,
    PackItem,
    PackRequest,
    Pin,
    TraceLine,
)
from reader.retrieval import Fused, Ranked, highlights_of

MMR_POOL = 64  # candidates MMR weighs for each next item, in rank order
Relation = Literal["parent", "previous", "next"]
Context = list[tuple[Relation, Chunk]]


def omission(c: Chunk, stage: OmissionStage, reason: str, replacement: Pin | None) -> Omission:
    return Omission(
        chunk_id=c.chunk_id,
        doc=doc_key(c),
        version_id=c.version_id,
        sequence=c.sequence,
        stage=stage,
        reason=reason[:512],
        replacement=replacement,
    )


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
    tokens: TokenEstimator = HEURISTIC
    items: list[PackItem] = field(default_factory=list)
    held: list[Chunk] = field(default_factory=list)
    used: int = 0
    folded: int = 0  # copies folded into an item as its corroboration
    contradictions: list[tuple[int, int]] = field(default_factory=list)
    taken_hashes: dict[str, int] = field(default_factory=dict)  # content hash -> item index
    taken_chunks: set[str] = field(default_factory=set)
    simhashes: list[int] = field(default_factory=list)  # one per item, in item order
    per_doc: dict[str, int] = field(default_factory=dict)
    left_out: list[Omission] = field(default_factory=list)  # folded or over the budget
    missing: list[MissingEvidence] = field(default_factory=list)  # required, not held

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
        self.left_out.append(
            omission(c, "dedup", why + item.key, pin_from_anchor(self.items[index].anchor))
        )

    def document_full(self, c: Chunk) -> bool:
        if self.per_doc.get(doc_key(c), 0) < self.budget.max_per_document:
            return False
        self._say("budget", c, "skipped", "max_per_document reached")
        self.left_out.append(omission(c, "budget", "max_per_document reached", None))
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
        own = self.tokens.count(hit.text)
        total = own + sum(self.tokens.count(h.text) for _, h in context)
        if self.used + total > self.budget.max_tokens:
            context, total = [], own
        if self.used + total > self.budget.max_tokens:
            self._say("budget", hit, "skipped", "over max_tokens")
            self.left_out.append(omission(hit, "budget", "over max_tokens", None))
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

    def hold_back(self, c: Chunk, why: str) -> None:
        self._say("diversity", c, "deferred", why)

    def _say(self, stage: str, c: Chunk, decision: str, reason: str) -> None:
        self.trace.append(
            TraceLine(stage=stage, chunk_id=c.chunk_id, decision=decision, reason=reason)
        )


# Long: two passes (required evidence, then rank or MMR order under the diversity asked)
# share one `consider`, so a candidate is judged the same way in both.
def select(
    request: PackRequest,
    ranked: Ranked,
    around: Mapping[str, ChunkFacts],
    tokens: TokenEstimator = HEURISTIC,
) -> Selection:
    """Required evidence first, each type until it has its `min` items, then the fused
    candidates, until the pack holds `max_items` items; each decision leaves a trace line
    on `ranked.trace`. `tokens` counts the budget."""
    chosen = Selection(budget=request.budget, trace=ranked.trace, tokens=tokens)
    considered: set[str] = set()

    def consider(candidate: Fused) -> Literal["taken", "folded", "budget", "seen"]:
        chunk_id = candidate[0]
        if chunk_id in considered or chunk_id in chosen.taken_chunks:
            return "seen"
        considered.add(chunk_id)
        c = ranked.facts[chunk_id].chunk
        if c.content_hash in chosen.taken_hashes:  # the same content: corroboration
            chosen.corroborate(chosen.taken_hashes[c.content_hash], c, "same content hash as ")
            return "folded"
        near = near_duplicate(c, chosen.simhashes, request.dedup_threshold)
        if near is not None and not textual.claims_differ(c.text, chosen.items[near].text):
            chosen.corroborate(near, c, "near-duplicate of ")
            return "folded"
        if chosen.document_full(c):
            return "budget"
        context = chosen.fresh(c, hydrate(c, request.hydration, ranked.access, around))
        fitted = chosen.fit(c, context)
        if fitted is None:
            return "budget"
        position = len(chosen.items) + 1
        facts = ranked.facts[chunk_id]
        item = pack_item(
            position, candidate, facts, *fitted, request.query, ranked.paths, around, tokens
        )
        chosen.take(item, c, fitted[0], near)
        return "taken"

    for need in request.required_evidence:
        have = sum(need.type in item.evidence for item in chosen.items)
        squeezed = False
        for candidate in supporting(ranked, need.type):
            if have >= need.min:
                break
            if chosen.full():
                squeezed = True
                break
            outcome = consider(candidate)
            have += outcome == "taken"
            squeezed = squeezed or outcome == "budget"
        if have < need.min:
            why: Literal["over_budget", "none_admissible"] = (
                "over_budget" if squeezed else "none_admissible"
            )
            chosen.missing.append(
                MissingEvidence(type=need.type, min=need.min, found=have, why=why)
            )
    diverse = Diversifier(request.diversity, ranked, chosen)
    deferred: list[Fused] = []
    pending = list(ranked.fused)
    while pending and not chosen.full():
        candidate = diverse.pick(pending)
        pending.remove(candidate)
        c = ranked.facts[candidate[0]].chunk
        if candidate[0] in considered or candidate[0] in chosen.taken_chunks:
            continue
        held_back = diverse.held_back(c)
        if held_back is not None:
            chosen.hold_back(c, held_back)
            deferred.append(candidate)
            continue
        consider(candidate)
    for candidate in deferred:  # slots the minimums could not fill go back to rank order
        if chosen.full():
            break
        c = ranked.facts[candidate[0]].chunk
        if diverse.over_parent(c):
            chosen.left_out.append(omission(c, "budget", "max_per_parent reached", None))
            continue
        consider(candidate)
    return chosen


class Diversifier:
    """The request's `diversity` over one selection: which candidate comes next (MMR), and
    which must wait (a document or source the minimums cannot spare a slot for yet, a
    parent at its cap)."""

    def __init__(self, diversity: Diversity, ranked: Ranked, chosen: Selection) -> None:
        self.d, self.ranked, self.chosen = diversity, ranked, chosen
        top = max((f[1] for f in ranked.fused), default=0.0)
        self._scale = top if top > 0 else 1.0

    def pick(self, pending: Sequence[Fused]) -> Fused:
        lam = self.d.mmr_lambda
        if lam is None or lam >= 1 or not self.chosen.simhashes:
            return pending[0]

        def marginal(f: Fused) -> float:
            c = self.ranked.facts[f[0]].chunk
            similar = max(1 - textual.hamming(c.simhash, h) / 64 for h in self.chosen.simhashes)
            return lam * (f[1] / self._scale) - (1 - lam) * similar

        # Among the best-ranked few only: a pack of 200 items over 2,500 candidates would
        # otherwise cost a request 100 million comparisons.
        return max(pending[:MMR_POOL], key=marginal)  # ties: the earlier, better-ranked one

    def over_parent(self, c: Chunk) -> bool:
        cap = self.d.max_per_parent
        if cap is None or c.parent_id is None:
            return False
        return sum(h.parent_id == c.parent_id for h in self._items()) >= cap

    def held_back(self, c: Chunk) -> str | None:
        """Why `c` must wait, if it must."""
        if self.over_parent(c):
            return "max_per_parent reached"
        left = self.chosen.budget.max_items - len(self.chosen.items)
        items = self._items()
        docs = {doc_key(h) for h in items}
        sources = {h.source_id for h in items}
        if doc_key(c) in docs and left <= self.d.min_documents - len(docs):
            return "its slot is kept for min_documents"
        if c.source_id in sources and left <= self.d.min_sources - len(sources):
            return "its slot is kept for min_sources"
        return None

    def _items(self) -> list[Chunk]:
        return [self.ranked.facts[i.anchor.chunk_id].chunk for i in self.chosen.items]


def supporting(ranked: Ranked, kind: str) -> list[Fused]:
    """The candidates that can support an evidence type: the fused ones that can, in fused
    order, then those found for the type alone (ranked by the query's words)."""
    fused = [f for f in ranked.fused if kind in ranked.facts[f[0]].chunk.evidence]
    known = {f[0] for f in fused}
    extra = [c for c in ranked.evidence.get(kind, []) if c not in known]
    return fused + [(c, 0.0, {"evidence": n}) for n, c in enumerate(extra, 1)]


def pack_item(
    position: int,
    candidate: Fused,
    facts: ChunkFacts,
    context: Context,
    tokens: int,
    query: str,
    paths: Mapping[str, tuple[str, ...]],
    around: Mapping[str, ChunkFacts],
    estimator: TokenEstimator = HEURISTIC,
) -> PackItem:
    """The item at `position` in the pack, cited as S<position>; it and each hydrated chunk
    say what they are (`described`)."""
    chunk_id, score, channels = candidate
    hit = facts.chunk
    return PackItem(
        **described(facts),
        key=f"S{position}",
        rank=position,
        score=round(score, 8),
        channels=channels,
        anchor=anchor_of(hit),
        text=hit.text,
        tokens=tokens,
        highlights=highlights_of(hit, query),
        hydrated=[
            Hydrated(
                **described(around[h.chunk_id]),
                relation=r,
                anchor=anchor_of(h),
                text=h.text,
                tokens=estimator.count(h.text),
            )
            for r, h in context
        ],
        graph_path=list(paths.get(chunk_id, ())),
    )
