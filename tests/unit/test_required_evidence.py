"""Required evidence is selected first, within the budget, and what is missing is said
(pure: the packer's selection on built chunks)."""

from __future__ import annotations

from datetime import UTC, datetime

from reader.models import MissingEvidence, Versions
from reader.packing import manifest_of
from reader.retrieval import Ranked
from reader.selection import select
from tests.unit.test_reader_packing import ACCESS, around, chunk, doc, ranked, request, sized

DEPLOY = chunk("d1", sized("deploy", 20), evidence=("deployment_record",), **doc("deploys/a.md"))
FIRST = chunk("s1", sized("first", 20), **doc("runbooks/one.md"))
SECOND = chunk("s2", sized("second", 20), **doc("runbooks/two.md"))
BUILT = datetime(2025, 6, 2, tzinfo=UTC)
VERSIONS = Versions(packer="govindex-packer/2", estimator="heuristic/1", embedder=None)


def _wanted(kind: str, minimum: int = 1, **budget: int) -> dict[str, object]:
    return {
        "required_evidence": [{"type": kind, "min": minimum}],
        "budget": {"max_items": 2, **budget},
    }


def test_a_required_type_is_taken_first_though_it_ranks_last() -> None:
    plain = select(request(budget={"max_items": 2}), ranked(FIRST, SECOND, DEPLOY), {})
    assert [i.anchor.chunk_id for i in plain.items] == ["s1", "s2"]  # without: by rank

    asked = request(**_wanted("deployment_record"))
    chosen = select(asked, ranked(FIRST, SECOND, DEPLOY), {})
    assert [i.anchor.chunk_id for i in chosen.items] == ["d1", "s1"]
    assert chosen.items[0].evidence == ["deployment_record"] and chosen.missing == []
    made = manifest_of(asked, ACCESS, chosen.items, 1, built_at=BUILT, versions=VERSIONS)
    assert made.status == "complete" and made.missing_evidence == []
    assert [r.type for r in made.required_evidence] == ["deployment_record"]


def test_a_chunk_found_for_its_evidence_alone_can_be_taken() -> None:
    found = ranked(FIRST, SECOND)
    candidates = {**found.facts, **around(DEPLOY)}
    extra = Ranked(ACCESS, found.fused, candidates, {}, [], evidence={"deployment_record": ["d1"]})
    chosen = select(request(**_wanted("deployment_record")), extra, {})
    assert [i.anchor.chunk_id for i in chosen.items] == ["d1", "s1"]
    assert chosen.items[0].channels == {"evidence": 1}


def test_missing_evidence_says_how_much_was_found_and_why() -> None:
    none = select(request(**_wanted("root_cause", 2)), ranked(FIRST, DEPLOY), {})
    assert none.missing == [
        MissingEvidence(type="root_cause", min=2, found=0, why="none_admissible")
    ]
    made = manifest_of(
        request(**_wanted("root_cause", 2)),
        ACCESS,
        none.items,
        1,
        built_at=BUILT,
        versions=VERSIONS,
        missing=none.missing,
    )
    assert made.status == "partial" and made.missing_evidence == none.missing

    big = chunk("d2", sized("deploy", 900), evidence=("deployment_record",), **doc("deploys/b.md"))
    squeezed = select(
        request(**_wanted("deployment_record", 2, max_tokens=100)), ranked(DEPLOY, big), {}
    )
    assert [i.anchor.chunk_id for i in squeezed.items] == ["d1"]
    assert squeezed.missing == [
        MissingEvidence(type="deployment_record", min=2, found=1, why="over_budget")
    ]


def test_an_item_taken_for_evidence_is_not_taken_or_folded_again() -> None:
    chosen = select(request(**_wanted("deployment_record")), ranked(DEPLOY, FIRST), {})
    ids = [i.anchor.chunk_id for i in chosen.items]
    assert ids == ["d1", "s1"] and chosen.folded == 0
    assert not [o for o in chosen.left_out if o.chunk_id == "d1"]
