"""Approved path templates: the only walks the graph channel takes from a seed entity.

A template is a name and one or two steps. A step walks one relation of the vocabulary
(`govindex_client._types.RELATIONS`) in the direction its name reads: OWNED_BY goes from a
service to its team, OWNS (its inverse name) from a team to what it owns, i.e. the stored
OWNED_BY edge backwards. `direction: in` reads the name the other way, for the relations
that have no inverse name (APPLIES_TO, ABOUT, DEPENDS_ON, DEPLOYED_AS). A step may also
name the type its entity must reach (the prefix of the entity id: `team` of
`team:payments`). The walk follows nothing else, so what a request reaches through the
graph is a path an operator approved, not every edge around the seed.

The built-in templates cover the relations the indexer extracts from frontmatter
(`indexer.graph`); `GOVINDEX_GRAPH_TEMPLATES` adds templates or replaces built-in ones by
name, and `GOVINDEX_GRAPH_DEFAULT_TEMPLATES` names those a request walks when it names
none (all the built-in ones by default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from govindex.core.errors import GovindexError
from govindex_client._types import GRAPH_TEMPLATE, quote, stored_relation

MAX_STEPS = 2
MAX_DECLARED = 64  # templates one setting may declare
ENTITY_TYPE = r"^[a-z][a-z0-9_-]{0,31}$"
DEFAULT_STATEMENT_TIMEOUT_MS = 2000

TemplateName = Annotated[str, Field(pattern=GRAPH_TEMPLATE)]
EntityType = Annotated[str, Field(pattern=ENTITY_TYPE)]

_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


@dataclass(frozen=True)
class GraphMove:
    """One step as the walk takes it: a stored relation, which end it leaves from (the
    object when `backwards`), and the entity type it must reach (None: any)."""

    relation: str
    backwards: bool
    reach: str | None = None


@dataclass(frozen=True)
class GraphRoute:
    """A walk to take: its name (said in logs) and, for each step, the moves it may make."""

    name: str
    steps: tuple[tuple[GraphMove, ...], ...]


class GraphStep(BaseModel):
    """One step of a template: a relation read in one direction, optionally to one type."""

    model_config = _STRICT

    relation: str = Field(
        min_length=1,
        max_length=32,
        description="a relation of the vocabulary or its inverse name (OWNS reads OWNED_BY "
        "backwards)",
    )
    direction: Literal["out", "in"] = Field(
        default="out",
        description="out: the way the name reads; in: the other way (for relations without "
        "an inverse name)",
    )
    to: EntityType | None = Field(
        default=None,
        description="the type the step must reach: the prefix of an entity id (team, "
        "service, document); not set: any",
    )

    @field_validator("relation")
    @classmethod
    def _known(cls, relation: str) -> str:
        stored_relation(relation)  # a ValueError names the vocabulary
        return relation

    @property
    def move(self) -> GraphMove:
        stored, backwards = stored_relation(self.relation)
        return GraphMove(stored, backwards != (self.direction == "in"), self.to)


class GraphTemplate(BaseModel):
    """A named path of one or two steps the graph channel may walk."""

    model_config = _STRICT

    name: TemplateName
    steps: list[GraphStep] = Field(min_length=1, max_length=MAX_STEPS)

    @property
    def route(self) -> GraphRoute:
        return GraphRoute(self.name, tuple((step.move,) for step in self.steps))


def _out(relation: str, to: str | None = None) -> GraphStep:
    return GraphStep(relation=relation, to=to)


def _in(relation: str, to: str | None = None) -> GraphStep:
    return GraphStep(relation=relation, direction="in", to=to)


# Built from what the indexer states (indexer.graph): runbooks GOVERN services, policies
# APPLY_TO them, incidents AFFECT them, services are OWNED_BY teams and FIRE alerts, a
# document SUPERSEDES another or is ABOUT anything. Every relation is walked both ways in
# one step; two steps only along the chains a question follows (an alert's runbook and
# owner, a team's runbooks and incidents, the owner of what a document is about).
BUILTIN_TEMPLATES: dict[str, GraphTemplate] = {
    name: GraphTemplate(name=name, steps=list(steps))
    for name, steps in (
        ("owner", [_out("OWNED_BY", "team")]),
        ("owned", [_out("OWNS")]),
        ("runbooks", [_out("GOVERNED_BY", "document")]),
        ("governed", [_out("GOVERNS")]),
        ("policies", [_in("APPLIES_TO", "document")]),
        ("applies_to", [_out("APPLIES_TO")]),
        ("incidents", [_out("AFFECTED_BY", "document")]),
        ("affected", [_out("AFFECTED")]),
        ("alerts", [_out("FIRES", "alert")]),
        ("alert_service", [_out("FIRED_BY", "service")]),
        ("deployments", [_out("DEPLOYED_AS")]),
        ("deployed_service", [_in("DEPLOYED_AS", "service")]),
        ("dependencies", [_out("DEPENDS_ON")]),
        ("dependents", [_in("DEPENDS_ON")]),
        ("supersedes", [_out("SUPERSEDES", "document")]),
        ("superseded_by", [_out("SUPERSEDED_BY", "document")]),
        ("about", [_out("ABOUT")]),
        ("mentioned_in", [_in("ABOUT", "document")]),
        ("alert_runbooks", [_out("FIRED_BY", "service"), _out("GOVERNED_BY", "document")]),
        ("alert_owner", [_out("FIRED_BY", "service"), _out("OWNED_BY", "team")]),
        ("team_runbooks", [_out("OWNS", "service"), _out("GOVERNED_BY", "document")]),
        ("team_incidents", [_out("OWNS", "service"), _out("AFFECTED_BY", "document")]),
        ("runbook_owner", [_out("GOVERNS", "service"), _out("OWNED_BY", "team")]),
        ("incident_owner", [_out("AFFECTED", "service"), _out("OWNED_BY", "team")]),
        ("incident_runbooks", [_out("AFFECTED", "service"), _out("GOVERNED_BY", "document")]),
        ("policy_owner", [_out("APPLIES_TO", "service"), _out("OWNED_BY", "team")]),
        ("about_owner", [_out("ABOUT", "service"), _out("OWNED_BY", "team")]),
        ("about_runbooks", [_out("ABOUT", "service"), _out("GOVERNED_BY", "document")]),
        ("owner_documents", [_out("OWNED_BY", "team"), _out("OWNS", "document")]),
        ("mentioned_in_owner", [_in("ABOUT", "document"), _out("OWNED_BY", "team")]),
    )
}


class UnknownGraphTemplate(GovindexError, ValueError):
    """A request names a template this server does not hold: a 400 naming the field."""

    field = "graph.templates"


class GraphWalkStopped(GovindexError):
    """A statement of the graph walk ran past the statement timeout: the walk was stopped
    and rolled back to before it began, so the rest of the read goes on without it."""


@dataclass(frozen=True)
class GraphTemplates:
    """The templates a server holds, the ones a request that names none walks, and the
    statement timeout each statement of a walk runs under."""

    templates: Mapping[str, GraphTemplate]
    defaults: tuple[str, ...]
    statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS

    @classmethod
    def of(
        cls,
        declared: Mapping[str, Sequence[GraphStep]] | None = None,
        defaults: Sequence[str] | None = None,
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
    ) -> GraphTemplates:
        """The built-in templates with `declared` added (a built-in name is replaced);
        `defaults` None: every built-in one. ValueError for a default that is not held."""
        templates = dict(BUILTIN_TEMPLATES)
        for name, steps in (declared or {}).items():
            templates[name] = GraphTemplate(name=name, steps=list(steps))
        chosen = tuple(BUILTIN_TEMPLATES) if defaults is None else tuple(dict.fromkeys(defaults))
        unknown = [n for n in chosen if n not in templates]
        if unknown:
            raise ValueError(
                f"default graph templates {', '.join(quote(n) for n in unknown)} are not "
                "declared; known: " + ", ".join(sorted(templates))
            )
        return cls(templates, chosen, statement_timeout_ms)

    def routes(
        self, templates: Sequence[str], relations: Sequence[str], hops: int
    ) -> tuple[GraphRoute, ...]:
        """The walks a request asks for, at most `hops` steps each.

        Named templates (none: the defaults) unless only `relations` are named; then one
        walk of up to `hops` steps, each along any of them in the direction its name reads.
        With both, a template walks only the steps these relations allow, and stops at the
        first they do not. Raises UnknownGraphTemplate naming the known templates."""
        unknown = [n for n in dict.fromkeys(templates) if n not in self.templates]
        if unknown:
            raise UnknownGraphTemplate(
                f"unknown graph template {', '.join(quote(n) for n in unknown)}; known: "
                + ", ".join(sorted(self.templates))
            )
        if hops < 1:
            return ()
        allowed = {_named_move(r) for r in relations}
        if relations and not templates:
            moves = tuple(sorted(allowed, key=lambda m: (m.relation, m.backwards)))
            return (GraphRoute("relations", (moves,) * hops),)
        routes = []
        for name in dict.fromkeys(templates or self.defaults):
            steps: list[tuple[GraphMove, ...]] = []
            for (move,) in self.templates[name].route.steps[:hops]:
                if allowed and GraphMove(move.relation, move.backwards) not in allowed:
                    break
                steps.append((move,))
            if steps:
                routes.append(GraphRoute(name, tuple(steps)))
        return tuple(routes)


def _named_move(name: str) -> GraphMove:
    stored, backwards = stored_relation(name)
    return GraphMove(stored, backwards)


BUILTIN = GraphTemplates.of()
