"""Fact mappings (`facts:` in a source manifest): how the rows of structured sources become
entities and the relations they state, each with its own validity and event time.

A mapping selects documents (files by path in git and folder sources, or one CDC table),
says where its entries are (CSV rows, YAML documents or list items, JSON array items, a
CDC row) and, for each entry, which fields hold business ids (entity rules) and which
relations the entry states (relation rules). Every entry becomes a governed fact chunk
(its faithful span, ACL, validity and trust, like any chunk) and its edges name it as
their evidence, so an edge is exactly as visible as the row that states it.

Field names are column names (CSV, CDC) or dotted paths into an entry (`spec.owner`).
Nothing here reads a document: `indexer.facts` applies a mapping.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from govindex.core.paths import check_patterns
from govindex_client._types import RELATION_NAMES

MAX_FACT_MAPPINGS = 16
MAX_RULES = 32  # entity or relation rules of one mapping
MAX_ALIASES = 8  # alias fields of one entity rule
MAX_PATTERNS = 16

FIELD_PATTERN = r"^[A-Za-z_][A-Za-z0-9_ -]{0,63}(\.[A-Za-z_][A-Za-z0-9_ -]{0,63}){0,7}$"
Field_ = Annotated[
    str,
    Field(
        max_length=256,
        pattern=FIELD_PATTERN,
        description="a column name, or a dotted path into an entry (spec.owner)",
    ),
]
EntityType = Annotated[
    str,
    Field(
        pattern=r"^[a-z][a-z0-9_-]{0,31}$",
        description="the entity's type, the prefix of its id (service, team, deployment)",
    ),
]
RuleName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]

_STRICT = ConfigDict(frozen=True, extra="forbid")


class EntityRef(BaseModel):
    """One end of a relation: a type and the field that holds the entity's business id."""

    model_config = _STRICT

    type: EntityType
    id: Field_ = Field(description="the field holding the business id (a list: one per value)")
    ref: Literal["id", "entity_ref"] = Field(
        default="id",
        description="id: the value is the id as written; entity_ref: a Backstage-style "
        "reference `[kind:][namespace/]name` whose name is the id",
    )


class EntityRule(EntityRef):
    """Entities an entry declares: their ids are known, so a reference to them resolves."""

    aliases: list[Field_] = Field(
        default_factory=list,
        max_length=MAX_ALIASES,
        description="fields holding other names of the entity (titles, spellings): kept as "
        "aliases, never used to merge two ids",
    )


class RelationRule(BaseModel):
    """An edge each entry states: subject, relation, object, with the edge's own time."""

    model_config = _STRICT

    subject: EntityRef
    relation: Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]{0,63}$")] = Field(
        description="a relation of the vocabulary (OWNED_BY, DEPLOYED_AS, DEPENDS_ON, …)"
    )
    object: EntityRef
    valid_from: Field_ | None = Field(
        default=None, description="the field the edge holds from (else the mapping's)"
    )
    valid_to: Field_ | None = Field(
        default=None, description="the field the edge holds until (else the mapping's)"
    )
    event_time: Field_ | None = Field(
        default=None, description="the field saying when the event happened (else the mapping's)"
    )
    confidence: float = Field(default=1.0, gt=0.0, le=1.0)


class FactMapping(BaseModel):
    """Which documents are structured facts, where their entries are, and what each says."""

    model_config = _STRICT

    name: RuleName = Field(description="the mapping's name: edges say `facts:<name>` made them")
    paths: list[str] | None = Field(
        default=None,
        max_length=MAX_PATTERNS,
        description="git and folder sources: .gitignore-style patterns of the files it maps",
    )
    table: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="cdc sources: the table (schema.table) whose rows it maps",
    )
    format: Literal["auto", "csv", "yaml", "json"] = Field(
        default="auto", description="auto: from the file's suffix"
    )
    items: Field_ | None = Field(
        default=None,
        description="YAML and JSON: the dotted path of the list of entries in each document; "
        "left out, a top-level list is the entries and a top-level mapping is one entry",
    )
    entities: list[EntityRule] = Field(default_factory=list, max_length=MAX_RULES)
    relations: list[RelationRule] = Field(default_factory=list, max_length=MAX_RULES)
    acl: Field_ | None = Field(
        default=None,
        description="the field holding the entry's principals (a list or a comma-separated "
        "string); left out or empty, the entry has the document's ACL",
    )
    valid_from: Field_ | None = Field(default=None, description="when the entry holds from")
    valid_to: Field_ | None = Field(default=None, description="when the entry holds until")
    event_time: Field_ | None = Field(
        default=None, description="when the event the entry records happened"
    )

    @model_validator(mode="after")
    def _selects_one_way(self) -> FactMapping:
        if (self.paths is None) == (self.table is None):
            raise ValueError("a fact mapping names either `paths` (files) or `table` (cdc)")
        if self.paths is not None:
            check_patterns(self.paths)
        if not self.entities and not self.relations:
            raise ValueError("a fact mapping needs entity rules, relation rules or both")
        return self

    def fields(self) -> frozenset[str]:
        """Every field the mapping reads (a CDC row carries these to the indexer)."""
        named: set[str] = set()
        for rule in self.entities:
            named.update((rule.id, *rule.aliases))
        for relation in self.relations:
            named.update((relation.subject.id, relation.object.id))
            named.update(
                f for f in (relation.valid_from, relation.valid_to, relation.event_time) if f
            )
        named.update(f for f in (self.acl, self.valid_from, self.valid_to, self.event_time) if f)
        return frozenset(named)

    def time_fields(self) -> frozenset[str]:
        """The fields the mapping reads as times."""
        named = {self.valid_from, self.valid_to, self.event_time}
        for relation in self.relations:
            named.update((relation.valid_from, relation.valid_to, relation.event_time))
        return frozenset(f for f in named if f)


def check_relations(mappings: list[FactMapping], declared: dict[str, str | None]) -> None:
    """Every relation a rule states is in the vocabulary or declared by the source."""
    known = RELATION_NAMES | frozenset(declared)
    for mapping in mappings:
        for rule in mapping.relations:
            if rule.relation not in known:
                raise ValueError(
                    f"fact mapping {mapping.name!r} states relation {rule.relation!r}, which "
                    "is neither in the vocabulary nor declared in the manifest's `relations`; "
                    f"known: {', '.join(sorted(known))}"
                )
