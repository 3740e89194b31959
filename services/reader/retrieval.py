"""Retrieval: the asked channels on one snapshot, the gates on every candidate, then fusion.

Gates decide on facts read in the request's snapshot, before fusion; the ranked hits a search
answers with are built here too. Nothing about a candidate refused by tenant, ACL, scope or
purpose leaves this module to the caller: not its id, not a count, not a trace line (the
process's metrics count refusals by gate, across every request and subject).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from govindex.core.errors import ModelUnavailable, TransientError
from govindex.core.graph_templates import (
    BUILTIN,
    GraphRoute,
    GraphTemplates,
    GraphWalkStopped,
)
from govindex.core.metrics import observe_channel
from govindex.core.ports import CandidateIndex, ChunkFacts, ReadAccess, ReadFilters, ReadSnapshot
from govindex.core.records import Chunk
from reader import text as textual
from reader.fusion import RRF_K, fuse
from reader.gates import CONFIDENTIAL, Gate, refusal
from reader.manifest import anchor_of, described
from reader.models import Highlight, Hit, SearchRequest, SearchResponse, TraceLine

log = structlog.get_logger(__name__)

# A chunk with no event_time is outside every event_time range, as in SQL (NULL compares
# to nothing).
_NEVER = datetime.min.replace(tzinfo=UTC)
_FOREVER = datetime.max.replace(tzinfo=UTC)
Fused = tuple[str, float, dict[str, int]]  # chunk id, fused score, rank per channel
Verdicts = Mapping[str, tuple[Gate, str] | None]  # chunk id -> its refusal (None: admitted)


@dataclass
class Ranked:
    """What the channels and the gates agreed on, for one request. `refused` counts the
    candidates each gate refused (packing adds `dedup`), for the process's metrics only."""

    access: ReadAccess
    fused: list[Fused]
    facts: dict[str, ChunkFacts]
    paths: dict[str, tuple[str, ...]]
    degraded: list[str]
    trace: list[TraceLine] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    # Candidates refused by a gate that may be told (time, deletion, integrity, trust), once
    # each in the order found: what a pack's manifest lists as omissions.
    omitted: list[tuple[str, Gate, str]] = field(default_factory=list)
    # Admitted chunks that can support each required evidence type, best first.
    evidence: dict[str, list[str]] = field(default_factory=dict)


def filters_of(request: SearchRequest) -> ReadFilters:
    f = request.filters
    return ReadFilters(
        sources=tuple(f.sources),
        kinds=tuple(k.value for k in f.kinds),
        labels=tuple(f.labels),
        path_prefix=f.path_prefix,
        event_from=f.event_from,
        event_to=f.event_to,
    )


def within(filters: ReadFilters, c: Chunk) -> bool:
    """Whether a chunk is inside the caller's narrowing (sources, kinds, labels, a path
    prefix): what every Postgres channel's statement already applies."""
    return (
        (not filters.sources or c.source_id in filters.sources)
        and (not filters.kinds or c.kind in filters.kinds)
        and (not filters.labels or bool(set(c.labels) & set(filters.labels)))
        and (filters.path_prefix is None or c.doc_id.startswith(filters.path_prefix))
        and (filters.event_from is None or (c.event_time or _NEVER) >= filters.event_from)
        and (filters.event_to is None or (c.event_time or _FOREVER) < filters.event_to)
    )


def structured_keys(request: SearchRequest) -> list[str]:
    """The exact keys a structured lookup tries: the seed entities, then the query's ids."""
    return [*request.entities, *textual.identifiers(request.query)]


def graph_seeds(request: SearchRequest) -> list[str]:
    """Where a graph walk may start: the seed entities, the query's ids, then its words."""
    return [*structured_keys(request), *textual.terms(request.query)]


def graph_routes(request: SearchRequest, graph: GraphTemplates) -> tuple[GraphRoute, ...]:
    """The walks the request's graph spec asks for among the templates this server holds
    (UnknownGraphTemplate, naming the known ones, for a template it does not)."""
    spec = request.graph
    return graph.routes(spec.templates, spec.relations, spec.hops)


async def rank(
    request: SearchRequest,
    snap: ReadSnapshot,
    access: ReadAccess,
    index: CandidateIndex | None,
    *,
    omissions: bool = False,
    evidence: Sequence[str] = (),
    graph: GraphTemplates = BUILTIN,
) -> Ranked:
    """Every channel the request names (once each, in its order), gated, then fused.

    A bm25 channel that cannot answer is reported in `degraded`, and so are a dense channel
    whose model cannot embed the query and a graph walk the statement timeout stopped
    (with a trace line saying so); Postgres failing fails the read (fail closed: OpenSearch
    alone never answers). Each channel's time is observed.
    `graph`: the path templates the graph channel may walk (a request naming another is
    refused with UnknownGraphTemplate before anything is read).
    `omissions`: also look for the versions the time predicate drops (`outside_valid_time`),
    so they can be reported as left out, with the reason, and never ranked. `evidence`: also
    find, for each of these evidence types, admitted chunks that can support it."""
    filters = filters_of(request)
    graph_routes(request, graph)  # an unknown template is refused before anything is read
    paths: dict[str, tuple[str, ...]] = {}
    degraded: list[str] = []
    stopped: list[TraceLine] = []
    raw: dict[str, list[str]] = {}
    for name in dict.fromkeys(request.channels):
        started = time.perf_counter()
        try:
            raw[name] = await _channel(name, request, snap, access, filters, index, paths, graph)
        except ModelUnavailable as exc:
            # The query's model cannot embed it: the read answers by the other channels.
            log.warning("read.channel_unavailable", channel=name, error=str(exc))
            degraded.append(name)
        except TransientError as exc:
            if name != "bm25":
                raise  # Postgres itself: fail closed
            log.warning("read.channel_unavailable", channel=name, error=str(exc))
            degraded.append(name)
        except GraphWalkStopped as exc:
            # A walk too costly to finish: the read answers without it, and says so.
            log.warning(
                "read.graph_walk_stopped",
                timeout_ms=graph.statement_timeout_ms,
                tenant=access.tenant_id,
            )
            degraded.append(name)
            stopped.append(TraceLine(stage=name, decision="stopped", reason=str(exc)))
        finally:
            observe_channel(name, time.perf_counter() - started, degraded=name in degraded)
    outside: list[str] = []
    if omissions and request.query.strip():
        outside = await snap.outside_valid_time(access, filters, request.query, request.window)
    wanted: dict[str, list[str]] = {}
    if evidence:
        wanted = await snap.with_evidence(access, filters, request.query, evidence, request.window)
    extra = {c for ids in wanted.values() for c in ids}
    found = {c for ids in raw.values() for c in ids}
    facts = await snap.facts(sorted(found | set(outside) | extra))
    # The caller's narrowing holds for every channel: bm25's index query does not take it.
    raw = {
        name: [c for c in ids if c not in facts or within(filters, facts[c].chunk)]
        for name, ids in raw.items()
    }
    found = {c for ids in raw.values() for c in ids}
    judged = verdicts(facts, access)
    ranked, trace = gate_channels(raw, facts, access, judged)
    trace[:0] = stopped
    fused = fuse(ranked, {c: f.chunk for c, f in facts.items()}, RRF_K)
    refused = Counter[str](v[0] for c, v in judged.items() if v is not None and c in found)
    seen = [*[c for ids in raw.values() for c in ids], *outside, *sorted(extra - found)]
    omitted = told_refusals(seen, judged)
    for chunk_id, gate, reason in omitted:
        if chunk_id not in found:  # found without the time predicate, or for its evidence
            trace.append(
                TraceLine(stage=gate, chunk_id=chunk_id, decision="refused", reason=reason)
            )
    supporting = {
        kind: [c for c in ids if c in facts and judged[c] is None] for kind, ids in wanted.items()
    }
    return Ranked(access, fused, facts, paths, degraded, trace, dict(refused), omitted, supporting)


def told_refusals(ids: Sequence[str], judged: Verdicts) -> list[tuple[str, Gate, str]]:
    """Each refused candidate whose refusal may be told, once, in order; confidential
    refusals (tenant, ACL, scope, purpose) never."""
    told: dict[str, tuple[str, Gate, str]] = {}
    for chunk_id in ids:
        verdict = judged.get(chunk_id)
        if verdict is not None and verdict[0] not in CONFIDENTIAL and chunk_id not in told:
            told[chunk_id] = (chunk_id, verdict[0], verdict[1])
    return list(told.values())


async def _channel(
    name: str,
    request: SearchRequest,
    snap: ReadSnapshot,
    access: ReadAccess,
    filters: ReadFilters,
    index: CandidateIndex | None,
    paths: dict[str, tuple[str, ...]],
    graph: GraphTemplates,
) -> list[str]:
    """One channel's candidate ids, best first; a graph channel records each one's path."""
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
        return await snap.structured(access, filters, structured_keys(request), window)
    if name == "dense":
        return await snap.dense(access, filters, query, window)
    if name == "graph":
        reached = await snap.graph(
            access,
            filters,
            graph_seeds(request),
            graph_routes(request, graph),
            window,
            statement_timeout_ms=graph.statement_timeout_ms,
        )
        for r in reached:
            paths.setdefault(r.chunk_id, r.path)
        return [r.chunk_id for r in reached]
    raise ValueError(f"unknown channel {name!r}")


def verdicts(
    facts: Mapping[str, ChunkFacts], access: ReadAccess
) -> dict[str, tuple[Gate, str] | None]:
    """Each candidate judged once, however many channels found it."""
    return {chunk_id: refusal(found, access) for chunk_id, found in facts.items()}


def gate_channels(
    raw: Mapping[str, Sequence[str]],
    facts: Mapping[str, ChunkFacts],
    access: ReadAccess,
    judged: Verdicts | None = None,
) -> tuple[dict[str, list[str]], list[TraceLine]]:
    """Each channel's candidates that pass every gate (in the channel's order), and a trace
    line for every decision that may be told: confidential refusals leave none. `judged`:
    the `verdicts` on `facts`, when already known."""
    judged = verdicts(facts, access) if judged is None else judged
    trace: list[TraceLine] = []
    ranked: dict[str, list[str]] = {}
    for channel, ids in raw.items():
        kept: list[str] = []
        for chunk_id in ids:
            if chunk_id not in facts:  # the index still had it; Postgres no longer does
                trace.append(TraceLine(stage=channel, decision="dropped", reason="not in Postgres"))
                continue
            refused = judged[chunk_id]
            if refused is None:
                kept.append(chunk_id)
                reason = f"rank {len(kept)}; passed every gate"
                trace.append(
                    TraceLine(stage=channel, chunk_id=chunk_id, decision="admitted", reason=reason)
                )
            elif refused[0] not in CONFIDENTIAL:
                trace.append(
                    TraceLine(
                        stage=channel, chunk_id=chunk_id, decision="refused", reason=refused[1]
                    )
                )
        ranked[channel] = kept
        trace.append(TraceLine(stage=channel, decision="ranked", reason=f"{len(kept)} admitted"))
    return ranked, trace


def highlights_of(chunk: Chunk, query: str) -> list[Highlight]:
    return [
        Highlight(start=s, end=e, term=t)
        for s, e, t in textual.highlights(chunk.text, textual.terms(query))
    ]


def top_chunks(request: SearchRequest, ranked: Ranked) -> list[Chunk]:
    """The chunks a search answers with, best first."""
    return [ranked.facts[chunk_id].chunk for chunk_id, _, _ in ranked.fused[: request.limit]]


def search_response(request: SearchRequest, ranked: Ranked) -> SearchResponse:
    hits = []
    for position, (chunk_id, score, channels) in enumerate(ranked.fused[: request.limit], 1):
        facts = ranked.facts[chunk_id]
        c = facts.chunk
        hits.append(
            Hit(
                **described(facts),
                rank=position,
                score=round(score, 8),
                channels=channels,
                anchor=anchor_of(c),
                text=c.text,
                highlights=highlights_of(c, request.query),
                graph_path=list(ranked.paths.get(chunk_id, ())),
            )
        )
    return SearchResponse(
        as_of=ranked.access.as_of,
        known_at=ranked.access.known_at,
        hits=hits,
        degraded=ranked.degraded,
        trace=ranked.trace if request.trace else None,
    )
