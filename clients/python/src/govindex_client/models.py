"""The read API's wire models: what it takes and answers (requests, responses, hits, anchors,
packs, manifests, verdicts, chunk views, errors, lineage), as the server validates them.

(Over 450 lines on purpose: the whole wire contract in one module a client imports, its
models referring to one another.)
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from govindex_client._types import (
    EVIDENCE_TYPE,
    GRAPH_TEMPLATE,
    MAX_GRAPH_TEMPLATES,
    PLAIN_TEXT,
    SINGLE_LINE,
    SLUG,
    ChunkKind,
    Principal,
    Slug,
    stored_relation,
)

__all__ = [
    "CHANNELS",
    "MAX_ENTITIES",
    "MAX_HYDRATED",
    "MAX_INT",
    "MAX_ITEMS",
    "MAX_LABELS",
    "MAX_NEIGHBOURS",
    "MAX_OMISSIONS",
    "MAX_PINS",
    "MAX_PRINCIPALS",
    "MAX_QUERY",
    "MAX_RELATIONS",
    "MAX_REQUIRED",
    "MAX_SOURCES",
    "Anchor",
    "ApiError",
    "Budget",
    "CacheMode",
    "Channel",
    "ChunkView",
    "DerivedArtifact",
    "Described",
    "Diversity",
    "DocKey",
    "Entity",
    "EvidenceType",
    "Filters",
    "Flag",
    "FlagKind",
    "GraphSpec",
    "Highlight",
    "Hit",
    "Hydrated",
    "Hydration",
    "Id",
    "Label",
    "Manifest",
    "ManifestItem",
    "MissingEvidence",
    "Omission",
    "OmissionStage",
    "Pack",
    "PackItem",
    "PackRequest",
    "Pin",
    "PinVerdict",
    "Query",
    "Readiness",
    "Registered",
    "Relation",
    "RelationEdge",
    "RelationsRequest",
    "RelationsResponse",
    "RequiredEvidence",
    "Scoped",
    "SearchRequest",
    "SearchResponse",
    "StoredPack",
    "Subject",
    "TraceLine",
    "Verdict",
    "VerifyRequest",
    "VerifyResponse",
    "Versions",
    "WirePrincipal",
    "Withheld",
    "about",
]

Channel = Literal["bm25", "fulltext", "structured", "graph", "dense"]
CHANNELS: tuple[Channel, ...] = ("bm25", "fulltext", "structured", "graph", "dense")
CacheMode = Literal["use", "refresh", "bypass"]
Verdict = Literal["valid", "stale", "invalid", "tampered"]

_WIRE = ConfigDict(frozen=True, extra="forbid")

# What one request may carry. Every list and string a request holds is bounded, so the work
# it asks for and any message about it stay small
# (docs/design/guarantees.md#hostile-input-stays-small); a value past a bound, or
# holding a control character, is a 400 naming the field.
MAX_PRINCIPALS = 64
MAX_ENTITIES = 32
MAX_LABELS = 64
MAX_SOURCES = 64
MAX_RELATIONS = 32
MAX_QUERY = 4000
MAX_ITEMS = 200
MAX_NEIGHBOURS = 2
# A pack item pins its chunk, its parent and its neighbours on each side; a manifest pins
# at most this many chunks, so every manifest a pack was built with can be verified.
MAX_HYDRATED = 1 + 2 * MAX_NEIGHBOURS
MAX_PINS = MAX_ITEMS * (1 + MAX_HYDRATED)
MAX_INT = 2**63 - 1  # Postgres bigint

# Principals and scopes: the pattern refuses whitespace, SINGLE_LINE the other controls.
WirePrincipal = Annotated[Principal, SINGLE_LINE]
# Chunk and version ids (32 hex digits today), content hashes, citation keys.
Id = Annotated[str, Field(min_length=1, max_length=128), SINGLE_LINE]
Entity = Annotated[str, Field(min_length=1, max_length=512), SINGLE_LINE]
Label = Annotated[str, Field(min_length=1, max_length=256), SINGLE_LINE]
Relation = Annotated[str, Field(min_length=1, max_length=128), SINGLE_LINE]
Query = Annotated[str, Field(max_length=MAX_QUERY), PLAIN_TEXT]
# `tenant/source/doc`: the same rule as a doc id (no C0 controls), which ingest enforces.
DocKey = Annotated[
    str, Field(min_length=1, max_length=2 * 128 + 2 + 1024, pattern=r"^[^\x00-\x1f]+$")
]


class Subject(BaseModel):
    """Who a read is for: the principals it may see as, and the scopes it holds.

    The read API admits only what the request's credential proves (a 403 names anything
    beyond it). Principals omitted or null: the credential's own, a verified JWT's
    `user:<sub>` and `group:<g>`; a service token carries no subject, so it must name them.
    Scopes omitted or null: the credential's (a JWT's `scope`/`scp`; none for a service
    token); `[]` given means none. In process, with no credential, omitted scopes are none.
    """

    model_config = _WIRE

    principals: list[WirePrincipal] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PRINCIPALS,
        description="omitted or null: the credential's own (required with a service token)",
    )
    # Defaults to [] (not None) so code in process reads a list; whether a request named
    # its scopes is `scopes_asked`.
    scopes: list[WirePrincipal] | None = Field(
        default_factory=list,
        max_length=MAX_PRINCIPALS,
        description="omitted or null: the credential's own; [] means none",
    )

    @property
    def scopes_asked(self) -> list[str] | None:
        """The scopes the read names; None (omitted or null): the credential's own."""
        return self.scopes if "scopes" in self.model_fields_set else None

    @model_serializer(mode="wrap")
    def _unnamed_scopes_stay_unnamed(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Dumped and sent (the client does), a subject means what it did: scopes it did not
        # name are the credential's, not [].
        data = handler(self)
        if "scopes" not in self.model_fields_set and isinstance(data, dict):
            data.pop("scopes", None)
        return data


class Filters(BaseModel):
    model_config = _WIRE

    sources: list[Slug] = Field(default_factory=list, max_length=MAX_SOURCES)
    kinds: list[ChunkKind] = Field(default_factory=list, max_length=len(ChunkKind))
    labels: list[Label] = Field(default_factory=list, max_length=MAX_LABELS)
    path_prefix: Annotated[str, Field(max_length=1024), SINGLE_LINE] | None = None
    event_from: AwareDatetime | None = Field(
        default=None, description="only chunks whose event_time is at or after this"
    )
    event_to: AwareDatetime | None = Field(
        default=None, description="only chunks whose event_time is before this"
    )


def _in_vocabulary(relation: str) -> str:
    stored_relation(relation)  # a ValueError names the vocabulary
    return relation


class GraphSpec(BaseModel):
    """Which walks graph expansion takes from the seed entities, and how far.

    The server walks only path templates it approves (`GOVINDEX_GRAPH_TEMPLATES`, added to
    its built-in ones): those `templates` names, or its default ones when it names none. A
    template's step walks one relation in one direction, optionally only to one entity type,
    and every edge walked needs evidence the caller may see.
    """

    model_config = _WIRE

    templates: list[Annotated[str, Field(pattern=GRAPH_TEMPLATE)]] = Field(
        default_factory=list,
        max_length=MAX_GRAPH_TEMPLATES,
        description="path templates to walk, by name; empty: the server's default ones "
        "(unless `relations` are named). A name the server does not hold is a 400 listing "
        "the ones it does",
    )
    relations: list[Annotated[Relation, AfterValidator(_in_vocabulary)]] = Field(
        default_factory=list,
        max_length=MAX_RELATIONS,
        description="relations of the vocabulary, each walked only the way its name reads "
        "(OWNED_BY from a service to its team, OWNS from a team to what it owns). Without "
        "`templates`: walk only these, up to `hops` steps; with them: a template walks only "
        "the steps these allow",
    )
    hops: int = Field(
        default=2, ge=0, le=2, description="at most this many steps of any walk (0: no walk)"
    )


class Hydration(BaseModel):
    model_config = _WIRE

    neighbours: int = Field(default=1, ge=0, le=MAX_NEIGHBOURS)
    parent: bool = True


class Budget(BaseModel):
    model_config = _WIRE

    max_tokens: int = Field(default=4000, ge=1, le=200_000)
    max_items: int = Field(default=20, ge=1, le=MAX_ITEMS)
    max_per_document: int = Field(default=3, ge=1, le=200)


class Scoped(BaseModel):
    """Who reads, for which tenant and purpose, about which moment: what every read names."""

    model_config = _WIRE

    tenant: str = Field(pattern=SLUG)
    subject: Subject = Field(
        default_factory=Subject, description="omitted: the credential's own principals and scopes"
    )
    purpose: Slug
    as_of: AwareDatetime | None = Field(
        default=None, description="valid time asked about; default: the request's time"
    )
    known_at: AwareDatetime | None = Field(
        default=None, description="system time: what the index held at this moment"
    )


class SearchRequest(Scoped):
    """A governed search: every field that decides what may come back is explicit."""

    model_config = _WIRE

    query: Query = ""
    entities: list[Entity] = Field(default_factory=list, max_length=MAX_ENTITIES)
    filters: Filters = Field(default_factory=Filters)
    channels: list[Channel] = Field(
        default_factory=lambda: list(CHANNELS), min_length=1, max_length=len(CHANNELS)
    )
    graph: GraphSpec = Field(default_factory=GraphSpec)
    window: int = Field(default=50, ge=1, le=500, description="candidates per channel")
    limit: int = Field(default=10, ge=1, le=200)
    trace: bool = False
    cache: CacheMode = "use"

    @model_validator(mode="after")
    def _asks_something(self) -> SearchRequest:
        if not self.query.strip() and not self.entities:
            raise ValueError("give a query text or at least one seed entity")
        return self


class Diversity(BaseModel):
    """How varied a pack's items are, besides the budget: MMR against what is already
    chosen, a minimum of distinct documents and sources, a cap per parent section."""

    model_config = _WIRE

    mmr_lambda: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="maximal marginal relevance: each next item maximises λ·relevance − "
        "(1−λ)·its highest similarity to an item already chosen; 1 is rank order, null off",
    )
    min_documents: int = Field(
        default=0, ge=0, le=MAX_ITEMS, description="items from at least this many documents"
    )
    min_sources: int = Field(
        default=0, ge=0, le=MAX_SOURCES, description="items from at least this many sources"
    )
    max_per_parent: int | None = Field(
        default=None, ge=1, le=200, description="at most this many items under one parent"
    )


EvidenceType = Annotated[str, Field(pattern=f"^{EVIDENCE_TYPE}$")]
MAX_REQUIRED = 16


class RequiredEvidence(BaseModel):
    """Evidence a pack must hold: at least `min` items of this type, selected first."""

    model_config = _WIRE

    type: EvidenceType
    min: int = Field(default=1, ge=1, le=20)


class PackRequest(SearchRequest):
    hydration: Hydration = Field(default_factory=Hydration)
    required_evidence: list[RequiredEvidence] = Field(
        default_factory=list,
        max_length=MAX_REQUIRED,
        description="evidence the pack must hold, selected first within the budget; the "
        "manifest says what is missing (status partial)",
    )
    diversity: Diversity = Field(default_factory=Diversity)
    dedup_threshold: int = Field(
        default=3, ge=0, le=16, description="SimHash Hamming distance for near-duplicates"
    )
    budget: Budget = Field(default_factory=Budget)


class Anchor(BaseModel):
    """Where a cited span lives, exactly: enough to open it again and to check it."""

    model_config = _WIRE

    chunk_id: str
    tenant: str
    source_id: str
    doc_id: str
    version_id: str
    sequence: int
    source_version: str
    content_hash: str
    locator: str
    heading_path: list[str]
    char_start: int
    char_end: int
    line_start: int
    line_end: int


class Highlight(BaseModel):
    model_config = _WIRE

    start: int = Field(description="offset in the chunk's text")
    end: int
    term: str


class Described(BaseModel):
    """What a chunk is, for whoever cites it: when it holds, when it was seen and recorded,
    how far it is trusted, how it is classified, and where a person opens it."""

    model_config = _WIRE

    kind: str
    title: str | None = Field(default=None, description="the document's title, if it has one")
    valid_from: datetime = Field(description="valid time: from when the content holds")
    valid_to: datetime | None = Field(description="valid time: until when (null: open)")
    observed_at: datetime = Field(description="when the source last changed it (event time)")
    recorded_at: datetime = Field(description="system time: when the index recorded it")
    event_time: datetime | None = Field(
        default=None, description="when the business event it records happened, if known"
    )
    trust_level: Literal["authoritative", "reviewed", "untrusted"]
    classification: Literal["public", "internal", "confidential", "restricted"]
    labels: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(
        default_factory=list,
        description="the kinds of evidence the chunk can support (deployment_record, "
        "root_cause, step, …): what required_evidence selects by",
    )
    stale_source: bool = Field(
        default=False,
        description="its source last synced longer ago than the source's refresh_sla: the "
        "content may be out of date",
    )
    source_url: str | None = Field(
        default=None,
        description="the file at its source_version with a line anchor, from the source "
        "manifest's web_url template; null when the source has none",
    )


def about(described: Described) -> dict[str, Any]:
    """What a chunk is (`Described`'s fields but `kind`), as JSON values: the metadata the
    LangChain and LlamaIndex adapters attach, so a prompt can say "valid 07-01 to 08-15"."""
    return described.model_dump(
        mode="json",
        include={
            "title",
            "valid_from",
            "valid_to",
            "observed_at",
            "recorded_at",
            "event_time",
            "trust_level",
            "classification",
            "labels",
            "evidence",
            "stale_source",
            "source_url",
        },
    )


class Hit(Described):
    model_config = _WIRE

    rank: int
    score: float
    channels: dict[str, int] = Field(description="this hit's rank in each channel that found it")
    anchor: Anchor
    text: str
    highlights: list[Highlight]
    graph_path: list[str] = Field(default_factory=list)


class TraceLine(BaseModel):
    """One decision; never about a candidate refused by tenant, ACL, scope or purpose."""

    model_config = _WIRE

    stage: str
    chunk_id: str | None = None
    decision: str
    reason: str


class SearchResponse(BaseModel):
    model_config = _WIRE

    as_of: datetime
    known_at: datetime | None
    hits: list[Hit]
    degraded: list[str] = Field(
        default_factory=list,
        description="channels that could not answer: bm25 when the index is down, graph "
        "when its walk ran past the statement timeout",
    )
    cached: bool = False
    trace: list[TraceLine] | None = None


FlagKind = Literal["superseded", "relation", "numeric_or_negation", "authority"]


class Flag(BaseModel):
    """A conflict among items of the pack, on its members only; it annotates, never
    removes. `superseded`: one member's document supersedes another's; `relation`: one
    subject with two objects of a single-valued relation at as_of; `numeric_or_negation`:
    near-duplicates whose numbers or negations differ; `authority`: such a contradiction
    where a less trusted member contradicts a more trusted one."""

    model_config = _WIRE

    kind: FlagKind
    detail: Annotated[str, Field(max_length=1024), SINGLE_LINE]
    members: list[Id] = Field(
        max_length=MAX_ITEMS, description="keys of the items in conflict: the flag is on each"
    )
    evidence: list[Id] = Field(
        max_length=MAX_PINS, description="admitted chunk ids the conflict rests on"
    )
    hint: Annotated[str, Field(max_length=512), SINGLE_LINE] = Field(
        description="how to resolve it, e.g. 'prefer the version valid at as_of, then the "
        "higher trust level'"
    )


class Hydrated(Described):
    model_config = _WIRE

    relation: Literal["parent", "previous", "next"]
    anchor: Anchor
    text: str
    tokens: int


class PackItem(Described):
    model_config = _WIRE

    key: str = Field(description="citation key, e.g. S1")
    rank: int
    score: float
    channels: dict[str, int]
    anchor: Anchor
    text: str
    tokens: int = Field(description="this item's tokens, hydration included")
    highlights: list[Highlight]
    hydrated: list[Hydrated]
    corroboration: list[Anchor] = Field(
        default_factory=list, description="other admitted copies of the same content"
    )
    flags: list[Flag] = Field(default_factory=list)
    graph_path: list[str] = Field(default_factory=list)


class Pin(BaseModel):
    """One chunk a pack holds, pinned for verification."""

    model_config = _WIRE

    chunk_id: Id
    doc: DocKey = Field(description="tenant/source/doc")
    version_id: Id
    sequence: int = Field(ge=0, le=MAX_INT)
    # Stored as ingest took it (1 to 512 characters); Postgres text never holds a NUL.
    source_version: str = Field(min_length=1, max_length=512, pattern=r"^[^\x00]+$")
    content_hash: Id


class ManifestItem(Pin):
    key: Id
    hydrated: list[Pin] = Field(max_length=MAX_HYDRATED)


OmissionStage = Literal["time", "deletion", "integrity", "trust", "dedup", "budget"]
MAX_OMISSIONS = 1000


class Omission(BaseModel):
    """A candidate the pack left out, and why: refused by a gate that may be told (time,
    deletion, integrity, trust), folded into an item by dedup, or skipped by the budget. A
    candidate refused for tenant, ACL, scope or purpose is never reported."""

    model_config = _WIRE

    chunk_id: Id
    doc: DocKey = Field(description="tenant/source/doc")
    version_id: Id
    sequence: int = Field(ge=0, le=MAX_INT)
    stage: OmissionStage
    reason: Annotated[str, Field(max_length=512), SINGLE_LINE]
    replacement: Pin | None = Field(
        default=None,
        description="time: the version of the same document valid at as_of, else the newer "
        "one; dedup: the item's chunk it was folded into",
    )


class MissingEvidence(BaseModel):
    """Required evidence the pack does not hold enough of, and why."""

    model_config = _WIRE

    type: EvidenceType
    min: int = Field(ge=1, le=20)
    found: int = Field(ge=0, le=20)
    why: Literal["none_admissible", "over_budget"] = Field(
        description="none_admissible: no more chunk of the type the subject may see at "
        "as_of matched; over_budget: there were, but the budget could not hold them"
    )


class Versions(BaseModel):
    """What built the pack, each as name/version."""

    model_config = _WIRE

    packer: Annotated[str, Field(max_length=128), SINGLE_LINE]
    estimator: Annotated[str, Field(max_length=128), SINGLE_LINE] = Field(
        description="the token estimator the budget was counted with"
    )
    embedder: Annotated[str, Field(max_length=256), SINGLE_LINE] | None = Field(
        description="the dense channel's model; null when the dense channel is off"
    )


class Manifest(BaseModel):
    """A pack without its text: what it held, for whom, why and when; hashed."""

    model_config = _WIRE

    # 2 adds pack_id, built_at, versions, omissions and conflicts; a version 1 manifest still
    # verifies (judged as of its as_of, having no build time).
    schema_version: Literal[1, 2] = 2
    pack_id: Id | None = Field(default=None, description="this pack's id (schema 2)")
    built_at: AwareDatetime | None = Field(
        default=None, description="when the pack was built; verification compares with it"
    )
    versions: Versions | None = None
    tenant: Slug
    subject: Subject
    purpose: Slug
    query: Query
    entities: list[Entity] = Field(max_length=MAX_ENTITIES)
    # Aware: verification compares them with the chunks' own (aware) validity times.
    as_of: AwareDatetime
    known_at: AwareDatetime | None
    budget: Budget
    index_generation: int | None = Field(ge=0, le=MAX_INT)
    items: list[ManifestItem] = Field(
        description=f"at most {MAX_ITEMS} items and {MAX_PINS} pins (items and hydrated) in all"
    )
    omissions: list[Omission] = Field(default_factory=list, max_length=MAX_OMISSIONS)
    conflicts: list[Flag] = Field(
        default_factory=list, max_length=MAX_PINS, description="every item flag, once"
    )
    required_evidence: list[RequiredEvidence] = Field(default_factory=list, max_length=MAX_REQUIRED)
    status: Literal["complete", "partial"] = Field(
        default="complete", description="partial: some required evidence is missing"
    )
    missing_evidence: list[MissingEvidence] = Field(default_factory=list, max_length=MAX_REQUIRED)
    # Empty while the hash itself is being computed over the draft.
    pack_hash: Annotated[str, Field(max_length=128), SINGLE_LINE] = Field(
        description="sha256 of the canonical JSON of every other field"
    )

    @field_validator("subject")
    @classmethod
    def _subject_named(cls, subject: Subject) -> Subject:
        if subject.principals is None or subject.scopes is None:
            raise ValueError(
                "a manifest names the principals and scopes its pack was built for; this one "
                "leaves them out: verify the manifest the pack came with"
            )
        return subject

    @field_validator("items")
    @classmethod
    def _pins_bounded(cls, items: list[ManifestItem]) -> list[ManifestItem]:
        pinned = len(items) + sum(len(i.hydrated) for i in items)
        if pinned > MAX_PINS:
            raise ValueError(
                f"a manifest holds at most {MAX_PINS} pins (items and their hydrated chunks); "
                f"this one holds {pinned}"
            )
        if len(items) > MAX_ITEMS:
            raise ValueError(f"a manifest holds at most {MAX_ITEMS} items, not {len(items)}")
        return items


class Pack(BaseModel):
    model_config = _WIRE

    as_of: datetime
    known_at: datetime | None
    items: list[PackItem]
    used_tokens: int
    max_tokens: int
    manifest: Manifest
    degraded: list[str] = Field(default_factory=list)
    cached: bool = False
    trace: list[TraceLine] | None = None


class Withheld(BaseModel):
    """An item of a kept pack not served again, and why: its text was purged, or a pin of
    it is no longer valid for the caller."""

    model_config = _WIRE

    key: str
    chunk_id: str
    reason: str


class StoredPack(BaseModel):
    """GET /v1/packs/{id}: a kept pack, re-judged for the caller now. `pack.items` holds
    the items still valid (or stale) for the caller, in their order; `withheld` the others,
    never with their text. `status` is the items' verdict for the caller now."""

    model_config = _WIRE

    pack: Pack
    withheld: list[Withheld] = Field(default_factory=list)
    status: Literal["valid", "stale", "partial"]
    checked_at: datetime
    expires_at: datetime


class RelationsRequest(Scoped):
    """POST /v1/relations: the edges of one entity at a moment, gated like chunks."""

    model_config = _WIRE

    entity: Entity = Field(description="a business id, e.g. service:payment-api")
    relation: Relation | None = Field(
        default=None,
        description="one relation of the vocabulary, or its inverse (OWNS reads OWNED_BY "
        "backwards); null: every relation",
    )
    direction: Literal["out", "in", "both"] = Field(
        default="both", description="out: the entity is the subject; in: the object"
    )
    object_type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")] | None = Field(
        default=None,
        description="only edges whose other end is of this type (team, deployment, …)",
    )
    limit: int = Field(default=50, ge=1, le=500)

    @field_validator("relation")
    @classmethod
    def _known(cls, relation: str | None) -> str | None:
        if relation is not None:
            stored_relation(relation)  # a ValueError names the vocabulary
        return relation


class RelationEdge(BaseModel):
    """One edge, as its evidence states it, valid at the request's as_of."""

    model_config = _WIRE

    edge_id: str
    subject: str
    relation: str = Field(description="the relation as stored (subject to object)")
    object: str
    direction: Literal["out", "in"] = Field(description="the asked entity's side")
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    source_version: str
    event_time: datetime | None = Field(
        default=None, description="when the event the edge records happened, if known"
    )
    confidence: float = Field(default=1.0, description="how sure its extraction is, (0, 1]")
    method: str = Field(
        default="frontmatter",
        description="how it was extracted: frontmatter, or facts:<mapping> (a fact mapping)",
    )
    unresolved: bool = Field(
        default=False,
        description="the other end is an id no fact entry declares: kept as written, never "
        "merged with another by name",
    )
    evidence: Anchor = Field(description="the chunk that states the edge")
    contradicts: list[str] = Field(
        default_factory=list,
        description="edges that cannot hold with this one (a second owner at once): both "
        "kept, never overwritten",
    )


class RelationsResponse(BaseModel):
    model_config = _WIRE

    entity: str
    as_of: datetime
    known_at: datetime | None
    edges: list[RelationEdge]


class VerifyRequest(BaseModel):
    model_config = _WIRE

    manifest: Manifest


class PinVerdict(BaseModel):
    model_config = _WIRE

    chunk_id: str
    key: str
    status: Literal["valid", "stale", "invalid"]
    reason: str | None = None


class VerifyResponse(BaseModel):
    model_config = _WIRE

    status: Verdict
    checked_at: datetime
    pins: list[PinVerdict]


class ChunkView(Described):
    """GET /v1/chunks/{id}: one anchor, opened through the same gates."""

    model_config = _WIRE

    anchor: Anchor
    text: str
    as_of: datetime


class FieldError(BaseModel):
    """One problem of a refused request: where it is and what is wrong."""

    model_config = _WIRE

    field: str | None = None
    reason: str


# Every problem of a request is reported, but a body with thousands of wrong items stays small.
MAX_FIELD_ERRORS = 50


class ApiError(BaseModel):
    """An error answer; `field` and `reason` name the first problem, `errors` every problem
    (at most MAX_FIELD_ERRORS) of a malformed request."""

    model_config = _WIRE

    error: str
    field: str | None = None
    reason: str
    errors: list[FieldError] = Field(default_factory=list, max_length=MAX_FIELD_ERRORS)


class DerivedArtifact(BaseModel):
    """Body of POST /v1/lineage: a stored summary or memory says what it was built from."""

    model_config = _WIRE

    tenant_id: Slug
    kind: Annotated[str, Field(min_length=1, max_length=64), SINGLE_LINE]
    id: Annotated[str, Field(min_length=1, max_length=512), SINGLE_LINE]
    built_from: list[DocKey] = Field(
        min_length=1, max_length=10_000, description="chunk ids or tenant/source/doc keys"
    )
    location: Annotated[str, Field(min_length=1, max_length=2048), SINGLE_LINE]
    text: Annotated[str, Field(max_length=1_000_000), PLAIN_TEXT] | None = None


class Registered(BaseModel):
    """The answer to POST /v1/lineage (201): the artifact registered, as `kind/id`."""

    model_config = _WIRE

    registered: str


class Readiness(BaseModel):
    """GET /readyz: ready while the system of record answers; else what is down and why."""

    model_config = _WIRE

    ok: bool
    down: dict[str, str] = Field(default_factory=dict)
