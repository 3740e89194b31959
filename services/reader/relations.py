"""Relations at a moment (pure): the edges of one entity, each gated by the chunk that
states it, with the edges that contradict it.

An edge is as visible as its evidence: one whose chunk the caller may not see at as_of
(any gate, integrity included) is not returned and not counted. Two edges of a relation a
subject holds one object of at a time (two owners at once) are both returned, each naming
the other in `contradicts`; neither is dropped or preferred.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from govindex.core.ports import ChunkFacts, EdgeRow, ReadAccess
from govindex_client._types import SINGLE_VALUED, stored_relation
from reader.gates import refusal
from reader.manifest import anchor_of
from reader.models import RelationEdge, RelationsRequest, RelationsResponse


def asked(request: RelationsRequest) -> tuple[str | None, bool, bool]:
    """The stored relation to read, and whether to read the entity's outgoing and incoming
    edges: an inverse name (OWNS) reads its relation backwards."""
    if request.relation is None:
        return None, request.direction != "in", request.direction != "out"
    relation, backwards = stored_relation(request.relation)
    if backwards:  # OWNS out of a team = OWNED_BY into it
        flipped = {"out": "in", "in": "out", "both": "both"}[request.direction]
        return relation, flipped != "in", flipped != "out"
    return relation, request.direction != "in", request.direction != "out"


MAX_PEER_SUBJECTS = 50  # subjects whose other edges are read to mark contradictions
MAX_PEER_EDGES = 50


def peer_queries(entity: str, rows: Sequence[EdgeRow]) -> list[tuple[str, str]]:
    """(subject, relation) whose edges to other objects may contradict a returned edge
    into `entity`: asked from a team, its OWNED_BY edges' services may have other owners
    at the same moment, which the team's own edges cannot show."""
    wanted = {
        (r.subject, r.relation)
        for r in rows
        if r.relation in SINGLE_VALUED and r.object == entity and r.subject != entity
    }
    return sorted(wanted)[:MAX_PEER_SUBJECTS]


def _visible(
    rows: Sequence[EdgeRow], facts: Mapping[str, ChunkFacts], access: ReadAccess
) -> list[EdgeRow]:
    return [
        r
        for r in rows
        if (found := facts.get(r.evidence_chunk_id)) is not None
        and found.chunk.tenant_id == access.tenant_id
        and refusal(found, access) is None
    ]


def relations_response(
    request: RelationsRequest,
    access: ReadAccess,
    rows: Sequence[EdgeRow],
    facts: Mapping[str, ChunkFacts],
    peers: Sequence[EdgeRow] = (),
) -> RelationsResponse:
    """The visible edges, each marked with the visible edges it contradicts: among those
    returned and the `peers` (the same subjects' other edges of a single-valued relation,
    as visible to the caller as any edge, but not returned themselves)."""
    visible = _visible(rows, facts, access)
    returned = {r.edge_id for r in visible}
    others = [r for r in _visible(peers, facts, access) if r.edge_id not in returned]
    against = contradictions([*visible, *others])
    edges = [
        RelationEdge(
            edge_id=r.edge_id,
            subject=r.subject,
            relation=r.relation,
            object=r.object,
            direction="out" if r.subject == request.entity else "in",
            valid_from=r.valid_from,
            valid_to=r.valid_to,
            recorded_at=r.recorded_at,
            source_version=r.source_version,
            event_time=r.event_time,
            confidence=r.confidence,
            method=r.method,
            unresolved=r.unresolved,
            evidence=anchor_of(facts[r.evidence_chunk_id].chunk),
            contradicts=against.get(r.edge_id, []),
        )
        for r in visible
    ]
    return RelationsResponse(
        entity=request.entity, as_of=access.as_of, known_at=access.known_at, edges=edges
    )


def contradictions(rows: Sequence[EdgeRow]) -> dict[str, list[str]]:
    """For each edge of a single-valued relation, the edges from the same subject to
    another object that hold at the same moment."""
    found: dict[str, list[str]] = {}
    for r in rows:
        if r.relation not in SINGLE_VALUED:
            continue
        others = [
            o.edge_id
            for o in rows
            if o.relation == r.relation and o.subject == r.subject and o.object != r.object
        ]
        if others:
            found[r.edge_id] = sorted(others)
    return found
