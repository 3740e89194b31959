"""The read API's and the admin API's request models refuse hostile input at the boundary:
control characters, lists and strings past their bounds, and loosely typed flags (issue 19)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from govindex.control.admin import SetRate, StartJob
from govindex.control.job_requests import (
    BackfillJob,
    RedriveJob,
    ReindexJob,
    ReplayJob,
    ResetJob,
    ResetTarget,
)
from govindex.core.inputs import QUOTE_LIMIT, Line, control_at
from govindex_client._types import RELATION_NAMES
from reader.models import (
    MAX_HYDRATED,
    MAX_ITEMS,
    MAX_PINS,
    DerivedArtifact,
    PackRequest,
    SearchRequest,
    VerifyRequest,
)

SEARCH: dict[str, Any] = {
    "tenant": "acme",
    "subject": {"principals": ["group:eng"]},
    "purpose": "support",
    "query": "orders-db failover",
}
CONTROLS = ["\x00", "\x01", "\x1b", "\x7f", "\x85"]
RELATIONS_KNOWN = sorted(RELATION_NAMES)


def _refusal(model: type[BaseModel], body: Any) -> tuple[str, str]:
    """Where the first error is (dotted, as the APIs name fields) and what it says, for a
    body validated from JSON strictly, as the HTTP layers do."""
    with pytest.raises(ValidationError) as caught:
        model.model_validate_json(json.dumps(body), strict=True)
    first = caught.value.errors()[0]
    return ".".join(str(p) for p in first["loc"]), first["msg"]


def _with(**fields: Any) -> dict[str, Any]:
    return {**SEARCH, **fields}


PLACES: dict[str, Any] = {
    "subject.principals.0": lambda v: _with(subject={"principals": [f"group:{v}"]}),
    "subject.scopes.0": lambda v: _with(subject={"principals": ["u"], "scopes": [f"pii{v}"]}),
    "entities.0": lambda v: _with(entities=[f"service:{v}"]),
    "filters.labels.0": lambda v: _with(filters={"labels": [f"key:{v}"]}),
    "filters.path_prefix": lambda v: _with(filters={"path_prefix": f"runbooks/{v}"}),
    "filters.sources.0": lambda v: _with(filters={"sources": [f"git{v}"]}),
    # A relation of the vocabulary with the character after it: refused for the character,
    # before the vocabulary is consulted (test_a_control_character_in_a_relation_...).
    "graph.relations.0": lambda v: _with(graph={"relations": [f"OWNS{v}"]}),
    "graph.templates.0": lambda v: _with(graph={"templates": [f"owner{v}"]}),
    "tenant": lambda v: _with(tenant=f"acme{v}"),
    "purpose": lambda v: _with(purpose=f"support{v}"),
    "query": lambda v: _with(query=f"orders{v}db"),
}


@pytest.mark.parametrize("control", CONTROLS, ids=repr)
@pytest.mark.parametrize("field", sorted(PLACES))
def test_a_control_character_in_any_field_of_a_search_or_pack_is_refused_naming_it(
    field: str, control: str
) -> None:
    for model in (SearchRequest, PackRequest):
        where, _ = _refusal(model, PLACES[field](control))
        assert where == field


@pytest.mark.parametrize("field", sorted(set(PLACES) - {"query"}))
def test_identifiers_and_filters_are_one_line_so_tabs_and_line_breaks_are_refused_too(
    field: str,
) -> None:
    for brk in ("\t", "\n", "\r", "\u2028"):
        assert _refusal(SearchRequest, PLACES[field](brk))[0] == field


def test_a_query_may_span_lines_but_holds_no_other_control_character() -> None:
    taken = SearchRequest.model_validate_json(
        json.dumps(_with(query="orders-db\nfailover\tnow\r\n")), strict=True
    )
    assert taken.query == "orders-db\nfailover\tnow\r\n"
    assert _refusal(SearchRequest, _with(query="orders\x00db"))[0] == "query"


def test_a_refusal_quotes_a_hostile_value_in_about_a_hundred_and_twenty_characters() -> None:
    where, message = _refusal(SearchRequest, _with(query="q" * 3990 + "\x00"))
    assert where == "query" and "U+0000" in message and "3991 chars" in message
    assert len(message) < QUOTE_LIMIT + 100


BOUNDS: dict[str, Any] = {
    "subject.principals": _with(subject={"principals": [f"u:{n}" for n in range(65)]}),
    "subject.scopes": _with(subject={"principals": ["u"], "scopes": [f"s{n}" for n in range(65)]}),
    "entities": _with(entities=[f"e{n}" for n in range(33)]),
    "filters.labels": _with(filters={"labels": [f"l{n}" for n in range(65)]}),
    "filters.sources": _with(filters={"sources": [f"s{n}" for n in range(65)]}),
    "filters.kinds": _with(filters={"kinds": ["section"] * 100}),
    # Names of the vocabulary, repeated: the count is what is refused, not a name.
    "graph.relations": _with(
        graph={"relations": [RELATIONS_KNOWN[n % len(RELATIONS_KNOWN)] for n in range(33)]}
    ),
    "graph.relations.0": _with(graph={"relations": ["R" * 129]}),
    "graph.templates": _with(graph={"templates": [f"t{n}" for n in range(17)]}),
    "graph.templates.0": _with(graph={"templates": ["t" * 65]}),
    "channels": _with(channels=["bm25"] * 6),
    "subject.principals.0": _with(subject={"principals": ["u" * 257]}),
    "entities.0": _with(entities=["e" * 513]),
    "filters.labels.0": _with(filters={"labels": ["l" * 257]}),
    "filters.path_prefix": _with(filters={"path_prefix": "p" * 1025}),
    "query": _with(query="q" * 4001),
    "limit": _with(limit=201),
    "window": _with(window=501),
}


@pytest.mark.parametrize("field", sorted(BOUNDS))
def test_every_list_and_string_a_search_carries_is_bounded(field: str) -> None:
    assert _refusal(SearchRequest, BOUNDS[field])[0] == field


def test_the_bounded_graph_fields_take_values_up_to_their_bounds() -> None:
    at_bounds = _with(
        graph={
            "relations": [RELATIONS_KNOWN[n % len(RELATIONS_KNOWN)] for n in range(32)],
            "templates": [f"t{n}" for n in range(16)],
        }
    )
    taken = SearchRequest.model_validate_json(json.dumps(at_bounds), strict=True)
    assert len(taken.graph.relations) == 32 and len(taken.graph.templates) == 16
    for place in ("graph.relations.0", "graph.templates.0"):
        SearchRequest.model_validate_json(json.dumps(PLACES[place]("")), strict=True)


def test_a_relation_outside_the_vocabulary_is_refused_naming_it_and_the_vocabulary() -> None:
    for model in (SearchRequest, PackRequest):
        where, message = _refusal(model, _with(graph={"relations": ["OWNS", "LIKES"]}))
        assert where == "graph.relations.1"
        assert "unknown relation 'LIKES'" in message and "OWNED_BY" in message


def test_a_control_character_in_a_relation_is_refused_as_one_not_as_an_unknown_name() -> None:
    where, message = _refusal(SearchRequest, PLACES["graph.relations.0"]("\x00"))
    assert where == "graph.relations.0" and "U+0000" in message
    assert "unknown relation" not in message


def test_pack_sizes_that_decide_work_are_bounded() -> None:
    for body, field in (
        (_with(budget={"max_tokens": 200_001}), "budget.max_tokens"),
        (_with(budget={"max_items": MAX_ITEMS + 1}), "budget.max_items"),
        (_with(hydration={"neighbours": 3}), "hydration.neighbours"),
        (_with(dedup_threshold=17), "dedup_threshold"),
        (_with(graph={"hops": 3}), "graph.hops"),
    ):
        assert _refusal(PackRequest, body)[0] == field


@pytest.mark.parametrize(
    ("field", "value"),
    [("trace", "yes"), ("trace", 1), ("trace", "true"), ("limit", "5"), ("window", 5.0)],
)
def test_the_read_api_takes_booleans_and_numbers_only_as_json_booleans_and_numbers(
    field: str, value: Any
) -> None:
    assert _refusal(SearchRequest, _with(**{field: value}))[0] == field


def _pin(n: int) -> dict[str, Any]:
    return {
        "chunk_id": f"{n:032x}",
        "doc": "acme/git/runbooks/orders-db.md",
        "version_id": "0" * 32,
        "sequence": 1,
        "source_version": "v1",
        "content_hash": "sha256:" + "0" * 64,
    }


def _manifest(items: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "tenant": "acme",
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "query": "q",
        "entities": [],
        "as_of": datetime.now(UTC).isoformat(),
        "known_at": None,
        "budget": {},
        "index_generation": 1,
        "items": items,
        "pack_hash": "0" * 64,
        **fields,
    }


def _items(count: int, hydrated: int) -> list[dict[str, Any]]:
    return [
        {**_pin(n), "key": f"S{n}", "hydrated": [_pin(n * 10 + h) for h in range(hydrated)]}
        for n in range(count)
    ]


def test_a_manifest_holding_as_many_pins_as_the_largest_pack_is_verifiable() -> None:
    full = _manifest(_items(MAX_ITEMS, MAX_HYDRATED))
    verified = VerifyRequest.model_validate_json(json.dumps({"manifest": full}), strict=True)
    pins = sum(1 + len(i.hydrated) for i in verified.manifest.items)
    assert pins == MAX_PINS


def test_a_manifest_with_ten_thousand_and_one_pins_is_refused_naming_the_pins() -> None:
    body = {"manifest": _manifest(_items(10_001, 0))}
    where, message = _refusal(VerifyRequest, body)
    assert where == "manifest.items" and "pins" in message and "10001" in message
    body = {"manifest": _manifest(_items(MAX_ITEMS + 1, 0))}
    where, message = _refusal(VerifyRequest, body)
    assert where == "manifest.items" and "items" in message
    body = {"manifest": _manifest(_items(1, MAX_HYDRATED + 1))}
    assert _refusal(VerifyRequest, body)[0] == "manifest.items.0.hydrated"


@pytest.mark.parametrize("field", ["chunk_id", "version_id", "content_hash", "key", "doc"])
def test_a_pin_with_a_control_character_is_refused_naming_it(field: str) -> None:
    items = _items(1, 0)
    items[0][field] = items[0][field] + "\x00"
    where, _ = _refusal(VerifyRequest, {"manifest": _manifest(items)})
    assert where == f"manifest.items.0.{field}"


def test_a_manifest_as_of_without_a_time_zone_is_refused_before_any_gate_compares_it() -> None:
    naive = _manifest(_items(1, 0), as_of="2025-01-01T00:00:00")
    assert _refusal(VerifyRequest, {"manifest": naive})[0] == "manifest.as_of"


def test_a_manifest_entities_and_subject_are_held_to_the_requests_bounds() -> None:
    many = _manifest(_items(1, 0), entities=[f"e{n}" for n in range(33)])
    assert _refusal(VerifyRequest, {"manifest": many})[0] == "manifest.entities"
    nul = _manifest(_items(1, 0), subject={"principals": ["group:\x00"]})
    assert _refusal(VerifyRequest, {"manifest": nul})[0] == "manifest.subject.principals.0"


def test_a_derived_artifact_refuses_control_characters_but_keeps_its_text_multiline() -> None:
    good = {
        "tenant_id": "acme",
        "kind": "summary",
        "id": "s1",
        "built_from": ["acme/git/a.md"],
        "location": "s3://bucket/s1",
        "text": "line one\nline two\n",
    }
    assert DerivedArtifact.model_validate_json(json.dumps(good), strict=True).text == good["text"]
    for field, value in (
        ("text", "summary\x00"),
        ("kind", "summary\n"),
        ("id", "s\x1b1"),
        ("location", "s3://\x00"),
        ("built_from", ["acme/git/\x00"]),
    ):
        where, _ = _refusal(DerivedArtifact, {**good, field: value})
        assert where.split(".")[0] == field


# --- the admin API ----------------------------------------------------------------------

REDRIVE = {"kind": "dlq-redrive"}


@pytest.mark.parametrize("execute", ["yes", "true", "1", 1, 0, None, [True]], ids=repr)
def test_only_a_json_true_or_false_says_whether_a_job_executes(execute: Any) -> None:
    assert _refusal(StartJob, {"job": REDRIVE, "execute": execute})[0] == "execute"


def test_a_json_true_still_executes_and_a_missing_execute_is_a_dry_run() -> None:
    started = StartJob.model_validate_json(json.dumps({"job": REDRIVE, "execute": True}))
    assert started.execute is True
    assert StartJob.model_validate_json(json.dumps({"job": REDRIVE})).execute is False


def test_rates_are_positive_bounded_json_numbers() -> None:
    assert StartJob.model_validate_json(json.dumps({"job": REDRIVE, "rate": 2})).rate == 2.0
    for rate in ("2", 0, -1, 10_000_001):
        assert _refusal(StartJob, {"job": REDRIVE, "rate": rate})[0] == "rate"
        assert _refusal(SetRate, {"rate": rate})[0] == "rate"
    with pytest.raises(ValidationError):  # a JSON number too large for a float: infinity
        SetRate.model_validate_json('{"rate": 1e400}', strict=True)


@pytest.mark.parametrize(
    ("job", "field"),
    [
        ({**REDRIVE, "max": "5"}, "job.dlq-redrive.max"),
        ({**REDRIVE, "max": 2**31}, "job.dlq-redrive.max"),
        ({"kind": "reindex", "switch": "no"}, "job.reindex.switch"),
        ({"kind": "reindex", "switch": 0}, "job.reindex.switch"),
        ({"kind": "reembed", "switch": "yes"}, "job.reembed.switch"),
        ({"kind": "reindex", "mode": "verify", "generation": "3"}, "job.reindex.generation"),
        (
            {"kind": "offsets-reset", "group": "g", "topic": "t", "to": {"earliest": 1}},
            "job.offsets-reset.to.earliest",
        ),
        (
            {"kind": "offsets-reset", "group": "g", "topic": "t", "to": {"latest": False}},
            "job.offsets-reset.to.latest",
        ),
        (
            {"kind": "offsets-reset", "group": "g", "topic": "t", "to": {"offset": "3"}},
            "job.offsets-reset.to.offset",
        ),
        (
            {"kind": "offsets-reset", "group": "g", "topic": "t", "partition": "0", "to": {}},
            "job.offsets-reset.partition",
        ),
    ],
)
def test_a_job_takes_the_numbers_and_flags_that_decide_what_it_does_strictly(
    job: dict[str, Any], field: str
) -> None:
    assert _refusal(StartJob, {"job": job})[0] == field


@pytest.mark.parametrize(
    ("job", "field"),
    [
        ({"kind": "replay", "source": "s\x00", "from": "2025-01-01T00:00:00Z"}, "source"),
        (
            {"kind": "replay", "source": "s", "from": "2025-01-01T00:00:00Z", "docs": ["a\x00"]},
            "docs.0",
        ),
        ({"kind": "backfill", "source": "s\n"}, "source"),
        ({"kind": "backfill", "source": "s", "docs": ["*.md"] * 1001}, "docs"),
        ({**REDRIVE, "reason": "r\x1b"}, "reason"),
        ({**REDRIVE, "consumer": "c" * 256}, "consumer"),
        (
            {"kind": "offsets-reset", "group": "g\x00", "topic": "t", "to": {"latest": True}},
            "group",
        ),
        (
            {"kind": "offsets-reset", "group": "g", "topic": "t\x7f", "to": {"latest": True}},
            "topic",
        ),
    ],
)
def test_a_job_refuses_control_characters_and_oversized_names(
    job: dict[str, Any], field: str
) -> None:
    assert _refusal(StartJob, {"job": job})[0] == f"job.{job['kind']}.{field}"


def test_the_cli_still_builds_every_job_from_python_values() -> None:
    """The CLI builds the same models (lax, from Python): an ISO string for a datetime."""
    assert ResetTarget.model_validate({"datetime": "2025-01-01T00:00:00+00:00"}).datetime
    assert ResetTarget.model_validate({"earliest": True}).earliest is True
    assert ResetJob(
        kind="offsets-reset", group="g", topic="t", partition=0, to=ResetTarget(offset=3)
    )
    assert ReindexJob(kind="reindex", switch=False).switch is False
    assert RedriveJob(kind="dlq-redrive", max=5).max == 5
    since = datetime(2025, 1, 1, tzinfo=UTC)
    assert ReplayJob(kind="replay", source="git", since=since, docs=["*.md"]).docs == ["*.md"]
    assert BackfillJob(kind="backfill", source="git").source == "git"


def test_the_shared_line_type_and_control_finder() -> None:
    line: TypeAdapter[str] = TypeAdapter(Line)
    assert line.validate_python("key:PAY-4097") == "key:PAY-4097"
    for bad in ("", "a\x00", "a\nb", "x" * 1025):
        with pytest.raises(ValidationError):
            line.validate_python(bad)
    assert control_at("ab\x00") == 2 and control_at("a\tb") == 1
    assert control_at("a\tb", single_line=False) is None and control_at("plain") is None
