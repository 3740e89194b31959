"""Flags on pack items: possible contradictions, superseded_by and relation conflicts (pure).

A flag annotates, never removes; its evidence names admitted chunks only (the edges come
from the snapshot with admissible evidence).
"""

from __future__ import annotations

from collections.abc import Sequence

from govindex.core.ports import EdgeFact
from reader.models import Flag, PackItem


def doc_keys(items: Sequence[PackItem]) -> list[str]:
    """The documents the items come from, as `tenant/source/doc` keys."""
    return sorted({f"{i.anchor.tenant}/{i.anchor.source_id}/{i.anchor.doc_id}" for i in items})


def _entity(item: PackItem) -> str:
    return f"document:{item.anchor.source_id}/{item.anchor.doc_id}"


def flag_contradictions(items: list[PackItem], pairs: Sequence[tuple[int, int]]) -> list[PackItem]:
    """Both items of each near-duplicate pair whose numbers or negations differ."""
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


def flag_relations(items: list[PackItem], edges: Sequence[EdgeFact]) -> list[PackItem]:
    """superseded_by (a SUPERSEDES edge valid at as_of) and relation conflicts (a subject
    with two objects of a single-valued relation at as_of)."""
    if not items:
        return items
    flags: dict[str, list[Flag]] = {}
    for key, flag in [*_superseded(items, edges), *_conflicts(items, edges)]:
        flags.setdefault(key, []).append(flag)
    return [
        i.model_copy(update={"flags": [*i.flags, *flags.get(i.key, [])]}) if i.key in flags else i
        for i in items
    ]


def _superseded(items: Sequence[PackItem], edges: Sequence[EdgeFact]) -> list[tuple[str, Flag]]:
    keys_of: dict[str, list[str]] = {}
    for item in items:
        keys_of.setdefault(_entity(item), []).append(item.key)
    found: list[tuple[str, Flag]] = []
    for e in edges:
        if e.relation == "SUPERSEDES" and e.object in keys_of:
            flag = Flag(
                kind="superseded_by",
                detail=f"{e.subject} supersedes {e.object}",
                evidence=[e.evidence_chunk_id],
                items=sorted(keys_of.get(e.subject, [])),
            )
            found += [(key, flag) for key in keys_of[e.object]]
    return found


def _conflicts(items: Sequence[PackItem], edges: Sequence[EdgeFact]) -> list[tuple[str, Flag]]:
    owners: dict[str, dict[str, str]] = {}  # subject -> owner -> its first evidence chunk
    for e in edges:
        if e.relation == "OWNED_BY":
            owners.setdefault(e.subject, {}).setdefault(e.object, e.evidence_chunk_id)
    found: list[tuple[str, Flag]] = []
    for subject, objects in owners.items():
        if len(objects) < 2:
            continue
        involved = [
            i.key
            for i in items
            if any(edge.subject == _entity(i) and edge.object == subject for edge in edges)
            or i.anchor.chunk_id in objects.values()
        ]
        flag = Flag(
            kind="relation_conflict",
            detail=f"{subject} OWNED_BY {', '.join(sorted(objects))} at as_of",
            evidence=sorted(set(objects.values())),
            items=sorted(involved),
        )
        found += [(key, flag) for key in involved]
    return found
