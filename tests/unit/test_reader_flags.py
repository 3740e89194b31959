"""Pack flags on their own: each conflict on its members and nothing else, with its kind,
evidence and resolution hint; CJK negations make near-duplicates differ."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from govindex.core.ports import EdgeFact
from reader.flags import conflicts, doc_keys, flag_contradictions, flag_relations
from reader.models import Anchor, Hydrated, PackItem
from reader.text import claims_differ

T0 = datetime(2025, 1, 1, tzinfo=UTC)
PREFER_VALID = "prefer the record valid at as_of, then the higher trust level"


def anchor(chunk_id: str, doc_id: str) -> Anchor:
    return Anchor(
        chunk_id=chunk_id,
        tenant="acme",
        source_id="src",
        doc_id=doc_id,
        version_id=f"v-{doc_id}",
        sequence=1,
        source_version="abc123",
        content_hash=f"h-{chunk_id}",
        locator=f"{doc_id}#x",
        heading_path=[],
        char_start=0,
        char_end=10,
        line_start=1,
        line_end=2,
    )


def described(trust_level: str = "reviewed") -> dict[str, Any]:
    return {
        "kind": "section",
        "valid_from": T0,
        "valid_to": None,
        "observed_at": T0,
        "recorded_at": T0,
        "trust_level": trust_level,
        "classification": "internal",
    }


def item(
    position: int,
    chunk_id: str,
    doc_id: str,
    *,
    text: str = "Replay the batch.\n",
    trust_level: str = "reviewed",
    hydrated: tuple[str, ...] = (),
) -> PackItem:
    """The item cited as S<position>, its chunk `chunk_id` of `src/<doc_id>`, with the
    chunks `hydrated` (of the same document) as its parent."""
    return PackItem(
        key=f"S{position}",
        rank=position,
        score=1 / (60 + position),
        channels={"fulltext": position},
        anchor=anchor(chunk_id, doc_id),
        text=text,
        tokens=5,
        highlights=[],
        hydrated=[
            Hydrated(
                relation="parent", anchor=anchor(h, doc_id), text="# T\n", tokens=1, **described()
            )
            for h in hydrated
        ],
        **described(trust_level),
    )


def edge(subject: str, relation: str, obj: str, doc_id: str, evidence: str) -> EdgeFact:
    return EdgeFact(subject, relation, obj, f"acme/src/{doc_id}", evidence)


def flagged(items: list[PackItem]) -> dict[str, list[tuple[str, list[str]]]]:
    """Each flagged item's flags, as (kind, members)."""
    return {i.key: [(f.kind, f.members) for f in i.flags] for i in items if i.flags}


# --- relation conflicts -----------------------------------------------------------------


def test_two_owner_records_flag_only_the_two_items_that_carry_them() -> None:
    # Eight items, seven of them from runbooks governing the ledger; two runbooks also
    # record its owner, and the two owners overlap at as_of.
    items = [item(n, f"c{n}", f"runbooks/r{n}.md") for n in range(1, 9)]
    edges = [
        edge(f"document:src/runbooks/r{n}.md", "GOVERNS", "service:ledger", f"r{n}.md", f"c{n}")
        for n in range(1, 8)
    ]
    edges += [
        edge("service:ledger", "OWNED_BY", "team:a", "runbooks/r2.md", "c2"),
        edge("service:ledger", "OWNED_BY", "team:b", "runbooks/r5.md", "c5"),
    ]
    result = flag_relations(items, edges)
    assert flagged(result) == {
        "S2": [("relation", ["S2", "S5"])],
        "S5": [("relation", ["S2", "S5"])],
    }
    (flag,) = result[1].flags
    assert flag == result[4].flags[0]  # one conflict, the same flag on each member
    assert flag.detail == "service:ledger OWNED_BY team:a, team:b at as_of"
    assert flag.evidence == ["c2", "c5"]
    assert flag.hint == f"service:ledger has 2 owners at as_of: {PREFER_VALID}"
    one_owner = [e for e in edges if e.object != "team:b"]
    assert flagged(flag_relations(items, one_owner)) == {}
    same_owner = [*one_owner, edge("service:ledger", "OWNED_BY", "team:a", "r5.md", "c5")]
    assert flagged(flag_relations(items, same_owner)) == {}


def test_an_owner_record_outside_the_items_flags_the_item_holding_it_or_its_document() -> None:
    held = item(1, "s1", "runbooks/old.md", hydrated=("title-old",))  # the record as context
    sibling = item(2, "s2", "runbooks/old.md")  # same document, another chunk
    other = item(3, "s3", "runbooks/new.md")  # the record's chunk is not in the pack
    also_new = item(4, "s4", "runbooks/new.md")
    unrelated = item(5, "s5", "runbooks/misc.md")
    items = [held, sibling, other, also_new, unrelated]
    edges = [
        edge("service:ledger", "OWNED_BY", "team:a", "runbooks/old.md", "title-old"),
        edge("service:ledger", "OWNED_BY", "team:b", "runbooks/new.md", "title-new"),
    ]
    (flag,) = {
        f.model_dump_json(): f for i in flag_relations(items, edges) for f in i.flags
    }.values()
    assert flag.members == ["S1", "S3", "S4"]  # not S2: S1 holds its document's record
    assert flag.evidence == ["title-new", "title-old"]
    outside = [*edges[:1], edge("service:ledger", "OWNED_BY", "team:b", "elsewhere.md", "x")]
    assert flagged(flag_relations(items, outside)) == {"S1": [("relation", ["S1"])]}
    (kept,) = flag_relations(items, outside)[0].flags
    assert kept.evidence == ["title-old", "x"]  # the record it conflicts with, admitted
    nowhere = [edge("service:ledger", "OWNED_BY", t, "elsewhere.md", t) for t in ("a", "b")]
    assert flagged(flag_relations(items, nowhere)) == {}
    assert flag_relations([], edges) == []


def test_a_flag_stays_one_line_whatever_the_entity_names_hold() -> None:
    items = [item(1, "c1", "a.md"), item(2, "c2", "b.md")]
    subject = "service:led\u2028ger\n" + "x" * 2000
    edges = [
        edge(subject, "OWNED_BY", "team:a", "a.md", "c1"),
        edge(subject, "OWNED_BY", "team:b", "b.md", "c2"),
    ]
    (flag,) = flag_relations(items, edges)[0].flags
    assert flag.members == ["S1", "S2"]
    assert flag.detail.startswith("service:led ger ") and len(flag.detail) == 1024
    assert len(flag.hint) == 512


# --- superseded -------------------------------------------------------------------------


SUPERSEDES = edge(
    "document:src/runbooks/new.md",
    "SUPERSEDES",
    "document:src/runbooks/old.md",
    "runbooks/new.md",
    "new-title",
)


def test_superseded_is_on_the_superseded_and_the_superseding_items_only() -> None:
    items = [
        item(1, "o1", "runbooks/old.md"),
        item(2, "n1", "runbooks/new.md"),
        item(3, "x1", "runbooks/misc.md"),
        item(4, "o2", "runbooks/old.md"),
    ]
    result = flag_relations(items, [SUPERSEDES])
    members = ["S1", "S2", "S4"]
    assert flagged(result) == {k: [("superseded", members)] for k in members}
    flag = result[0].flags[0]
    assert flag.evidence == ["new-title"]
    assert flag.detail == "document:src/runbooks/new.md supersedes document:src/runbooks/old.md"
    assert flag.hint == "prefer S2: it supersedes document:src/runbooks/old.md"
    without_new = [i for i in items if i.anchor.doc_id != "runbooks/new.md"]
    alone = flag_relations(without_new, [SUPERSEDES])
    assert flagged(alone) == {
        "S1": [("superseded", ["S1", "S4"])],
        "S4": [("superseded", ["S1", "S4"])],
    }
    assert alone[0].flags[0].hint == (
        "prefer document:src/runbooks/new.md: it supersedes document:src/runbooks/old.md"
    )
    only_new = [i for i in items if i.anchor.doc_id != "runbooks/old.md"]
    assert flagged(flag_relations(only_new, [SUPERSEDES])) == {}  # nothing superseded here
    assert doc_keys(items) == [f"acme/src/runbooks/{n}.md" for n in ("misc", "new", "old")]


# --- contradictions ---------------------------------------------------------------------


def test_a_contradiction_between_equals_is_numeric_or_negation_on_the_pair_only() -> None:
    items = [
        item(1, "a", "a.md", text="Rotate every 90 days.\n"),
        item(2, "b", "b.md"),
        item(3, "c", "c.md", text="Rotate every 30 days.\n"),
    ]
    result = flag_contradictions(items, [(0, 2)])
    assert flagged(result) == {
        "S1": [("numeric_or_negation", ["S1", "S3"])],
        "S3": [("numeric_or_negation", ["S1", "S3"])],
    }
    flag = result[0].flags[0]
    assert flag == result[2].flags[0] and flag.evidence == ["a", "c"]
    assert flag.hint == (
        "check which holds at as_of: prefer the version valid then, then the higher trust level"
    )


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_a_less_trusted_item_contradicting_a_more_trusted_one_is_authority(
    order: tuple[int, int],
) -> None:
    items = [
        item(1, "a", "a.md", trust_level="authoritative"),
        item(2, "b", "b.md", trust_level="untrusted"),
    ]
    result = flag_contradictions(items, [order])
    assert [(f.kind, f.members) for i in result for f in i.flags] == [
        ("authority", [items[order[0]].key, items[order[1]].key])
    ] * 2
    flag = result[0].flags[0]
    assert flag.hint == "prefer S1 (authoritative) over S2 (untrusted)"
    assert flag.detail.startswith("S2 (untrusted) contradicts S1 (authoritative)")
    reviewed = [items[0], item(2, "b", "b.md", trust_level="reviewed")]
    (between,) = flag_contradictions(reviewed, [order])[1].flags
    assert between.kind == "authority"
    assert between.hint == "prefer S1 (authoritative) over S2 (reviewed)"


# --- the conflicts of a pack ------------------------------------------------------------


def test_conflicts_lists_each_flag_once_in_first_seen_order() -> None:
    items = [
        item(1, "o1", "runbooks/old.md", text="Rotate every 90 days.\n"),
        item(2, "n1", "runbooks/new.md"),
        item(3, "x1", "runbooks/misc.md", text="Rotate every 30 days.\n"),
        item(4, "y1", "runbooks/y.md"),
    ]
    owners = [
        edge("service:ledger", "OWNED_BY", "team:a", "runbooks/new.md", "n1"),
        edge("service:ledger", "OWNED_BY", "team:b", "runbooks/y.md", "y1"),
    ]
    result = flag_relations(flag_contradictions(items, [(0, 2)]), [SUPERSEDES, *owners])
    assert sum(len(i.flags) for i in result) == 6  # three conflicts, two members each
    listed = conflicts(result)
    assert [(f.kind, f.members) for f in listed] == [
        ("numeric_or_negation", ["S1", "S3"]),
        ("superseded", ["S1", "S2"]),
        ("relation", ["S2", "S4"]),
    ]
    assert flag_relations(result, [SUPERSEDES]) == result  # a flag is on a member once
    assert conflicts([]) == []


# --- negations --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("服务已重启。", "服务未重启。"),  # Chinese: 未 (not yet)
        ("缓存可以清除。", "缓存不可以清除。"),  # 不
        ("告警已经触发。", "告警没有触发。"),  # 没
        ("这是主节点。", "这非主节点。"),  # 非
        ("サービスを再起動した。", "サービスを再起動しない。"),  # Japanese: ない
        ("서비스를 재시작했다.", "서비스를 재시작하지 않았다."),  # Korean: 않
        ("Restart the service.", "Do not restart the service."),
        ("Rotate every 90 days.", "Rotate every 30 days."),
    ],
)
def test_a_negation_or_a_number_one_text_lacks_makes_near_duplicates_differ(a: str, b: str) -> None:
    assert claims_differ(a, b) and claims_differ(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("服务未重启。", "服务仍未重启!"),  # the same negation, reworded
        ("非常重要:先备份。", "非常重要:请先备份。"),  # 非 inside a word both texts share
        ("再起動しない。", "再起動はしない。"),
        ("Do not restart the service.", "Do NOT restart that service!"),
        ("Rotate every 90 days.", "Rotate it every 90 days."),
    ],
)
def test_texts_with_the_same_numbers_and_negations_claim_the_same(a: str, b: str) -> None:
    assert not claims_differ(a, b)
