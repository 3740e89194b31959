"""Fact mappings, pure: entries at their exact spans, entities by business id, edges with
their own window and event time, and refusals that name the mapping, entry and field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from govindex.core.errors import InvalidEvent
from govindex.core.facts import FactMapping
from indexer.facts import parse_facts
from indexer.planning import plan_version
from tests.support.builders import change_payload, manifest

COMMITTED = datetime(2025, 3, 1, 2, 10, tzinfo=UTC)

DEPLOYMENTS = FactMapping.model_validate(
    {
        "name": "deployments",
        "paths": ["deploy/*.csv"],
        "entities": [{"type": "deployment", "id": "deploy_id", "aliases": ["version"]}],
        "relations": [
            {
                "subject": {"type": "service", "id": "service"},
                "relation": "DEPLOYED_AS",
                "object": {"type": "deployment", "id": "deploy_id"},
            }
        ],
        "event_time": "finished_at",
        "acl": "acl",
    }
)
CSV = (
    "deploy_id,service,version,environment,started_at,finished_at,acl\n"
    "d-1,payment-api,1.4.0,prod,2025-03-01T01:58:00Z,2025-03-01T02:01:22Z,\n"
    'd-2,ledger,"2.0.0",prod,2025-03-01T03:00:00Z,2025-03-01T03:04:00Z,"group:sre, group:eng"\n'
)

OWNERSHIP = FactMapping.model_validate(
    {
        "name": "ownership",
        "paths": ["ownership.csv"],
        "relations": [
            {
                "subject": {"type": "team", "id": "team"},
                "relation": "OWNS",  # an inverse: stored as service OWNED_BY team
                "object": {"type": "service", "id": "service"},
            }
        ],
        "valid_from": "valid_from",
        "valid_to": "valid_to",
    }
)

CATALOG = FactMapping.model_validate(
    {
        "name": "catalog",
        "paths": ["**/catalog-info.yaml"],
        "entities": [
            {"type": "service", "id": "metadata.name", "aliases": ["metadata.title"]},
        ],
        "relations": [
            {
                "subject": {"type": "service", "id": "metadata.name"},
                "relation": "OWNED_BY",
                "object": {"type": "team", "id": "spec.owner", "ref": "entity_ref"},
            },
            {
                "subject": {"type": "service", "id": "metadata.name"},
                "relation": "DEPENDS_ON",
                "object": {"type": "service", "id": "spec.dependsOn", "ref": "entity_ref"},
                "confidence": 0.9,
            },
        ],
    }
)
YAML = """apiVersion: backstage.io/v1alpha1
kind: Component
metadata:
  name: payment-api
  title: Payment API
spec:
  owner: group:default/payments-core
  dependsOn: [component:ledger, component:default/fraud-check]
---
apiVersion: backstage.io/v1alpha1
kind: Component
metadata:
  name: ledger
spec:
  owner: group:ledger-team
"""


def test_each_csv_row_is_a_fact_chunk_at_its_exact_lines_stating_its_edges() -> None:
    facts = parse_facts(
        DEPLOYMENTS, "deploy/prod.csv", CSV, document_from=COMMITTED, document_to=None
    )
    drafts = facts.parsed.chunks
    assert [d.text for d in drafts] == [
        CSV.splitlines(keepends=True)[1].rstrip(),
        CSV.splitlines()[2],
    ]
    for d in drafts:
        assert CSV[d.span.char_start : d.span.char_end] == d.text  # faithful
        assert d.kind.value == "fact" and "fact:deployments" in d.labels
    first, second = (facts.stamps[d.ordinal] for d in drafts)
    happened = datetime(2025, 3, 1, 2, 1, 22, tzinfo=UTC)
    assert first.event_time == happened and first.valid_from == happened  # before the commit
    assert first.acl == () and second.acl == ("group:eng", "group:sre")
    edges = {e.subject: e for e in facts.edges}
    pay = edges["service:payment-api"]
    assert (pay.relation, pay.object, pay.evidence) == ("DEPLOYED_AS", "deployment:d-1", 0)
    assert pay.valid_from == happened and pay.event_time == happened and not pay.own_time
    assert pay.method == "facts:deployments" and edges["service:ledger"].evidence == 1
    assert {(e.entity_id, e.aliases) for e in facts.entities} == {
        ("deployment:d-1", ("1.4.0",)),
        ("deployment:d-2", ("2.0.0",)),
    }


def test_validity_columns_give_an_edge_its_own_window_and_an_inverse_is_stored_forwards() -> None:
    text = (
        "team,service,valid_from,valid_to\n"
        "team-a,payment-api,2024-01-01,2025-02-01\n"
        "team-b,payment-api,2025-02-01,\n"
    )
    facts = parse_facts(OWNERSHIP, "ownership.csv", text, document_from=COMMITTED, document_to=None)
    windows = [
        (e.subject, e.relation, e.object, e.valid_from, e.valid_to, e.own_time) for e in facts.edges
    ]
    assert windows == [
        (
            "service:payment-api",
            "OWNED_BY",
            "team:team-a",
            datetime(2024, 1, 1, tzinfo=UTC),
            datetime(2025, 2, 1, tzinfo=UTC),
            True,
        ),
        (
            "service:payment-api",
            "OWNED_BY",
            "team:team-b",
            datetime(2025, 2, 1, tzinfo=UTC),
            None,
            True,
        ),
    ]
    # The row's chunk holds from the earliest time it speaks of.
    assert facts.stamps[0].valid_from == datetime(2024, 1, 1, tzinfo=UTC)


def test_yaml_documents_are_entries_and_entity_refs_resolve_to_business_ids() -> None:
    facts = parse_facts(
        CATALOG, "svc/catalog-info.yaml", YAML, document_from=COMMITTED, document_to=None
    )
    assert len(facts.parsed.chunks) == 2
    assert (
        facts.parsed.chunks[0].text.startswith("apiVersion")
        and "payment-api" in facts.parsed.chunks[0].text
    )
    stated = {(e.subject, e.relation, e.object, e.confidence) for e in facts.edges}
    assert stated == {
        ("service:payment-api", "OWNED_BY", "team:payments-core", 1.0),
        ("service:payment-api", "DEPENDS_ON", "service:ledger", 0.9),
        ("service:payment-api", "DEPENDS_ON", "service:fraud-check", 0.9),
        ("service:ledger", "OWNED_BY", "team:ledger-team", 1.0),
    }
    declared = {e.entity_id: e.aliases for e in facts.entities}
    assert declared == {"service:payment-api": ("Payment API",), "service:ledger": ()}
    # a name is an alias, never an id of its own
    assert all(e.entity_id.split(":", 1)[1] in {"payment-api", "ledger"} for e in facts.entities)


def test_json_items_at_a_path_keep_their_spans() -> None:
    mapping = FactMapping.model_validate(
        {
            "name": "deploys",
            "paths": ["*.json"],
            "items": "data.rows",
            "relations": [
                {
                    "subject": {"type": "service", "id": "service"},
                    "relation": "DEPLOYED_AS",
                    "object": {"type": "deployment", "id": "id"},
                }
            ],
        }
    )
    text = (
        '{"meta": {"n": 2}, "data": {"rows": [\n'
        ' {"id": "x1", "service": "a"},\n {"id": "x2", "service": "b"}\n]}}\n'
    )
    facts = parse_facts(mapping, "d.json", text, document_from=COMMITTED, document_to=None)
    assert [d.text for d in facts.parsed.chunks] == [
        '{"id": "x1", "service": "a"}',
        '{"id": "x2", "service": "b"}',
    ]
    assert [e.object for e in facts.edges] == ["deployment:x1", "deployment:x2"]


def test_a_value_that_is_not_a_time_refuses_the_document_naming_entry_and_field() -> None:
    bad = CSV.replace("2025-03-01T03:04:00Z", "yesterday-ish")
    with pytest.raises(InvalidEvent) as refused:
        parse_facts(DEPLOYMENTS, "deploy/prod.csv", bad, document_from=COMMITTED, document_to=None)
    message = str(refused.value)
    assert "deployments" in message and "entry 2" in message and "finished_at" in message
    huge = CSV.replace("2025-03-01T03:04:00Z", "9" * 100_000)
    with pytest.raises(InvalidEvent) as refused:
        parse_facts(DEPLOYMENTS, "deploy/prod.csv", huge, document_from=COMMITTED, document_to=None)
    assert len(str(refused.value)) < 400  # quoted short whatever the input


def test_a_mapping_is_checked_at_the_boundary() -> None:
    with pytest.raises(ValidationError, match="either `paths`"):
        FactMapping.model_validate({"name": "x", "relations": [], "entities": []})
    with pytest.raises(ValidationError, match="neither in the vocabulary"):
        manifest(
            "s",
            "t",
            facts=[
                {
                    **DEPLOYMENTS.model_dump(),
                    "relations": [{**DEPLOYMENTS.relations[0].model_dump(), "relation": "LIKES"}],
                }
            ],
        )
    declared = manifest(
        "s",
        "t",
        relations={"LIKES": None},
        facts=[
            {
                **DEPLOYMENTS.model_dump(),
                "relations": [{**DEPLOYMENTS.relations[0].model_dump(), "relation": "LIKES"}],
            }
        ],
    )
    assert declared.facts[0].relations[0].relation == "LIKES"
    with pytest.raises(ValidationError, match="cdc source maps its `table`"):
        manifest(
            "s",
            "t",
            facts=[{"name": "rows", "table": "public.x", "entities": [{"type": "a", "id": "id"}]}],
        )


def test_a_mapped_file_plans_fact_chunks_with_row_acl_and_time() -> None:
    m = manifest("deploys", "acme", facts=[DEPLOYMENTS.model_dump()])
    payload = change_payload("acme", "deploys", "deploy/prod.csv", 1, CSV, observed_at=COMMITTED)
    plan = plan_version(
        payload.model_copy(update={"path": "deploy/prod.csv"}), CSV, m, generation=1, now=COMMITTED
    )
    assert plan.parser == "facts" and plan.parser_version.startswith("1.0.0+")
    first, second = plan.chunks
    assert first.acl == ("group:eng",) and second.acl == ("group:eng", "group:sre")
    assert first.valid_from == datetime(2025, 3, 1, 2, 1, 22, tzinfo=UTC) < plan.valid_from
    assert first.event_time == datetime(2025, 3, 1, 2, 1, 22, tzinfo=UTC)
    assert [e.evidence for e in plan.edges] == [0, 1]
    assert {e.entity_id for e in plan.entities} == {"deployment:d-1", "deployment:d-2"}
