"""The selection's diversity (pure): maximal marginal relevance, minimum distinct documents
and sources, a cap per parent; the minimums never leave a slot empty that rank order
would fill."""

from __future__ import annotations

from typing import Any

from govindex.core.records import Chunk
from reader.selection import select
from tests.unit.test_reader_packing import chunk, doc, ranked, request, sized

BASE = 0xF0F0_F0F0_F0F0_F0F0


def _near(bits: int) -> int:
    """A SimHash `bits` bits away from BASE."""
    return BASE ^ ((1 << bits) - 1)


def _in(doc_id: str, chunk_id: str, **fields: Any) -> Chunk:
    return chunk(chunk_id, sized(chunk_id, 20), **doc(doc_id), **fields)


def _ids(**fields: Any) -> list[str]:
    return [i.anchor.chunk_id for i in fields.pop("chosen").items]


def test_mmr_passes_over_a_close_copy_for_a_different_candidate() -> None:
    first = _in("a.md", "a1", simhash=BASE)
    close = _in("b.md", "b1", simhash=_near(6))  # 6 bits away: not a duplicate (3), close
    far = _in("c.md", "c1", simhash=BASE ^ 0xFFFF_FFFF)  # 32 bits away
    candidates = ranked(first, close, far)
    by_rank = select(request(budget={"max_items": 2}), candidates, {})
    assert _ids(chosen=by_rank) == ["a1", "b1"]
    diverse = request(budget={"max_items": 2}, diversity={"mmr_lambda": 0.3})
    assert _ids(chosen=select(diverse, candidates, {})) == ["a1", "c1"]
    plain = request(budget={"max_items": 2}, diversity={"mmr_lambda": 1.0})
    assert _ids(chosen=select(plain, candidates, {})) == ["a1", "b1"]  # λ = 1: rank order


def test_min_documents_and_sources_keep_slots_for_others() -> None:
    a = [_in("a.md", f"a{n}") for n in range(1, 4)]
    b = _in("b.md", "b1", source_id="other")
    c = _in("c.md", "c1")
    candidates = ranked(*a, b, c)
    assert _ids(chosen=select(request(budget={"max_items": 3}), candidates, {})) == [
        "a1",
        "a2",
        "a3",
    ]
    three = request(budget={"max_items": 3}, diversity={"min_documents": 3})
    chosen = select(three, candidates, {})
    assert _ids(chosen=chosen) == ["a1", "b1", "c1"]
    deferred = [t for t in chosen.trace if t.decision == "deferred"]
    assert {t.chunk_id for t in deferred} == {"a2", "a3"}
    assert all("min_documents" in t.reason for t in deferred)
    two_sources = request(budget={"max_items": 2}, diversity={"min_sources": 2})
    assert _ids(chosen=select(two_sources, candidates, {})) == ["a1", "b1"]


def test_a_minimum_that_cannot_be_met_leaves_no_slot_empty() -> None:
    candidates = ranked(_in("a.md", "a1"), _in("a.md", "a2"), _in("b.md", "b1"))
    asked = request(budget={"max_items": 3}, diversity={"min_documents": 3})
    assert sorted(_ids(chosen=select(asked, candidates, {}))) == ["a1", "a2", "b1"]


def test_max_per_parent_caps_the_items_under_one_section() -> None:
    steps = [_in("a.md", f"s{n}", parent_id="section-1") for n in range(1, 4)]
    other = _in("b.md", "o1", parent_id="section-9")
    asked = request(budget={"max_items": 4}, diversity={"max_per_parent": 1})
    chosen = select(asked, ranked(*steps, other), {})
    assert _ids(chosen=chosen) == ["s1", "o1"]
    capped = {o.chunk_id: o for o in chosen.left_out if o.stage == "budget"}
    assert set(capped) == {"s2", "s3"}
    assert {o.reason for o in capped.values()} == {"max_per_parent reached"}
