"""Packing on its own: hydration, dedup, budget, flags and manifest pins, as pure functions
over facts read beforehand (issue 20: the read service in rooms)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from govindex.core.hashing import sha256_hex
from govindex.core.ports import ChunkFacts
from govindex.core.records import Chunk
from reader.access import read_access
from reader.flags import flag_contradictions
from reader.manifest import anchor_of, judge_pin, pack_hash, pin_from_anchor, pins
from reader.models import Hydration, PackRequest, Versions
from reader.packing import manifest_of
from reader.retrieval import Ranked
from reader.selection import hydrate, near_duplicate, select
from tests.support.builders import manifest, version_plan

T0 = datetime(2025, 1, 1, tzinfo=UTC)
AS_OF = datetime(2025, 6, 1, tzinfo=UTC)
ACCESS = read_access(
    tenant="acme", principals=["group:eng"], scopes=[], purpose="support", as_of=AS_OF
)
_STORED = version_plan(manifest("src", "acme"), "runbooks/a.md", 1, "# A\n\nalpha\n").chunks[0]


def chunk(chunk_id: str, text: str, **fields: Any) -> Chunk:
    """A stored chunk (of runbooks/a.md unless told) whose hash matches its text, with a
    SimHash of its own (far from every other's unless told)."""
    simhash = int(hashlib.sha256(chunk_id.encode()).hexdigest()[:16], 16)
    return _STORED.model_copy(
        update={
            "chunk_id": chunk_id,
            "text": text,
            "content_hash": sha256_hex(text),
            "valid_from": T0,
            "simhash": simhash,
            **fields,
        }
    )


def sized(name: str, tokens: int) -> str:
    """A text of exactly `tokens` estimated tokens (four characters each)."""
    return f"{name} failover replica notes {'x' * 4 * tokens}"[: 4 * tokens]


def facts(c: Chunk, **flags: bool) -> ChunkFacts:
    base = {
        "source_enabled": True,
        "purge_tombstoned": False,
        "tombstoned": False,
        "content_purged": False,
        "superseded": False,
    }
    return ChunkFacts(chunk=c, **{**base, **flags})


def around(*chunks: Chunk) -> dict[str, ChunkFacts]:
    return {c.chunk_id: facts(c) for c in chunks}


def ranked(*hits: Chunk) -> Ranked:
    """Hits fused in this order, every one admitted."""
    fused = [(c.chunk_id, 1 / (60 + n), {"fulltext": n}) for n, c in enumerate(hits, 1)]
    return Ranked(ACCESS, fused, around(*hits), {}, [])


def request(**fields: Any) -> PackRequest:
    body = {
        "tenant": "acme",
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "query": "failover replica",
        "as_of": AS_OF.isoformat(),
        "hydration": {"neighbours": 0, "parent": False},
        **fields,
    }
    return PackRequest.model_validate(body)


def doc(name: str) -> dict[str, str]:
    return {"doc_id": name, "locator": f"{name}#x"}


# A document: its title chunk P, then sections S1..S4 linked previous/next, P their parent.
P = chunk("p", "# Runbook\n", next_id="s1")
S1 = chunk("s1", "## One\n\nFirst step.\n", parent_id="p", next_id="s2")
S2 = chunk("s2", "## Two\n\nSecond step.\n", parent_id="p", prev_id="s1", next_id="s3")
S3 = chunk("s3", "## Three\n\nThird step.\n", parent_id="p", prev_id="s2", next_id="s4")
S4 = chunk("s4", "## Four\n\nFourth step.\n", parent_id="p", prev_id="s3")
DOCUMENT = around(P, S1, S2, S3, S4)


# --- hydration ------------------------------------------------------------------------


def test_hydration_takes_the_parent_then_neighbours_on_each_side_nearest_first() -> None:
    both = Hydration(parent=True, neighbours=2)
    assert hydrate(S3, both, ACCESS, DOCUMENT) == [
        ("parent", P),
        ("previous", S2),
        ("previous", S1),
        ("next", S4),
    ]
    assert hydrate(S3, Hydration(parent=False, neighbours=1), ACCESS, DOCUMENT) == [
        ("previous", S2),
        ("next", S4),
    ]
    assert hydrate(S3, Hydration(parent=False, neighbours=0), ACCESS, DOCUMENT) == []


def test_a_neighbour_that_fails_a_gate_ends_the_walk_on_its_side() -> None:
    both = Hydration(parent=True, neighbours=2)
    tampered = S2.model_copy(update={"text": "## Two\n\nEdited behind our back.\n"})
    other_version = S2.model_copy(update={"version_id": "another-version"})
    wider_acl = S2.model_copy(update={"acl": ("group:eng", "group:hr")})
    hr_only = S2.model_copy(update={"acl": ("group:hr",)})
    for refused in (tampered, other_version, wider_acl, hr_only):
        context = hydrate(S3, both, ACCESS, {**DOCUMENT, "s2": facts(refused)})
        assert context == [("parent", P), ("next", S4)], refused
    deleted = {**DOCUMENT, "s2": facts(S2, purge_tombstoned=True)}
    assert hydrate(S3, both, ACCESS, deleted) == [("parent", P), ("next", S4)]
    unknown = {k: v for k, v in DOCUMENT.items() if k not in ("s2", "p")}
    assert hydrate(S3, both, ACCESS, unknown) == [("next", S4)]


# --- dedup ----------------------------------------------------------------------------


def test_a_copy_of_an_item_corroborates_it_instead_of_taking_a_place() -> None:
    original = chunk("a", "Rotate the certificate.\n", **doc("a.md"))
    copy = chunk("b", "Rotate the certificate.\n", **doc("b.md"))
    chosen = select(request(trace=True), ranked(original, copy), {})
    assert [i.anchor.chunk_id for i in chosen.items] == ["a"]
    assert chosen.items[0].corroboration == [anchor_of(copy)]
    assert copy in chosen.held  # its anchor is in the pack: a change to it must evict
    folded = [(t.stage, t.chunk_id, t.decision, t.reason) for t in chosen.trace]
    assert ("dedup", "b", "folded", "same content hash as S1") in folded


def test_near_duplicates_fold_when_they_claim_the_same_and_are_flagged_when_not() -> None:
    same = {"simhash": 0b1011}
    a = chunk("a", "Rotate the certificate every 90 days.\n", **doc("a.md"), **same)
    reworded = chunk("b", "Rotate that certificate every 90 days!\n", **doc("b.md"), **same)
    other = chunk("c", "Rotate the certificate every 30 days.\n", **doc("c.md"), simhash=0b1001)
    assert near_duplicate(other, [a.simhash], 3) == 0
    assert near_duplicate(other, [a.simhash], 0) is None  # 0 turns near-duplicates off
    chosen = select(request(dedup_threshold=3), ranked(a, reworded, other), {})
    assert [i.anchor.chunk_id for i in chosen.items] == ["a", "c"]
    assert chosen.items[0].corroboration == [anchor_of(reworded)]
    assert ("dedup", "b", "folded", "near-duplicate of S1") in [
        (t.stage, t.chunk_id, t.decision, t.reason) for t in chosen.trace
    ]
    assert chosen.contradictions == [(0, 1)]
    flagged = flag_contradictions(chosen.items, chosen.contradictions)
    assert flagged[0].flags == flagged[1].flags  # one conflict, on each of its members
    (flag,) = flagged[0].flags
    assert flag.kind == "numeric_or_negation"  # both items are equally trusted
    assert flag.members == ["S1", "S2"] and flag.evidence == ["a", "c"]
    apart = select(request(dedup_threshold=0), ranked(a, reworded, other), {})
    assert len(apart.items) == 3 and apart.contradictions == []


def test_context_never_repeats_a_content_hash_or_a_chunk_the_pack_holds() -> None:
    first = chunk("x", S1.text, **doc("x.md"))  # the same content as S1, elsewhere
    parent_and_previous = Hydration(parent=True, neighbours=1)
    p_first = S1.model_copy(update={"prev_id": "p"})  # P is its parent and its previous
    context = around(P, p_first, S2, S3, S4)
    chosen = select(
        request(hydration=parent_and_previous.model_dump()), ranked(first, S2, p_first), context
    )
    assert [i.anchor.chunk_id for i in chosen.items] == ["x", "s2"]
    assert [(h.relation, h.anchor.chunk_id) for h in chosen.items[1].hydrated] == [
        ("parent", "p"),
        ("next", "s3"),  # not S1: its content is S1 of the pack already
    ]
    assert chosen.items[0].corroboration == [anchor_of(p_first)]  # S1 itself, as a hit
    lone = select(request(hydration=parent_and_previous.model_dump()), ranked(p_first), context)
    assert [(h.relation, h.anchor.chunk_id) for h in lone.items[0].hydrated] == [
        ("parent", "p"),
        ("next", "s2"),  # P once, as its parent, not again as its previous
    ]
    hashes = [h.anchor.content_hash for i in chosen.items for h in i.hydrated]
    assert len(hashes) == len(set(hashes))
    taken = select(request(hydration={"neighbours": 1, "parent": False}), ranked(S2, S3), DOCUMENT)
    assert [i.anchor.chunk_id for i in taken.items] == ["s2"]  # S3 came as S2's context


# --- budget ---------------------------------------------------------------------------


def test_an_item_goes_without_its_context_before_it_is_skipped_for_tokens() -> None:
    hit = chunk("h", sized("hit", 10), **doc("h.md"), parent_id="hp", next_id="hn")
    parent = chunk("hp", sized("parent", 10), **doc("h.md"))
    following = chunk("hn", sized("next", 10), **doc("h.md"), prev_id="h")
    large = chunk("l", sized("large", 20), **doc("l.md"))
    small = chunk("s", sized("small", 10), **doc("s.md"))
    chosen = select(
        request(
            trace=True,
            hydration={"neighbours": 1, "parent": True},
            budget={"max_tokens": 25},
        ),
        ranked(hit, large, small),
        around(parent, following),
    )
    assert [(i.anchor.chunk_id, i.tokens, i.hydrated) for i in chosen.items] == [
        ("h", 10, []),  # 30 tokens with its context, 10 without
        ("s", 10, []),
    ]
    assert chosen.used == 20 <= 25
    decisions = [(t.stage, t.chunk_id, t.decision, t.reason) for t in chosen.trace]
    assert ("budget", "l", "skipped", "over max_tokens") in decisions
    assert ("select", "h", "selected", "S1: 10 tokens with 0 hydrated, 10 used") in decisions
    assert parent not in chosen.held and following not in chosen.held
    roomy = select(
        request(hydration={"neighbours": 1, "parent": True}, budget={"max_tokens": 60}),
        ranked(hit, large, small),
        around(parent, following),
    )
    assert [(i.key, i.tokens) for i in roomy.items] == [("S1", 30), ("S2", 20), ("S3", 10)]
    assert roomy.used == sum(i.tokens for i in roomy.items) == 60


def test_max_per_document_and_max_items_bound_the_pack() -> None:
    same_doc = [chunk(f"d{n}", f"Failover step {n}.\n") for n in range(3)]
    chosen = select(request(trace=True, budget={"max_per_document": 2}), ranked(*same_doc), {})
    assert [i.anchor.chunk_id for i in chosen.items] == ["d0", "d1"]
    assert ("budget", "d2", "skipped", "max_per_document reached") in [
        (t.stage, t.chunk_id, t.decision, t.reason) for t in chosen.trace
    ]
    apart = [chunk(f"e{n}", f"Failover note {n}.\n", **doc(f"e{n}.md")) for n in range(3)]
    capped = select(request(trace=True, budget={"max_items": 2}), ranked(*apart), {})
    assert [(i.key, i.rank) for i in capped.items] == [("S1", 1), ("S2", 2)]
    assert "e2" not in {t.chunk_id for t in capped.trace}  # never looked at


# --- the manifest ---------------------------------------------------------------------


def test_the_manifest_pins_every_item_and_its_context_and_verifies_as_built() -> None:
    pack_request = request(hydration={"neighbours": 1, "parent": True})
    items = select(pack_request, ranked(S2, chunk("z", "Elsewhere.\n", **doc("z.md"))), DOCUMENT)
    built_at = datetime(2025, 6, 1, tzinfo=UTC)
    versions = Versions(packer="govindex-packer/2", estimator="heuristic/1", embedder=None)
    built = manifest_of(pack_request, ACCESS, items.items, 7, built_at=built_at, versions=versions)
    assert (built.schema_version, built.built_at, built.versions) == (2, built_at, versions)
    assert built.pack_id and built.omissions == [] and built.conflicts == []
    assert [(m.key, m.chunk_id) for m in built.items] == [("S1", "s2"), ("S2", "z")]
    first = built.items[0]
    assert (
        first.model_dump(exclude={"key", "hydrated"}) == pin_from_anchor(anchor_of(S2)).model_dump()
    )
    assert first.doc == "acme/src/runbooks/a.md" and first.content_hash == S2.content_hash
    assert first.hydrated == [pin_from_anchor(anchor_of(c)) for c in (P, S1, S3)]
    assert (built.index_generation, built.as_of, built.tenant) == (7, AS_OF, "acme")
    assert built.pack_hash == pack_hash(built)
    changed = built.model_copy(
        update={"budget": pack_request.budget.model_copy(update={"max_items": 1})}
    )
    assert pack_hash(changed) != built.pack_hash
    pinned = pins(built)
    assert [(p.chunk_id, key) for p, key in pinned] == [
        ("s2", "S1"),
        ("p", "S1"),
        ("s1", "S1"),
        ("s3", "S1"),
        ("z", "S2"),
    ]
    known = {**DOCUMENT, "z": facts(chunk("z", "Elsewhere.\n", **doc("z.md")))}
    verdicts = [judge_pin(p, key, known[p.chunk_id], ACCESS) for p, key in pinned]
    assert {v.status for v in verdicts} == {"valid"}
