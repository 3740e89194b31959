"""Planning a batch: rounds, claims and the steps a unit of work executes (pure,
docs/design/guarantees.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from govindex.core.envelope import Envelope
from govindex.core.events import DOCUMENT_DELETED, DOCUMENT_UPDATED, DocumentDeleted
from govindex.core.ports import DocumentKey, DocumentState
from govindex.core.records import DeletionMode
from indexer.planning import (
    ApplyChange,
    PlannedEvent,
    RecordTombstone,
    Settle,
    first_claims,
    plan_change,
    plan_deletion,
    plan_round,
    purged_next,
    rounds,
)
from tests.support.builders import OTHER, TEXT, change_payload, manifest

NOW = datetime(2025, 3, 1, tzinfo=UTC)
SOURCE = manifest("docs", "acme", deletion_mode="tombstone")


def envelope(event_id: str, kind: str = DOCUMENT_UPDATED) -> Envelope:
    return Envelope(event_id, kind, "test", None, NOW, {}, {})


def change(
    position: int,
    doc_id: str,
    sequence: int,
    text: str = TEXT,
    *,
    event_id: str | None = None,
    acl: list[str] | None = None,
    content: str | None = "same as text",
) -> PlannedEvent:
    payload = change_payload("acme", "docs", doc_id, sequence, text, acl=acl)
    return plan_change(
        position,
        envelope(event_id or f"{doc_id}@{sequence}"),
        payload,
        text if content == "same as text" else content,
        SOURCE,
        generation=1,
        now=NOW,
    )


def deletion(
    position: int, doc_id: str, sequence: int, *, reason: str = "deleted_in_source"
) -> PlannedEvent:
    payload = DocumentDeleted(
        tenant_id="acme",
        source_id="docs",
        doc_id=doc_id,
        source_version=f"del{sequence}",
        sequence=sequence,
        deleted_at=NOW,
        reason=reason,
    )
    return plan_deletion(
        position, envelope(f"{doc_id}@{sequence}", DOCUMENT_DELETED), payload, SOURCE, now=NOW
    )


def held(
    last: int,
    *,
    content_hash: str | None,
    principals: set[str],
    parser: tuple[str, str] | None = None,
) -> DocumentState:
    return DocumentState(
        active=True,
        last_sequence=last,
        current_version_id="v-current",
        current_content_hash=content_hash,
        current_parser=parser,
        current_principals=frozenset(principals),
    )


def key(doc_id: str) -> DocumentKey:
    return DocumentKey("acme", "docs", doc_id)


def test_a_batch_is_cut_into_rounds_of_one_event_per_document_in_delivery_order() -> None:
    a1, b1, a2, a3, c1 = (
        change(0, "a.md", 1),
        change(1, "b.md", 1),
        change(2, "a.md", 2),
        change(3, "a.md", 3),
        change(4, "c.md", 1),
    )
    assert [[e.position for e in r] for r in rounds([a1, b1, a2, a3, c1])] == [
        [0, 1, 4],
        [2],
        [3],
    ]
    assert rounds([]) == []


def test_a_second_copy_of_an_event_in_one_batch_is_a_duplicate() -> None:
    first, copy = change(0, "a.md", 1, event_id="e1"), change(1, "a.md", 1, event_id="e1")
    by_round = rounds([first, copy])
    claimed = first_claims(by_round, {"e1"})
    assert claimed == {0}
    assert isinstance(plan_round(by_round[0], claimed, {})[0], ApplyChange)
    assert plan_round(by_round[1], claimed, {}) == [Settle(copy, "duplicate")]
    assert first_claims(by_round, set()) == frozenset()  # processed before: both duplicates


def test_an_older_version_delivered_after_a_newer_one_in_the_same_batch_is_stale() -> None:
    newer, older = change(0, "a.md", 5, OTHER), change(1, "a.md", 3)
    by_round = rounds([newer, older])
    claimed = first_claims(by_round, {"a.md@5", "a.md@3"})
    after_newer = {key("a.md"): held(5, content_hash=None, principals={"group:eng"})}
    assert plan_round(by_round[1], claimed, after_newer) == [Settle(older, "stale")]


def test_the_same_content_restamps_the_kept_version_and_names_the_lost_principals() -> None:
    event = change(0, "a.md", 4, acl=["group:eng"])
    assert event.plan is not None and event.incoming is not None
    state = held(
        3,
        content_hash=event.incoming.content_hash,
        principals={"group:eng", "x:y"},
        parser=(event.incoming.parser, event.incoming.parser_version),
    )
    (step,) = plan_round([event], {0}, {key("a.md"): state})
    assert isinstance(step, ApplyChange)
    assert step.keep_version == "v-current" and step.lost_principals == ("x:y",)
    (fresh,) = plan_round([change(0, "new.md", 1)], {0}, {})
    assert isinstance(fresh, ApplyChange) and fresh.keep_version is None


def test_an_event_whose_content_was_purged_settles_without_a_write() -> None:
    gone = change(0, "a.md", 2, content=None)
    assert gone.plan is None and gone.incoming is None
    assert plan_round([gone], {0}, {}) == [Settle(gone, "stale")]
    assert plan_round([gone], set(), {}) == [Settle(gone, "duplicate")]


def test_a_tombstone_is_recorded_unless_a_newer_sequence_got_there_first() -> None:
    delete = deletion(0, "a.md", 4)
    (step,) = plan_round([delete], {0}, {})  # a document the index never held: still guarded
    assert isinstance(step, RecordTombstone) and step.plan.sequence == 4
    newer = {key("a.md"): held(6, content_hash=None, principals=set())}
    assert plan_round([delete], {0}, newer) == [Settle(delete, "stale")]
    assert plan_round([delete], set(), {}) == [Settle(delete, "duplicate")]


def test_a_source_level_deletion_purges_whatever_the_manifest_deletion_mode() -> None:
    assert SOURCE.deletion_mode == DeletionMode.TOMBSTONE
    kept = deletion(0, "a.md", 2)
    purged = deletion(1, "b.md", 2, reason="source_disabled")
    assert not purged_next(kept) and purged_next(purged)
    assert not purged_next(change(2, "c.md", 1))


def test_a_planned_change_carries_what_the_decision_needs() -> None:
    event = change(0, "a.md", 1, acl=["group:sre"])
    assert event.plan is not None and event.incoming is not None
    assert event.key == key("a.md")
    assert event.incoming.acl == ("group:sre",) and event.incoming.has_chunks
    assert (event.incoming.parser, event.incoming.sequence) == ("markdown", 1)
    assert event.incoming.content_hash == event.plan.content_hash
