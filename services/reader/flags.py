"""Conflicts among pack items, flagged on their members only (pure).

A flag annotates, never removes. It names the items in conflict (its members, each of which
carries it), the admitted chunks it rests on (the edges come from the snapshot with
admissible evidence) and a one-line hint for resolving it, so an app can tell a reader which
item to prefer instead of discarding any.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from govindex.core.ports import EdgeFact
from govindex_client.models import FlagKind
from reader.models import MAX_PINS, Flag, PackItem

# Single-valued relations: a subject with two objects of one at as_of is a conflict. The
# value names the objects in a hint.
_SINGLE_VALUED = {"OWNED_BY": "owners"}
_TRUST = {"authoritative": 0, "reviewed": 1, "untrusted": 2}  # lower is more trusted
_PREFER_VALID = "prefer the record valid at as_of, then the higher trust level"
# Entity names and doc ids may hold line breaks and C1 controls a flag's one-line fields
# refuse; a flag must never fail the pack it annotates.
_NOT_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def doc_keys(items: Sequence[PackItem]) -> list[str]:
    """The documents the items come from, as `tenant/source/doc` keys."""
    return sorted({_doc_key(i) for i in items})


def _doc_key(item: PackItem) -> str:
    return f"{item.anchor.tenant}/{item.anchor.source_id}/{item.anchor.doc_id}"


def _entity(item: PackItem) -> str:
    return f"document:{item.anchor.source_id}/{item.anchor.doc_id}"


def _line(text: str, limit: int) -> str:
    """`text` as one line of at most `limit` characters."""
    text = _NOT_ONE_LINE.sub(" ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flag(
    kind: FlagKind, detail: str, members: Iterable[str], evidence: Iterable[str], hint: str
) -> Flag:
    return Flag(
        kind=kind,
        detail=_line(detail, 1024),
        members=list(dict.fromkeys(members)),
        evidence=list(dict.fromkeys(evidence))[:MAX_PINS],
        hint=_line(hint, 512),
    )


def _put(items: list[PackItem], flag: Flag) -> list[PackItem]:
    """Each member carries the flag once; no other item does."""
    members = set(flag.members)
    return [
        i.model_copy(update={"flags": [*i.flags, flag]})
        if i.key in members and flag not in i.flags
        else i
        for i in items
    ]


def flag_contradictions(items: list[PackItem], pairs: Sequence[tuple[int, int]]) -> list[PackItem]:
    """Both items of each near-duplicate pair whose numbers or negations differ:
    `authority` when one is less trusted than the other (the hint names the more trusted
    one), else `numeric_or_negation` (which holds depends on when)."""
    for a, b in pairs:
        first, second = items[a], items[b]
        members = [first.key, second.key]
        evidence = [first.anchor.chunk_id, second.anchor.chunk_id]
        ranks = (_TRUST[first.trust_level], _TRUST[second.trust_level])
        if ranks[0] != ranks[1]:
            more, less = (first, second) if ranks[0] < ranks[1] else (second, first)
            flag = _flag(
                "authority",
                f"{less.key} ({less.trust_level}) contradicts {more.key} ({more.trust_level}):"
                " near-duplicates with different numbers or negations",
                members,
                evidence,
                f"prefer {more.key} ({more.trust_level}) over {less.key} ({less.trust_level})",
            )
        else:
            flag = _flag(
                "numeric_or_negation",
                f"{first.key} and {second.key} are near-duplicates with different numbers or"
                " negations",
                members,
                evidence,
                "check which holds at as_of: prefer the version valid then, then the higher"
                " trust level",
            )
        items = _put(items, flag)
    return items


def flag_relations(items: list[PackItem], edges: Sequence[EdgeFact]) -> list[PackItem]:
    """`superseded` (a SUPERSEDES edge valid at as_of whose object is an item's document)
    and `relation` (a subject with two objects of a single-valued relation at as_of), each
    on the items in conflict only."""
    for flag in [*_superseded(items, edges), *_relations(items, edges)]:
        items = _put(items, flag)
    return items


def _superseded(items: Sequence[PackItem], edges: Sequence[EdgeFact]) -> list[Flag]:
    keys_of: dict[str, list[str]] = {}
    for item in items:
        keys_of.setdefault(_entity(item), []).append(item.key)
    evidence: dict[tuple[str, str], list[str]] = {}  # (newer, older) -> its evidence chunks
    for e in edges:
        if e.relation == "SUPERSEDES" and e.object in keys_of and e.subject != e.object:
            evidence.setdefault((e.subject, e.object), []).append(e.evidence_chunk_id)
    found: list[Flag] = []
    for (newer, older), chunks in evidence.items():
        newer_keys = keys_of.get(newer, [])
        found.append(
            _flag(
                "superseded",
                f"{newer} supersedes {older}",
                [i.key for i in items if i.key in keys_of[older] or i.key in newer_keys],
                sorted(chunks),
                f"prefer {', '.join(newer_keys) or newer}: it supersedes {older}",
            )
        )
    return found


def _relations(items: Sequence[PackItem], edges: Sequence[EdgeFact]) -> list[Flag]:
    records: dict[tuple[str, str], list[EdgeFact]] = {}  # (subject, relation) -> its edges
    for e in edges:
        if e.relation in _SINGLE_VALUED:
            records.setdefault((e.subject, e.relation), []).append(e)
    found: list[Flag] = []
    for (subject, relation), conflicting in records.items():
        objects = sorted({e.object for e in conflicting})
        if len(objects) < 2:
            continue
        members = _carrying(items, conflicting)
        if not members:
            continue  # none of the records is in the pack: nothing of it to flag
        found.append(
            _flag(
                "relation",
                f"{subject} {relation} {', '.join(objects)} at as_of",
                members,
                sorted({e.evidence_chunk_id for e in conflicting}),
                f"{subject} has {len(objects)} {_SINGLE_VALUED[relation]} at as_of: "
                + _PREFER_VALID,
            )
        )
    return found


def _carrying(items: Sequence[PackItem], records: Sequence[EdgeFact]) -> list[str]:
    """The keys of the items that hold a record's evidence chunk (as the item or in its
    context); for a record whose chunk no item holds, the items of its document. Items that
    merely mention the subject are not in conflict."""
    keys: set[str] = set()
    for e in records:
        holding = {
            i.key
            for i in items
            if i.anchor.chunk_id == e.evidence_chunk_id
            or any(h.anchor.chunk_id == e.evidence_chunk_id for h in i.hydrated)
        }
        keys |= holding or {i.key for i in items if _doc_key(i) == e.doc_key}
    return [i.key for i in items if i.key in keys]


def conflicts(items: Sequence[PackItem]) -> list[Flag]:
    """Every distinct flag of the items once, in first-seen order (a flag is on each of its
    members; the manifest lists each conflict once)."""
    found: list[Flag] = []
    for item in items:
        for flag in item.flags:
            if flag not in found:
                found.append(flag)
    return found
