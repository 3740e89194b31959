"""Graph path templates (issue 23): a step walks one relation in one direction, optionally to
one entity type; a server holds the built-in templates plus those its settings declare; a
request names templates the server holds, or walks its defaults, or only the relations it
names, each the way its name reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from govindex.core.graph_templates import (
    BUILTIN,
    BUILTIN_TEMPLATES,
    MAX_STEPS,
    GraphMove,
    GraphRoute,
    GraphStep,
    GraphTemplate,
    GraphTemplates,
    UnknownGraphTemplate,
)
from govindex.core.settings import Settings
from govindex_client._types import MAX_GRAPH_TEMPLATES, RELATIONS
from reader.models import GraphSpec, SearchRequest
from reader.retrieval import graph_routes

OWNER = GraphMove("OWNED_BY", backwards=False, reach="team")
OWNED = GraphMove("OWNED_BY", backwards=True)


def _step(**fields: Any) -> GraphStep:
    return GraphStep.model_validate(fields)


def test_a_step_walks_its_relation_the_way_its_name_reads() -> None:
    assert _step(relation="OWNED_BY", to="team").move == OWNER
    assert _step(relation="OWNS").move == OWNED  # the inverse name: OWNED_BY backwards
    # `in` reads a name the other way: for relations without an inverse name.
    assert _step(relation="APPLIES_TO", direction="in").move == GraphMove("APPLIES_TO", True)
    assert _step(relation="OWNS", direction="in").move == GraphMove("OWNED_BY", False)


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"relation": "LIKES"}, "relation"),
        ({"relation": "owned_by"}, "relation"),
        ({"relation": "R" * 33}, "relation"),
        ({"relation": "OWNS", "direction": "up"}, "direction"),
        ({"relation": "OWNS", "to": "Team"}, "to"),
        ({"relation": "OWNS", "to": "team:x"}, "to"),
        ({"relation": "OWNS", "to": "t" * 33}, "to"),
        ({"relation": "OWNS", "to": 5}, "to"),
        ({"relation": "OWNS", "hops": 2}, "hops"),
    ],
)
def test_a_step_outside_the_vocabulary_or_its_bounds_is_refused_naming_the_field(
    fields: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        GraphStep.model_validate(fields)
    assert caught.value.errors()[0]["loc"] == (where,)


def test_an_unknown_relation_in_a_step_is_refused_naming_the_vocabulary() -> None:
    with pytest.raises(ValidationError, match=r"unknown relation 'LIKES'; known: .*OWNED_BY"):
        _step(relation="LIKES")


def test_a_template_has_one_or_two_steps_and_a_short_slug_name() -> None:
    one = {"relation": "OWNS"}
    assert len(GraphTemplate.model_validate({"name": "t", "steps": [one] * MAX_STEPS}).steps) == 2
    for body, where in (
        ({"name": "t", "steps": []}, "steps"),
        ({"name": "t", "steps": [one] * (MAX_STEPS + 1)}, "steps"),
        ({"name": "Owner", "steps": [one]}, "name"),
        ({"name": "a b", "steps": [one]}, "name"),
        ({"name": "x" * 65, "steps": [one]}, "name"),
        ({"name": "t\x00", "steps": [one]}, "name"),
    ):
        with pytest.raises(ValidationError) as caught:
            GraphTemplate.model_validate(body)
        assert caught.value.errors()[0]["loc"] == (where,)


def test_the_built_in_templates_walk_every_relation_both_ways() -> None:
    moves = {
        (move.relation, move.backwards)
        for template in BUILTIN_TEMPLATES.values()
        for (move,) in template.route.steps
    }
    assert moves == {(r, backwards) for r in RELATIONS for backwards in (False, True)}
    assert BUILTIN.defaults == tuple(BUILTIN_TEMPLATES)
    assert all(name == t.name for name, t in BUILTIN_TEMPLATES.items())


def test_the_walk_the_graph_walked_before_templates_is_still_walked_by_default() -> None:
    """An alert reaches its service, the service's runbook and its owner; a team its
    services and their runbooks; a document its service and the service's owner."""
    routes = {r.name: r.steps for r in BUILTIN.routes([], [], 2)}
    fired_by = GraphMove("FIRES", True, "service")
    assert routes["alert_runbooks"] == ((fired_by,), (GraphMove("GOVERNS", True, "document"),))
    assert routes["alert_owner"] == ((fired_by,), (OWNER,))
    assert routes["team_runbooks"][0] == (GraphMove("OWNED_BY", True, "service"),)
    assert routes["runbook_owner"] == ((GraphMove("GOVERNS", False, "service"),), (OWNER,))


def test_declared_templates_add_to_and_replace_the_built_in_ones() -> None:
    held = GraphTemplates.of(
        {
            "service_owner": [_step(relation="OWNED_BY", to="team")],
            "owner": [_step(relation="OWNED_BY", to="group")],
        },
        defaults=["service_owner"],
        statement_timeout_ms=50,
    )
    assert held.defaults == ("service_owner",) and held.statement_timeout_ms == 50
    assert set(held.templates) == set(BUILTIN_TEMPLATES) | {"service_owner"}
    assert held.templates["owner"].route.steps == ((GraphMove("OWNED_BY", False, "group"),),)
    assert held.routes([], [], 2) == (GraphRoute("service_owner", ((OWNER,),)),)


def test_a_default_template_that_is_not_held_is_refused() -> None:
    with pytest.raises(ValueError, match="'nope' are not declared; known: about"):
        GraphTemplates.of(defaults=["owner", "nope"])


def test_a_request_naming_a_template_the_server_does_not_hold_is_refused_listing_them() -> None:
    with pytest.raises(UnknownGraphTemplate) as caught:
        BUILTIN.routes(["owner", "nope", "nope"], [], 2)
    assert caught.value.field == "graph.templates"
    message = str(caught.value)
    assert message.startswith("unknown graph template 'nope'; known: about,")
    assert all(name in message for name in BUILTIN_TEMPLATES)


def test_hops_cut_every_walk_and_zero_hops_walk_nothing() -> None:
    assert BUILTIN.routes(["alert_owner"], [], 1) == (
        GraphRoute("alert_owner", ((GraphMove("FIRES", True, "service"),),)),
    )
    assert BUILTIN.routes(["alert_owner"], [], 0) == ()
    with pytest.raises(UnknownGraphTemplate):  # still refused: the request is wrong
        BUILTIN.routes(["nope"], [], 0)


def test_relations_alone_walk_only_those_each_the_way_its_name_reads() -> None:
    (route,) = BUILTIN.routes([], ["OWNS", "GOVERNS"], 2)
    expected = (GraphMove("GOVERNS", False), GraphMove("OWNED_BY", True))
    assert route.steps == (expected, expected)
    (route,) = BUILTIN.routes([], ["OWNED_BY"], 1)
    assert route.steps == ((GraphMove("OWNED_BY", False),),)


def test_with_templates_relations_allow_steps_and_a_walk_stops_where_they_do_not() -> None:
    routes = BUILTIN.routes(["alert_owner", "owner", "owned"], ["FIRED_BY"], 2)
    assert routes == (GraphRoute("alert_owner", ((GraphMove("FIRES", True, "service"),),)),)
    # OWNED_BY allows the owner step, not the same edge read the other way (OWNS).
    assert [r.name for r in BUILTIN.routes(["owner", "owned"], ["OWNED_BY"], 2)] == ["owner"]


def test_the_read_path_asks_for_the_walks_the_request_names() -> None:
    base = {"tenant": "acme", "purpose": "support", "query": "payments"}
    named = SearchRequest.model_validate({**base, "graph": {"templates": ["owner"]}})
    assert graph_routes(named, BUILTIN) == (GraphRoute("owner", ((OWNER,),)),)
    plain = SearchRequest.model_validate(base)
    assert len(graph_routes(plain, BUILTIN)) == len(BUILTIN_TEMPLATES)


def test_the_wire_takes_template_names_and_only_relations_of_the_vocabulary() -> None:
    spec = GraphSpec.model_validate_json(
        json.dumps({"templates": ["service_owner", "team-runbooks"], "relations": ["OWNS"]}),
        strict=True,
    )
    assert spec.templates == ["service_owner", "team-runbooks"] and spec.relations == ["OWNS"]
    for body, where in (
        ({"relations": ["OWNS", "LIKES"]}, ("relations", 1)),
        ({"templates": ["Owner"]}, ("templates", 0)),
        ({"templates": ["x" * 65]}, ("templates", 0)),
        ({"templates": ["owner"] * (MAX_GRAPH_TEMPLATES + 1)}, ("templates",)),
    ):
        with pytest.raises(ValidationError) as caught:
            GraphSpec.model_validate_json(json.dumps(body), strict=True)
        assert caught.value.errors()[0]["loc"] == where


def test_the_settings_page_lists_every_built_in_template_with_its_steps() -> None:
    page = (Path(__file__).parents[2] / "docs" / "reference" / "settings.md").read_text()

    def shown(step: GraphStep) -> str:
        return (
            step.relation
            + (" (in)" if step.direction == "in" else "")
            + (f" → {step.to}" if step.to else "")
        )

    for name, template in BUILTIN_TEMPLATES.items():
        row = f"| `{name}` | {', '.join(shown(s) for s in template.steps)} |"
        assert row in page, row


# --- settings ------------------------------------------------------------------------------


def test_settings_declare_templates_defaults_and_the_statement_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().graph == BUILTIN
    assert Settings().graph_statement_timeout_ms == 2000
    monkeypatch.setenv(
        "GOVINDEX_GRAPH_TEMPLATES",
        json.dumps(
            {
                "service_owner": [{"relation": "OWNED_BY", "to": "team"}],
                "team_policies": [
                    {"relation": "OWNS", "to": "service"},
                    {"relation": "APPLIES_TO", "direction": "in", "to": "document"},
                ],
            }
        ),
    )
    monkeypatch.setenv("GOVINDEX_GRAPH_DEFAULT_TEMPLATES", '["service_owner", "team_policies"]')
    monkeypatch.setenv("GOVINDEX_GRAPH_STATEMENT_TIMEOUT_MS", "250")
    graph = Settings().graph
    assert graph.defaults == ("service_owner", "team_policies")
    assert graph.statement_timeout_ms == 250
    assert graph.templates["team_policies"].route.steps == (
        (GraphMove("OWNED_BY", True, "service"),),
        (GraphMove("APPLIES_TO", True, "document"),),
    )


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("GOVINDEX_GRAPH_TEMPLATES", '{"Bad Name": [{"relation": "OWNS"}]}', "'Bad Name'"),
        ("GOVINDEX_GRAPH_TEMPLATES", '{"x": [{"relation": "LIKES"}]}', "unknown relation"),
        ("GOVINDEX_GRAPH_TEMPLATES", '{"x": []}', "has 0 steps"),
        (
            "GOVINDEX_GRAPH_TEMPLATES",
            '{"x": [{"relation": "OWNS"}, {"relation": "OWNS"}, {"relation": "OWNS"}]}',
            "has 3 steps",
        ),
        ("GOVINDEX_GRAPH_DEFAULT_TEMPLATES", '["owner", "nope"]', "'nope' are not declared"),
        ("GOVINDEX_GRAPH_STATEMENT_TIMEOUT_MS", "0", "greater than or equal to 1"),
    ],
)
def test_unusable_graph_settings_are_refused_when_the_process_starts(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError, match=said):
        Settings()
