"""The answer cache's pure parts: keys per subject, the tags an entry is evicted by, how
long it may live and when it is not kept at all (issue 20: the read service in rooms)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from govindex.core.records import Chunk
from reader.cache import CACHE_TTL_S, NOW_TTL_S, cache_key, checkable, doc_key, tags_of, ttl_of
from reader.models import PackRequest, SearchRequest
from tests.support.builders import manifest, version_plan

NOW = datetime(2025, 6, 1, tzinfo=UTC)
_STORED = version_plan(manifest("src", "acme"), "runbooks/a.md", 1, "# A\n\nalpha\n").chunks[0]


def chunk(chunk_id: str, doc_id: str = "runbooks/a.md", **fields: Any) -> Chunk:
    return _STORED.model_copy(update={"chunk_id": chunk_id, "doc_id": doc_id, **fields})


def request(**fields: Any) -> SearchRequest:
    body = {
        "tenant": "acme",
        "subject": {"principals": ["group:eng", "user:ann"]},
        "purpose": "support",
        "query": "orders-db failover",
        **fields,
    }
    return SearchRequest.model_validate(body)


def test_a_key_names_the_kind_and_the_whole_request_but_not_how_to_serve_it() -> None:
    asked = request()
    key = cache_key("search", asked)
    assert re.fullmatch(r"read:search:[0-9a-f]{64}", key)
    assert cache_key("search", request()) == key  # canonical: the same request, the same key
    assert cache_key("pack", asked) != key
    for how in ({"cache": "refresh"}, {"cache": "bypass"}, {"trace": True}):
        assert cache_key("search", request(**how)) == key, how
    for what in (
        {"subject": {"principals": ["group:hr"]}},
        {"subject": {"principals": ["group:eng", "user:ann"], "scopes": ["pii"]}},
        {"purpose": "audit"},
        {"tenant": "other"},
        {"as_of": NOW.isoformat()},
        {"known_at": NOW.isoformat()},
        {"query": "orders-db"},
        {"limit": 3},
    ):
        assert cache_key("search", request(**what)) != key, what
    pack = PackRequest.model_validate(asked.model_dump())
    assert cache_key("pack", pack) != cache_key(
        "pack", pack.model_copy(update={"dedup_threshold": 0})
    )


def test_an_entry_is_tagged_with_every_document_chunk_and_principal_it_holds() -> None:
    held = [chunk("c2"), chunk("c1"), chunk("c3", "runbooks/b.md"), chunk("c1")]
    sequences = {"acme/src/runbooks/b.md": 4, "acme/src/runbooks/a.md": 1}
    asked = request(subject={"principals": ["user:ann", "group:eng", "user:ann"]})
    tags = tags_of(asked, held, sequences)
    assert tags.documents == ["acme/src/runbooks/a.md", "acme/src/runbooks/b.md"]
    assert tags.chunks == ["c1", "c2", "c3"]
    assert tags.principals == ["group:eng", "user:ann"]
    assert doc_key(held[2]) == "acme/src/runbooks/b.md"


def test_an_entry_lives_briefly_for_now_and_never_past_an_item_validity() -> None:
    held = [chunk("c1")]
    assert ttl_of(request(), held, NOW) == NOW_TTL_S
    assert ttl_of(request(as_of=NOW.isoformat()), held, NOW) == CACHE_TTL_S
    ending = [chunk("c1"), chunk("c2", valid_to=NOW + timedelta(seconds=12))]
    assert ttl_of(request(), ending, NOW) == 12
    assert ttl_of(request(as_of=NOW.isoformat()), ending, NOW) == CACHE_TTL_S  # about then
    ended = [chunk("c1", valid_to=NOW - timedelta(seconds=1))]
    assert ttl_of(request(), ended, NOW) == 0  # not kept at all


def test_an_entry_is_kept_only_if_every_held_document_can_be_checked() -> None:
    held = [chunk("c1"), chunk("c2"), chunk("c3", "runbooks/b.md")]
    both = {"acme/src/runbooks/a.md": 1, "acme/src/runbooks/b.md": 2}
    assert checkable(held, both)
    assert not checkable(held, {"acme/src/runbooks/a.md": 1})  # b.md has no order-guard row
    assert checkable([], {})
