"""Every ReadAccess is built by `reader.access`, the same way from a request, a manifest or a
query string (issue 20: the read service in rooms)."""

from __future__ import annotations

from datetime import UTC, datetime

from govindex.core.ports import ReadAccess
from reader.access import manifest_access, read_access, request_access
from reader.models import Budget, Manifest, SearchRequest, Subject

NOW = datetime(2025, 6, 1, tzinfo=UTC)
THEN = datetime(2025, 3, 1, tzinfo=UTC)


def test_the_same_subject_however_spelled_is_judged_by_the_same_access() -> None:
    spelled = read_access(
        tenant="acme",
        principals=["user:ann", "group:eng", "user:ann"],
        scopes=["pii", "pii"],
        purpose="support",
        as_of=NOW,
    )
    assert spelled == ReadAccess(
        tenant_id="acme",
        principals=("group:eng", "user:ann"),
        scopes=("pii",),
        purpose="support",
        as_of=NOW,
        known_at=None,
    )


def test_a_request_is_about_its_as_of_or_now_and_keeps_its_known_at() -> None:
    body = {
        "tenant": "acme",
        "subject": {"principals": ["user:ann", "group:eng"], "scopes": ["pii"]},
        "purpose": "support",
        "query": "failover",
    }
    now = request_access(SearchRequest.model_validate(body), NOW)
    assert (now.as_of, now.known_at, now.principals) == (NOW, None, ("group:eng", "user:ann"))
    then = request_access(
        SearchRequest.model_validate(
            {**body, "as_of": THEN.isoformat(), "known_at": THEN.isoformat()}
        ),
        NOW,
    )
    assert (then.as_of, then.known_at, then.scopes) == (THEN, THEN, ("pii",))


def test_a_manifest_is_re_judged_at_its_as_of_by_what_the_index_holds_now() -> None:
    manifest = Manifest(
        tenant="acme",
        subject=Subject(principals=["user:ann", "group:eng"]),
        purpose="support",
        query="failover",
        entities=[],
        as_of=THEN,
        known_at=THEN,
        budget=Budget(),
        index_generation=None,
        items=[],
        pack_hash="",
    )
    assert manifest_access(manifest) == read_access(
        tenant="acme",
        principals=["group:eng", "user:ann"],
        scopes=[],
        purpose="support",
        as_of=THEN,
    )
