"""What a replay takes (by key and headers, never the body) and how its predictions carry
earlier events of the same run forward."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from govindex.core import events
from govindex.core.envelope import TopicRecord, encode_document_event
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.paths import PatternError
from govindex.core.ports import DocumentState
from govindex.core.replays import Scope, identity, replayed_headers
from indexer.decisions import Overlay, predict

NOW = datetime(2025, 3, 1, tzinfo=UTC)


def record(doc: str, *, source: str = "hb", deleted: bool = False) -> TopicRecord:
    if deleted:
        payload: DocumentChanged | DocumentDeleted = DocumentDeleted(
            tenant_id="acme",
            source_id=source,
            doc_id=doc,
            source_version="v2",
            sequence=2,
            deleted_at=NOW,
            reason="deleted_upstream",
        )
        encoded = encode_document_event(events.DOCUMENT_DELETED, payload, op="deleted")
    else:
        payload = DocumentChanged(
            tenant_id="acme",
            source_id=source,
            doc_id=doc,
            source_version="v1",
            sequence=1,
            observed_at=NOW,
            content_hash=sha256_hex("x"),
            content="x",
            path=doc,
        )
        encoded = encode_document_event(events.DOCUMENT_CREATED, payload, op="created")
    return TopicRecord("t", 0, 0, 0, encoded.key, b"not even json", encoded.headers)


def test_identity_comes_from_headers_and_else_from_the_key() -> None:
    binary = record("runbooks/a.md")
    found = identity(binary)
    assert found is not None
    assert (found.tenant_id, found.source_id, found.doc_id) == ("acme", "hb", "runbooks/a.md")
    assert found.type == events.DOCUMENT_CREATED
    structured = TopicRecord("t", 0, 0, 0, b"acme/hb/x/y.md", b"{}", [])
    keyed = identity(structured)
    assert keyed is not None and (keyed.doc_id, keyed.type) == ("x/y.md", "")
    assert identity(TopicRecord("t", 0, 0, 0, b"no-slashes", b"{}", [])) is None
    assert identity(TopicRecord("t", 0, 0, 0, b"\xff/a/b", b"{}", [])) is None


def test_a_scope_takes_one_source_its_documents_and_kinds() -> None:
    scope = Scope("hb", "acme", docs=("runbooks/**",), kinds=("deleted",))
    assert scope.admits(record("runbooks/a.md", deleted=True))
    assert not scope.admits(record("runbooks/a.md"))  # a create
    assert not scope.admits(record("notes/a.md", deleted=True))
    assert not scope.admits(record("runbooks/a.md", source="other", deleted=True))
    assert not Scope("hb", "other-tenant").admits(record("a.md"))
    assert Scope("hb").admits(record("deep/er/a.md"))
    # A structured-mode record says its type only in the body: --type leaves it out.
    structured = TopicRecord("t", 0, 0, 0, b"acme/hb/runbooks/a.md", b"{}", [])
    assert Scope("hb", docs=("runbooks/*.md",)).admits(structured)
    assert not Scope("hb", kinds=("created",)).admits(structured)
    with pytest.raises(PatternError):
        Scope("hb", docs=("a\\",))


def test_replayed_headers_name_the_job_once() -> None:
    headers = [("ce_id", b"1"), ("govindex-job", b"3")]
    assert replayed_headers(headers, "govindex-job", 9) == [("ce_id", b"1"), ("govindex-job", b"9")]


def state(last: int, *, active: bool = True) -> DocumentState:
    return DocumentState(active, last, "v", "h", ("markdown", "3"), frozenset())


def test_predict_is_the_guard_with_stale_split_by_tombstone() -> None:
    assert predict(False, None, True, 5) == "duplicate"
    assert predict(True, None, True, 1) == "apply"
    assert predict(True, 5, True, 5) == "stale"
    assert predict(True, 5, False, 3) == "behind_tombstone"
    assert predict(True, 5, False, 6) == "apply"  # a re-create after the delete applies


def test_the_overlay_foresees_earlier_events_of_the_same_run() -> None:
    overlay = Overlay()
    see = overlay.predict
    assert see("e1", "k", 1, deletion=False, processed=False, state=None) == "apply"
    assert see("e1", "k", 1, deletion=False, processed=False, state=None) == "duplicate"
    assert see("e0", "k", 1, deletion=False, processed=False, state=None) == "stale"
    assert see("d2", "k", 2, deletion=True, processed=False, state=None) == "apply"
    assert see("e1b", "k", 2, deletion=False, processed=False, state=None) == "behind_tombstone"
    assert see("x", "j", 4, deletion=False, processed=True, state=state(1)) == "duplicate"
    assert see("y", "j", 1, deletion=False, processed=False, state=state(3)) == "stale"
    again = Overlay.load(overlay.dump())  # a resumed job foresees the same
    assert again == overlay
    assert again.predict("e1", "k", 9, deletion=False, processed=False, state=None) == "duplicate"
