"""The read path's gates decide on Postgres's record, whatever the index returned."""

from __future__ import annotations

from datetime import UTC, datetime

from govindex.core.hashing import sha256_hex
from govindex.core.records import Chunk
from reader.search import Query, admitted

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def chunk(**overrides: object) -> Chunk:
    base: dict[str, object] = dict(
        chunk_id="c",
        version_id="v",
        tenant_id="t",
        source_id="s",
        doc_id="d",
        source_version="git:1",
        sequence=1,
        version_sequence=1,
        content_hash=sha256_hex("text"),
        text="text",
        valid_from=datetime(2025, 1, 1, tzinfo=UTC),
        valid_to=None,
        recorded_at=NOW,
        superseded_at=None,
        observed_at=NOW,
        indexed_at=NOW,
        acl=("group:eng",),
        required_scopes=(),
        allowed_purposes=("support",),
        classification="internal",
        parser="markdown",
        parser_version="1",
        locator="d#x",
        char_start=0,
        char_end=4,
        line_start=1,
        line_end=1,
        heading_path=(),
        parent_id=None,
        prev_id=None,
        next_id=None,
        ordinal=0,
        kind="section",
        trust_level="reviewed",
        contains_instructions=False,
        token_estimate=1,
        simhash=0,
        index_generation=1,
    )
    return Chunk.model_validate({**base, **overrides})


def q(**overrides: object) -> Query:
    base: dict[str, object] = dict(
        text="x", tenant_id="t", principals=("group:eng",), purpose="support", as_of=NOW
    )
    return Query(**{**base, **overrides})  # type: ignore[arg-type]


def test_a_matching_chunk_is_admitted() -> None:
    assert admitted(chunk(), q())


def test_each_gate_refuses_on_its_own() -> None:
    assert not admitted(chunk(tenant_id="other"), q())
    assert not admitted(chunk(), q(principals=("group:hr",)))
    assert not admitted(chunk(), q(purpose="marketing"))
    assert not admitted(chunk(valid_from=datetime(2025, 7, 1, tzinfo=UTC)), q())
    assert not admitted(chunk(valid_to=NOW), q())
    assert not admitted(chunk(text="tampered"), q())
