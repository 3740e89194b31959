"""The indexer's decisions, as pure functions of the facts.

See docs/design/guarantees.md (#order-guard, #tombstones-win, #same-content-same-chunks)
and docs/design/deletion.md.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from govindex.core.ports import DocumentState
from indexer.decisions import Incoming, decide_change, decide_deletion, lost_principals

HASH_A = "sha256:" + "a" * 64
HASH_B = "sha256:" + "b" * 64


def state(
    last: int = 3,
    *,
    active: bool = True,
    content_hash: str | None = HASH_A,
    parser: tuple[str, str] | None = ("markdown", "2.0.0"),
    principals: frozenset[str] = frozenset({"group:eng", "group:sre"}),
) -> DocumentState:
    return DocumentState(
        active=active,
        last_sequence=last,
        current_version_id="v3" if active else None,
        current_content_hash=content_hash if active else None,
        current_parser=parser if active else None,
        current_principals=principals if active else frozenset(),
    )


def incoming(
    sequence: int = 4,
    *,
    content_hash: str = HASH_A,
    parser_version: str = "2.0.0",
    acl: tuple[str, ...] = ("group:eng", "group:sre"),
    has_chunks: bool = True,
) -> Incoming:
    return Incoming(sequence, content_hash, "markdown", parser_version, acl, has_chunks)


def test_an_event_already_claimed_is_a_duplicate_whatever_its_sequence() -> None:
    assert decide_change(False, None, incoming()).outcome == "duplicate"
    assert decide_change(False, state(last=1), incoming(sequence=9)).outcome == "duplicate"
    assert decide_deletion(False, state(), 9) == "duplicate"


def test_a_first_version_of_an_unknown_document_is_indexed() -> None:
    decision = decide_change(True, None, incoming(sequence=1))
    assert decision.outcome == "indexed"
    assert decision.keep_version is None and decision.lost_principals == ()


def test_an_equal_or_older_sequence_is_stale() -> None:
    assert decide_change(True, state(last=4), incoming(sequence=4)).outcome == "stale"
    assert decide_change(True, state(last=4), incoming(sequence=2)).outcome == "stale"


def test_a_late_update_behind_a_tombstone_is_stale_and_a_newer_one_recreates() -> None:
    deleted = state(last=5, active=False)
    assert decide_change(True, deleted, incoming(sequence=5)).outcome == "stale"
    assert decide_change(True, deleted, incoming(sequence=3)).outcome == "stale"
    # Same bytes as the version before the deletion: still a new version, not metadata.
    recreated = decide_change(True, deleted, incoming(sequence=6))
    assert recreated.outcome == "indexed" and recreated.keep_version is None


def test_same_content_and_parser_updates_metadata_only_and_keeps_the_version() -> None:
    decision = decide_change(True, state(), incoming())
    assert decision.outcome == "metadata_updated"
    assert decision.keep_version == "v3"


def test_new_content_or_a_new_parser_version_is_a_new_version() -> None:
    assert decide_change(True, state(), incoming(content_hash=HASH_B)).outcome == "indexed"
    assert decide_change(True, state(), incoming(parser_version="2.1.0")).outcome == "indexed"


def test_principals_dropped_from_the_acl_are_lost_in_both_kinds_of_change() -> None:
    narrowed = incoming(acl=("group:eng",))
    assert decide_change(True, state(), narrowed).lost_principals == ("group:sre",)
    changed = incoming(acl=("group:eng",), content_hash=HASH_B)
    assert decide_change(True, state(), changed).lost_principals == ("group:sre",)
    widened = incoming(acl=("group:eng", "group:sre", "group:ops"))
    assert decide_change(True, state(), widened).lost_principals == ()


def test_a_version_without_chunks_revokes_nobody() -> None:
    assert lost_principals({"group:sre"}, incoming(acl=(), has_chunks=False)) == ()


def test_a_stale_event_revokes_nobody() -> None:
    decision = decide_change(True, state(last=9), incoming(sequence=4, acl=()))
    assert decision.outcome == "stale" and decision.lost_principals == ()


def test_a_deletion_is_recorded_even_for_a_document_never_seen() -> None:
    assert decide_deletion(True, None, 1) == "tombstoned"
    assert decide_deletion(True, state(last=3), 4) == "tombstoned"
    assert decide_deletion(True, state(last=4), 4) == "stale"


@given(
    last=st.integers(min_value=0, max_value=50),
    sequence=st.integers(min_value=1, max_value=60),
    active=st.booleans(),
    same_hash=st.booleans(),
)
def test_the_order_guard_applies_exactly_the_events_newer_than_the_document(
    last: int, sequence: int, active: bool, same_hash: bool
) -> None:
    held = None if last == 0 else state(last=last, active=active)
    event = incoming(sequence=sequence, content_hash=HASH_A if same_hash else HASH_B)
    outcome = decide_change(True, held, event).outcome
    assert (outcome == "stale") == (sequence <= last)
    assert (decide_deletion(True, held, sequence) == "stale") == (sequence <= last)
    if outcome == "metadata_updated":
        assert held is not None and held.active and same_hash
