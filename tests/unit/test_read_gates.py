"""The read path's gates decide on Postgres's record, whatever the index returned."""

from __future__ import annotations

from datetime import UTC, datetime

from govindex.core.hashing import sha256_hex
from govindex.core.ports import ChunkFacts, ReadAccess
from govindex.core.records import Chunk
from reader.gates import CONFIDENTIAL, GATES, refusal

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


def q(**overrides: object) -> ReadAccess:
    base: dict[str, object] = dict(
        tenant_id="t", principals=("group:eng",), scopes=(), purpose="support", as_of=NOW
    )
    return ReadAccess(**{**base, **overrides})  # type: ignore[arg-type]


def facts(c: Chunk | None = None, **overrides: bool) -> ChunkFacts:
    base = dict(
        source_enabled=True,
        purge_tombstoned=False,
        tombstoned=False,
        content_purged=False,
        superseded=False,
    )
    return ChunkFacts(chunk=c or chunk(), **{**base, **overrides})


def admitted(c: Chunk, access: ReadAccess) -> bool:
    return refusal(facts(c), access) is None


def test_a_matching_chunk_is_admitted() -> None:
    assert admitted(chunk(), q())


def test_each_gate_refuses_on_its_own() -> None:
    assert not admitted(chunk(tenant_id="other"), q())
    assert not admitted(chunk(), q(principals=("group:hr",)))
    assert not admitted(chunk(), q(purpose="marketing"))
    assert not admitted(chunk(valid_from=datetime(2025, 7, 1, tzinfo=UTC)), q())
    assert not admitted(chunk(valid_to=NOW), q())
    assert not admitted(chunk(text="tampered"), q())


def test_scopes_deletion_source_and_trust_are_gates_too() -> None:
    assert refusal(facts(chunk(required_scopes=("pii",))), q()) == (
        "scope",
        "a required scope is missing",
    )
    assert admitted(chunk(required_scopes=("pii",)), q(scopes=("pii", "other")))
    assert refusal(facts(purge_tombstoned=True), q())[0] == "deletion"  # type: ignore[index]
    assert refusal(facts(source_enabled=False), q())[0] == "deletion"  # type: ignore[index]
    assert refusal(facts(content_purged=True), q())[0] == "deletion"  # type: ignore[index]
    flagged = chunk(contains_instructions=True, trust_level="untrusted")
    assert refusal(facts(flagged), q())[0] == "trust"  # type: ignore[index]
    trusted = chunk(contains_instructions=True, trust_level="authoritative")
    assert admitted(trusted, q())


def test_known_at_reads_system_time() -> None:
    recorded = chunk(recorded_at=NOW, superseded_at=datetime(2025, 6, 2, tzinfo=UTC))
    assert refusal(facts(recorded), q(known_at=datetime(2025, 5, 1, tzinfo=UTC)))[0] == (  # type: ignore[index]
        "system_time"
    )
    assert admitted(recorded, q(known_at=datetime(2025, 6, 1, 12, tzinfo=UTC)))
    assert refusal(facts(recorded), q(known_at=datetime(2025, 6, 3, tzinfo=UTC)))[0] == (  # type: ignore[index]
        "system_time"
    )


def test_gates_run_in_order_and_confidential_ones_come_first() -> None:
    everything_wrong = chunk(tenant_id="other", text="tampered", valid_to=NOW)
    assert refusal(facts(everything_wrong, purge_tombstoned=True), q())[0] == "tenant"  # type: ignore[index]
    assert GATES.index("purpose") < GATES.index("valid_time") < GATES.index("deletion")
    assert {"tenant", "acl", "scope", "purpose"} == CONFIDENTIAL
