"""The governed read service: channels, gates, fusion, hydration, dedup, budget, manifests.

One request reads one Postgres snapshot. Every channel filters by tenant, ACL, scope,
purpose, valid/system time and deletion inside its own query; every candidate it returns is
then re-checked by `reader.gates` on facts read in the same snapshot (integrity included)
before fusion, so nothing is ever filtered after ranking. Hydrated neighbours pass the same
gates. Nothing about a candidate refused by tenant, ACL, scope or purpose is returned:
not its id, not a count, not a trace line. Hit totals are never returned.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeVar

import structlog
from pydantic import BaseModel

from govindex.core.errors import TransientError
from govindex.core.ports import (
    CandidateIndex,
    ChunkFacts,
    ReadAccess,
    ReadCache,
    ReadFilters,
    ReadSnapshot,
    ReadStore,
)
from govindex.core.records import Chunk
from reader import text as textual
from reader.fusion import RRF_K, fuse
from reader.gates import CONFIDENTIAL, refusal
from reader.manifest import anchor_of, judge_pin, overall, pack_hash, pin_from_anchor, pins
from reader.models import (
    Flag,
    Highlight,
    Hit,
    Hydrated,
    Manifest,
    ManifestItem,
    Pack,
    PackItem,
    PackRequest,
    SearchRequest,
    SearchResponse,
    TraceLine,
    VerifyResponse,
)

log = structlog.get_logger(__name__)
T = TypeVar("T", Pack, SearchResponse)

CACHE_TTL_S = 300


@dataclass(frozen=True)
class ReadPorts:
    store: ReadStore
    index: CandidateIndex | None
    cache: ReadCache | None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


@dataclass
class _Ranked:
    """What the channels and the gates agreed on, for one request."""

    access: ReadAccess
    fused: list[tuple[str, float, dict[str, int]]]
    facts: dict[str, ChunkFacts]
    paths: dict[str, tuple[str, ...]]
    degraded: list[str]
    trace: list[TraceLine] = field(default_factory=list)


def access_of(request: SearchRequest, now: datetime) -> ReadAccess:
    return ReadAccess(
        tenant_id=request.tenant,
        principals=tuple(sorted(set(request.subject.principals))),
        scopes=tuple(sorted(set(request.subject.scopes))),
        purpose=request.purpose,
        as_of=request.as_of or now,
        known_at=request.known_at,
    )


def filters_of(request: SearchRequest) -> ReadFilters:
    f = request.filters
    return ReadFilters(
        sources=tuple(f.sources),
        kinds=tuple(k.value for k in f.kinds),
        labels=tuple(f.labels),
        path_prefix=f.path_prefix,
    )


async def _channel(
    name: str,
    request: SearchRequest,
    snap: ReadSnapshot,
    access: ReadAccess,
    filters: ReadFilters,
    index: CandidateIndex | None,
    paths: dict[str, tuple[str, ...]],
) -> list[str]:
    window = request.window
    query = request.query
    if name == "bm25":
        if index is None or not query.strip():
            return []
        found = await index.search(
            text=query,
            tenant_id=access.tenant_id,
            principals=access.principals,
            purpose=access.purpose,
            as_of=access.as_of,
            size=window,
        )
        return [str(c["chunk_id"]) for c in found]
    if name == "fulltext":
        return await snap.fulltext(access, filters, query, window)
    if name == "structured":
        keys = [*request.entities, *textual.identifiers(query)]
        return await snap.structured(access, filters, keys, window)
    if name == "dense":
        return await snap.dense(access, filters, query, window)
    if name == "graph":
        seeds = [*request.entities, *textual.identifiers(query), *textual.terms(query)]
        reached = await snap.graph(
            access, filters, seeds, request.graph.relations, request.graph.hops, window
        )
        for r in reached:
            paths.setdefault(r.chunk_id, r.path)
        return [r.chunk_id for r in reached]
    raise ValueError(f"unknown channel {name!r}")


async def _rank(request: SearchRequest, snap: ReadSnapshot, ports: ReadPorts) -> _Ranked:
    access = access_of(request, ports.clock())
    filters = filters_of(request)
    paths: dict[str, tuple[str, ...]] = {}
    degraded: list[str] = []
    raw: dict[str, list[str]] = {}
    for name in dict.fromkeys(request.channels):
        try:
            raw[name] = await _channel(name, request, snap, access, filters, ports.index, paths)
        except TransientError as exc:
            if name != "bm25":
                raise  # Postgres itself: fail closed
            log.warning("read.channel_unavailable", channel=name, error=str(exc))
            degraded.append(name)
    facts = await snap.facts(sorted({c for ids in raw.values() for c in ids}))
    trace: list[TraceLine] = []
    ranked: dict[str, list[str]] = {}
    for channel, ids in raw.items():
        kept: list[str] = []
        for chunk_id in ids:
            found = facts.get(chunk_id)
            if found is None:  # the index still had it; Postgres no longer does
                trace.append(TraceLine(stage=channel, decision="dropped", reason="not in Postgres"))
                continue
            refused = refusal(found, access)
            if refused is None:
                kept.append(chunk_id)
                trace.append(
                    TraceLine(
                        stage=channel,
                        chunk_id=chunk_id,
                        decision="admitted",
                        reason=f"rank {len(kept)}; passed every gate",
                    )
                )
            elif refused[0] not in CONFIDENTIAL:
                trace.append(
                    TraceLine(
                        stage=channel, chunk_id=chunk_id, decision="refused", reason=refused[1]
                    )
                )
        ranked[channel] = kept
        trace.append(TraceLine(stage=channel, decision="ranked", reason=f"{len(kept)} admitted"))
    chunks = {c: f.chunk for c, f in facts.items()}
    fused = fuse(ranked, chunks, RRF_K)
    return _Ranked(access, fused, facts, paths, degraded, trace)


def _highlights(chunk: Chunk, query: str) -> list[Highlight]:
    return [
        Highlight(start=s, end=e, term=t)
        for s, e, t in textual.highlights(chunk.text, textual.terms(query))
    ]


class _Entry(BaseModel):
    """A cache entry: the response and the sequence of every document it holds."""

    documents: dict[str, int]
    body: str


def _doc(c: Chunk) -> str:
    return f"{c.tenant_id}/{c.source_id}/{c.doc_id}"


def cache_key(kind: str, request: SearchRequest) -> str:
    """The canonical request (subject included, so entries are never shared across
    subjects); a request without as_of is keyed as "now" and cached briefly."""
    body = request.model_dump(mode="json", exclude={"cache", "trace"})
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return f"read:{kind}:{hashlib.sha256(canonical.encode()).hexdigest()}"


class ReadService:
    """search, pack, verify and open one chunk, over the read ports."""

    def __init__(self, ports: ReadPorts) -> None:
        self.ports = ports

    # --- search -----------------------------------------------------------------------

    async def search(self, request: SearchRequest) -> SearchResponse:
        async def build() -> tuple[SearchResponse, list[Chunk], dict[str, int]]:
            async with self.ports.store.snapshot() as snap:
                r = await _rank(request, snap, self.ports)
                top = [r.facts[chunk_id].chunk for chunk_id, _, _ in r.fused[: request.limit]]
                sequences = await snap.doc_sequences(sorted({_doc(c) for c in top}))
            hits = []
            for rank, (chunk_id, score, channels) in enumerate(r.fused[: request.limit], 1):
                c = r.facts[chunk_id].chunk
                hits.append(
                    Hit(
                        rank=rank,
                        score=round(score, 8),
                        channels=channels,
                        anchor=anchor_of(c),
                        kind=c.kind,
                        text=c.text,
                        highlights=_highlights(c, request.query),
                        graph_path=list(r.paths.get(chunk_id, ())),
                    )
                )
            response = SearchResponse(
                as_of=r.access.as_of,
                known_at=r.access.known_at,
                hits=hits,
                degraded=r.degraded,
                trace=r.trace if request.trace else None,
            )
            return response, top, sequences

        return await self._cached("search", request, build, SearchResponse)

    # --- packs ------------------------------------------------------------------------

    async def pack(self, request: PackRequest) -> Pack:
        async def build() -> tuple[Pack, list[Chunk], dict[str, int]]:
            async with self.ports.store.snapshot() as snap:
                r = await _rank(request, snap, self.ports)
                pack, held = await _assemble(request, r, snap)
                sequences = await snap.doc_sequences(sorted({_doc(c) for c in held}))
            return pack, held, sequences

        return await self._cached("pack", request, build, Pack)

    async def _cached(
        self,
        kind: str,
        request: SearchRequest,
        build: Callable[[], Awaitable[tuple[T, list[Chunk], dict[str, int]]]],
        model: type[T],
    ) -> T:
        """Serve from the cache only what is provably current, and keep nothing that is not.

        An entry records the sequence of every document it holds. A hit is served only if
        Postgres still has each at that sequence with its source enabled (one small
        query), which closes the window between a commit and its eviction. After a write
        the same check runs again and deletes the entry if a change committed meanwhile;
        a change committing later evicts it through its tags (the indexer and purger
        evict after they commit), so no entry outlives a purge, revocation or version."""
        cache = self.ports.cache
        name = cache_key(kind, request)
        if cache is not None and request.cache == "use":
            stored = await cache.get(name)
            if stored is not None:
                entry = _Entry.model_validate_json(stored)
                if await self.ports.store.still_current(entry.documents):
                    result = model.model_validate_json(entry.body)
                    return result.model_copy(update={"cached": True})
        result, held, sequences = await build()
        if cache is not None and request.cache != "bypass":
            await self._store(name, request, result, held, sequences)
        return result

    async def _store(
        self,
        name: str,
        request: SearchRequest,
        result: Pack | SearchResponse,
        held: Sequence[Chunk],
        sequences: dict[str, int],
    ) -> None:
        cache = self.ports.cache
        ttl = self._ttl(request, held)
        if cache is None or ttl <= 0:
            return
        if len(sequences) != len({_doc(c) for c in held}):
            return  # a held document without an order-guard row: nothing to check against
        entry = _Entry(documents=sequences, body=result.model_dump_json())
        await cache.put(
            name,
            entry.model_dump_json().encode(),
            documents=sorted(sequences),
            chunks=sorted({c.chunk_id for c in held}),
            principals=sorted(set(request.subject.principals)),
            ttl_s=ttl,
        )
        if not await self.ports.store.still_current(sequences):
            await cache.delete(name)  # changed while we wrote: the entry must not stay

    def _ttl(self, request: SearchRequest, held: Sequence[Chunk]) -> int:
        """Bounded by the earliest moment an item stops being valid (for a request about
        "now"); evictions take care of every change recorded before then."""
        now = self.ports.clock()
        ttl = timedelta(seconds=CACHE_TTL_S if request.as_of is not None else 30)
        if request.as_of is None:
            for c in held:
                if c.valid_to is not None:
                    ttl = min(ttl, c.valid_to - now)
        return max(0, int(ttl.total_seconds()))

    # --- verify -----------------------------------------------------------------------

    async def verify(self, manifest: Manifest) -> VerifyResponse:
        hash_ok = pack_hash(manifest) == manifest.pack_hash
        access = ReadAccess(
            tenant_id=manifest.tenant,
            principals=tuple(sorted(set(manifest.subject.principals))),
            scopes=tuple(sorted(set(manifest.subject.scopes))),
            purpose=manifest.purpose,
            as_of=manifest.as_of,
            known_at=None,
        )
        pinned = pins(manifest)
        async with self.ports.store.snapshot() as snap:
            facts = await snap.facts([p.chunk_id for p, _ in pinned])
        verdicts = []
        for pin, key in pinned:
            found = facts.get(pin.chunk_id)
            if found is not None and found.chunk.tenant_id != manifest.tenant:
                found = None  # a pin naming another tenant's chunk learns nothing
            verdicts.append(judge_pin(pin, key, found, access))
        return VerifyResponse(
            status=overall(verdicts, hash_ok), checked_at=self.ports.clock(), pins=verdicts
        )

    # --- one anchor -------------------------------------------------------------------

    async def chunk(self, chunk_id: str, access: ReadAccess) -> Chunk | None:
        """The chunk if it passes every gate at access.as_of; None otherwise (whatever the
        reason, so a refused id is indistinguishable from an unknown one)."""
        async with self.ports.store.snapshot() as snap:
            facts = (await snap.facts([chunk_id])).get(chunk_id)
        if facts is None or refusal(facts, access) is not None:
            return None
        return facts.chunk


# --- pack assembly (inside the request's snapshot) ------------------------------------


Relation = Literal["parent", "previous", "next"]


async def _hydrate(
    hit: Chunk, request: PackRequest, access: ReadAccess, snap: ReadSnapshot
) -> list[tuple[Relation, Chunk]]:
    """Parent, then up to N neighbours each side: same version, same ACL, every gate."""
    wanted: list[tuple[Relation, str | None]] = []
    if request.hydration.parent:
        wanted.append(("parent", hit.parent_id))
    found: list[tuple[Relation, Chunk]] = []

    async def admitted(chunk_id: str | None) -> Chunk | None:
        if chunk_id is None:
            return None
        facts = (await snap.facts([chunk_id])).get(chunk_id)
        if facts is None or refusal(facts, access) is not None:
            return None
        c = facts.chunk
        if c.version_id != hit.version_id or set(c.acl) != set(hit.acl):
            return None  # a version or ACL boundary ends hydration
        return c

    for relation, chunk_id in wanted:
        if (c := await admitted(chunk_id)) is not None:
            found.append((relation, c))
    steps: tuple[tuple[Relation, str], ...] = (("previous", "prev_id"), ("next", "next_id"))
    for relation, step in steps:
        current = hit
        for _ in range(request.hydration.neighbours):
            following = await admitted(getattr(current, step))
            if following is None:
                break
            found.append((relation, following))
            current = following
    return found


async def _assemble(
    request: PackRequest, r: _Ranked, snap: ReadSnapshot
) -> tuple[Pack, list[Chunk]]:
    budget = request.budget
    items: list[PackItem] = []
    held: list[Chunk] = []
    taken_hashes: dict[str, int] = {}  # content hash -> item index
    taken_chunks: set[str] = set()
    per_doc: dict[str, int] = {}
    used = 0
    contradictions: list[tuple[int, int]] = []
    simhashes: list[int] = []
    for chunk_id, score, channels in r.fused:
        if len(items) >= budget.max_items:
            break
        c = r.facts[chunk_id].chunk
        if chunk_id in taken_chunks:
            continue
        if c.content_hash in taken_hashes:  # the same content: corroboration, not an item
            i = taken_hashes[c.content_hash]
            items[i] = items[i].model_copy(
                update={"corroboration": [*items[i].corroboration, anchor_of(c)]}
            )
            held.append(c)  # its anchor is in the pack: a change to it must reach the cache
            r.trace.append(
                TraceLine(
                    stage="dedup",
                    chunk_id=chunk_id,
                    decision="folded",
                    reason="same content hash as " + items[i].key,
                )
            )
            continue
        near = _near_duplicate(c, simhashes, request.dedup_threshold)
        if near is not None and not textual.claims_differ(c.text, items[near].text):
            items[near] = items[near].model_copy(
                update={"corroboration": [*items[near].corroboration, anchor_of(c)]}
            )
            held.append(c)
            r.trace.append(
                TraceLine(
                    stage="dedup",
                    chunk_id=chunk_id,
                    decision="folded",
                    reason="near-duplicate of " + items[near].key,
                )
            )
            continue
        doc = f"{c.tenant_id}/{c.source_id}/{c.doc_id}"
        if per_doc.get(doc, 0) >= budget.max_per_document:
            r.trace.append(
                TraceLine(
                    stage="budget",
                    chunk_id=chunk_id,
                    decision="skipped",
                    reason="max_per_document reached",
                )
            )
            continue
        hydrated: list[tuple[Relation, Chunk]] = []
        seen = {c.content_hash}
        for rel, h in await _hydrate(c, request, r.access, snap):
            # one content hash once in a pack, context included
            if (
                h.chunk_id in taken_chunks
                or h.content_hash in taken_hashes
                or h.content_hash in seen
            ):
                continue
            seen.add(h.content_hash)
            hydrated.append((rel, h))
        own = textual.tokens(c.text)
        total = own + sum(textual.tokens(h.text) for _, h in hydrated)
        if used + total > budget.max_tokens:
            hydrated, total = [], own  # without its context, if that fits
        if used + total > budget.max_tokens:
            r.trace.append(
                TraceLine(
                    stage="budget", chunk_id=chunk_id, decision="skipped", reason="over max_tokens"
                )
            )
            continue
        used += total
        per_doc[doc] = per_doc.get(doc, 0) + 1
        key = f"S{len(items) + 1}"
        r.trace.append(
            TraceLine(
                stage="select",
                chunk_id=chunk_id,
                decision="selected",
                reason=f"{key}: {total} tokens with {len(hydrated)} hydrated, {used} used",
            )
        )
        if near is not None:
            contradictions.append((near, len(items)))
        taken_hashes[c.content_hash] = len(items)
        taken_hashes.update((h.content_hash, len(items)) for _, h in hydrated)
        simhashes.append(c.simhash)
        taken_chunks.add(chunk_id)
        taken_chunks.update(h.chunk_id for _, h in hydrated)
        held.append(c)
        held.extend(h for _, h in hydrated)
        items.append(
            PackItem(
                key=key,
                rank=len(items) + 1,
                score=round(score, 8),
                channels=channels,
                anchor=anchor_of(c),
                kind=c.kind,
                text=c.text,
                tokens=total,
                highlights=_highlights(c, request.query),
                hydrated=[
                    Hydrated(
                        relation=rel,
                        anchor=anchor_of(h),
                        text=h.text,
                        tokens=textual.tokens(h.text),
                    )
                    for rel, h in hydrated
                ],
                graph_path=list(r.paths.get(chunk_id, ())),
            )
        )
    items = _flag_contradictions(items, contradictions)
    items = await _flag_relations(items, r.access, snap)
    manifest = _manifest(request, r, items, await snap.generation())
    pack = Pack(
        as_of=r.access.as_of,
        known_at=r.access.known_at,
        items=items,
        used_tokens=used,
        max_tokens=budget.max_tokens,
        manifest=manifest,
        degraded=r.degraded,
        trace=r.trace if request.trace else None,
    )
    return pack, held


def _near_duplicate(c: Chunk, simhashes: Sequence[int], threshold: int) -> int | None:
    if threshold <= 0:
        return None
    for i, other in enumerate(simhashes):
        if textual.hamming(c.simhash, other) <= threshold:
            return i
    return None


def _flag_contradictions(items: list[PackItem], pairs: Sequence[tuple[int, int]]) -> list[PackItem]:
    for a, b in pairs:
        ka, kb = items[a].key, items[b].key
        for i, other in ((a, kb), (b, ka)):
            flag = Flag(
                kind="possible_contradiction",
                detail=f"near-duplicate of {other} with different numbers or negation",
                evidence=[items[a].anchor.chunk_id, items[b].anchor.chunk_id],
                items=sorted({ka, kb}),
            )
            items[i] = items[i].model_copy(update={"flags": [*items[i].flags, flag]})
    return items


async def _flag_relations(
    items: list[PackItem], access: ReadAccess, snap: ReadSnapshot
) -> list[PackItem]:
    """superseded_by (a SUPERSEDES edge valid at as_of) and relation conflicts (a subject
    with two objects of a single-valued relation at as_of); evidence is admitted only."""
    if not items:
        return items
    docs = sorted({f"{i.anchor.tenant}/{i.anchor.source_id}/{i.anchor.doc_id}" for i in items})
    edges = await snap.edges_about(access, docs)
    key_of_doc: dict[str, list[str]] = {}
    for item in items:
        entity = f"document:{item.anchor.source_id}/{item.anchor.doc_id}"
        key_of_doc.setdefault(entity, []).append(item.key)
    flags: dict[str, list[Flag]] = {}
    for e in edges:
        if e.relation == "SUPERSEDES" and e.object in key_of_doc:
            flag = Flag(
                kind="superseded_by",
                detail=f"{e.subject} supersedes {e.object}",
                evidence=[e.evidence_chunk_id],
                items=sorted(key_of_doc.get(e.subject, [])),
            )
            for key in key_of_doc[e.object]:
                flags.setdefault(key, []).append(flag)
    owners: dict[str, dict[str, str]] = {}
    for e in edges:
        if e.relation == "OWNED_BY":
            owners.setdefault(e.subject, {}).setdefault(e.object, e.evidence_chunk_id)
    for subject, objects in owners.items():
        if len(objects) < 2:
            continue
        detail = f"{subject} OWNED_BY {', '.join(sorted(objects))} at as_of"
        involved = [
            i.key
            for i in items
            if any(
                edge.subject == f"document:{i.anchor.source_id}/{i.anchor.doc_id}"
                and edge.object == subject
                for edge in edges
            )
            or i.anchor.chunk_id in objects.values()
        ]
        flag = Flag(
            kind="relation_conflict",
            detail=detail,
            evidence=sorted(set(objects.values())),
            items=sorted(involved),
        )
        for key in involved:
            flags.setdefault(key, []).append(flag)
    return [
        i.model_copy(update={"flags": [*i.flags, *flags.get(i.key, [])]}) if i.key in flags else i
        for i in items
    ]


def _manifest(
    request: PackRequest, r: _Ranked, items: Sequence[PackItem], generation: int | None
) -> Manifest:
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
        subject=request.subject,
        purpose=request.purpose,
        query=request.query,
        entities=list(request.entities),
        as_of=r.access.as_of,
        known_at=r.access.known_at,
        budget=request.budget,
        index_generation=generation,
        items=entries,
        pack_hash="",
    )
    return draft.model_copy(update={"pack_hash": pack_hash(draft)})
