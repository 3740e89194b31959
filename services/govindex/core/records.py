"""The records govindex keeps: source manifests, document versions and chunks.

See docs/design/records.md.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from govindex.core.facts import MAX_FACT_MAPPINGS, FactMapping, check_relations
from govindex.core.formats import DEFAULT_INCLUDE
from govindex.core.inputs import has_control, quote
from govindex.core.links import template_problem
from govindex.core.paths import check_patterns, selected

# One definition of the value rules, shared with the read API's clients: identifiers (they
# end up in Kafka keys, index ids and URLs), principals and chunk kinds come from the client
# distribution, which imports nothing of ours.
from govindex_client._types import EVIDENCE_TYPE as EVIDENCE_TYPE_PATTERN
from govindex_client._types import SLUG as SLUG
from govindex_client._types import ChunkKind as ChunkKind
from govindex_client._types import Principal as Principal
from govindex_client._types import Slug as Slug


class DeletionMode(StrEnum):
    TOMBSTONE_AND_PURGE = "tombstone_and_purge"
    TOMBSTONE = "tombstone"


class TrustLevel(StrEnum):
    AUTHORITATIVE = "authoritative"
    REVIEWED = "reviewed"
    UNTRUSTED = "untrusted"


class AclPolicy(StrEnum):
    """Where a document's ACL comes from."""

    DOCUMENT_OR_DEFAULT = "document_or_default"  # the document's own ACL, else default_acl
    DOCUMENT_ONLY = "document_only"  # the document must carry one; no default
    MANIFEST_ONLY = "manifest_only"  # always default_acl, whatever the document says


class SourceType(StrEnum):
    GIT = "git"
    FOLDER = "folder"
    CDC = "cdc"


# A source's include/exclude patterns, refused at the boundary if .gitignore syntax does not
# allow them.
Patterns = Annotated[list[str], AfterValidator(check_patterns)]
INCLUDE_HELP = (
    "documents: .gitignore-style patterns; `*.md` matches at any depth; left out, every type "
    "govindex reads (Markdown, text, PDF, Word, PowerPoint, Excel, HTML, notebooks, CSV, YAML, "
    "JSON, HCL and code)"
)
EXCLUDE_HELP = "left out: .gitignore-style patterns"


# What git reads as `<transport>::<address>` (a remote helper: `ext::` runs a command) and as
# `<scheme>://`; see git's transport.c and connect.c.
_HELPER = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)::")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/]*)")
_SCHEMES = ("https", "ssh", "git+ssh", "ssh+git", "git", "file")
_SCP_LIKE = re.compile(
    r"^(?:[A-Za-z0-9_][A-Za-z0-9._~+-]*@)?([A-Za-z0-9_][A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\]):."
)
ACCEPTED_REMOTES = "https://, ssh://, git://, file://, user@host:path or a local path"


def check_remote_url(value: str) -> str:
    """A git remote that git can only read as a repository address over a plain transport.

    Refused: anything git would read as an option (a leading `-`), remote helpers
    (`ext::`, `fd::`, ...: they run programs), transports other than those in
    `ACCEPTED_REMOTES` (plain http sends content and credentials in the clear), a host
    or user starting with `-` (ssh would read it as an option) and control characters.
    """
    if value.startswith("-"):
        raise ValueError(
            "remote_url must not start with '-': git would read it as an option; "
            f"give {ACCEPTED_REMOTES} (./-name for a local folder named so)"
        )
    if has_control(value):
        raise ValueError("remote_url must not contain control characters or line breaks")
    if helper := _HELPER.match(value):
        raise ValueError(
            f"remote_url uses the transport {quote(helper.group(1) + '::')}, which is refused "
            f"(remote helpers run programs); give {ACCEPTED_REMOTES}"
        )
    if url := _SCHEME.match(value):
        scheme, authority = url.group(1), url.group(2)
        if scheme not in _SCHEMES:
            hint = "; use https://" if scheme == "http" else ""
            raise ValueError(
                f"remote_url uses the transport {quote(scheme + '://')}, which is refused"
                f"{hint}; give {ACCEPTED_REMOTES}"
            )
        user, _, host = authority.rpartition("@")
        if host.startswith("-") or user.startswith("-"):
            raise ValueError("remote_url's host or user must not start with '-'")
        return value
    colon, slash = value.find(":"), value.find("/")
    if colon != -1 and (slash == -1 or colon < slash) and not _SCP_LIKE.match(value):
        # git reads `host:path` (a colon before any slash) as ssh to that host
        raise ValueError(
            "remote_url looks like an scp-like address but is not user@host:path "
            f"(a host or user starting with '-' is refused); give {ACCEPTED_REMOTES}"
        )
    return value


class GitSettings(BaseModel):
    """Where a git source lives and which pushes count (webhooks, reconcile)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repository: str = Field(min_length=1, description="the provider's full name, e.g. org/repo")
    remote_url: str = Field(min_length=1, description="clone URL; a local path or file:// works")
    branch: str = "main"
    include: Patterns = Field(
        default_factory=lambda: list(DEFAULT_INCLUDE), description=INCLUDE_HELP
    )
    exclude: Patterns = Field(default_factory=list, description=EXCLUDE_HELP)

    webhook_secret_env: str | None = Field(
        default=None,
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="name of the environment variable holding the webhook secret",
    )

    @field_validator("remote_url")
    @classmethod
    def _remote_url_is_a_plain_transport(cls, value: str) -> str:
        return check_remote_url(value)


class FolderSettings(BaseModel):
    """Where a folder source lives, so it can be reconciled without an operator."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(min_length=1, description="the folder, absolute (or relative to the workers)")
    include: Patterns = Field(
        default_factory=lambda: list(DEFAULT_INCLUDE), description=INCLUDE_HELP
    )
    exclude: Patterns = Field(default_factory=list, description=EXCLUDE_HELP)


class CdcSettings(BaseModel):
    """How rows of one table, seen through Debezium change events, become documents."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str = Field(min_length=1, description="the Debezium topic of the table")
    table: str = Field(min_length=1, description="schema.table, e.g. public.runbooks")
    id_columns: list[str] = Field(min_length=1)
    text_columns: list[str] = Field(default_factory=list)
    text_template: str | None = Field(
        default=None, description="e.g. '# {title}\n\n{body}'; columns in braces"
    )
    acl_column: str | None = None
    valid_from_column: str | None = None
    valid_to_column: str | None = None
    metadata_columns: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _has_text(self) -> CdcSettings:
        if not self.text_columns and not self.text_template:
            raise ValueError("a cdc section needs text_columns or a text_template")
        return self


# What a chunk can support (`deployment_record`, `root_cause`): the types a pack request's
# required_evidence names. Stamped from a document's frontmatter, its source's
# evidence_rules and the chunk's kind; one rule for all of them.
EVIDENCE_TYPE = re.compile(EVIDENCE_TYPE_PATTERN)
EVIDENCE_TYPE_RULE = (
    "a lower-case letter, then up to 63 lower-case letters, digits, '_' or '-' "
    "(e.g. deployment_record)"
)
MAX_EVIDENCE_TYPES = 16  # per document's frontmatter, and per rule
MAX_EVIDENCE_RULES = 64
MAX_RULE_PATTERNS = 64


def check_evidence_type(value: str) -> str:
    """The value, if it is an evidence type; refused, not lower-cased: a type a pack asks
    for must be the type the chunk was stamped with, spelled one way."""
    if EVIDENCE_TYPE.fullmatch(value) is None:
        raise ValueError(f"must be an evidence type: {EVIDENCE_TYPE_RULE}")
    return value


EvidenceType = Annotated[
    str,
    Field(max_length=64, json_schema_extra={"pattern": f"^{EVIDENCE_TYPE.pattern}$"}),
    AfterValidator(check_evidence_type),
]


class EvidenceRule(BaseModel):
    """Evidence types a source's chunks support, chosen by document and chunk kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Patterns = Field(
        min_length=1,
        max_length=MAX_RULE_PATTERNS,
        description="the documents it applies to: a .gitignore-style pattern or a list of "
        "them, read as `include` reads them and matched against the document id, e.g. "
        "`incidents/` or `[deploys/, '!deploys/drafts/']`",
    )
    kinds: list[ChunkKind] | None = Field(
        default=None, description="the chunk kinds it applies to; any kind when left out"
    )
    evidence: list[EvidenceType] = Field(
        min_length=1,
        max_length=MAX_EVIDENCE_TYPES,
        description="the evidence types it stamps, e.g. deployment_record: each a "
        "lower-case letter, then up to 63 lower-case letters, digits, `_` or `-`",
    )

    @field_validator("path", mode="before", json_schema_input_type=str | list[str])
    @classmethod
    def _one_or_more(cls, value: object) -> object:
        """A pattern, or a list of them: one is a list of one."""
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list):
            raise ValueError("must be a pattern or a list of patterns")
        return value

    @field_validator("kinds")
    @classmethod
    def _kinds_not_empty(cls, value: list[ChunkKind] | None) -> list[ChunkKind] | None:
        if value is not None and not value:
            raise ValueError(
                "an empty kinds list would apply to no chunk; list chunk kinds or leave "
                "the field out to apply to every kind"
            )
        return value

    def matches(self, doc_id: str) -> bool:
        """Whether the rule's patterns select the document (its kinds are checked apart)."""
        return selected(doc_id, self.path, ())


class SourceManifest(BaseModel):
    """A registered source: who owns it, who may see it, how long history lives."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source_id: Slug
    tenant: Slug
    source_type: SourceType
    owner_team: str = Field(min_length=1)
    classification: Literal["public", "internal", "confidential", "restricted"]
    default_acl: list[Principal] | None = None
    acl_policy: AclPolicy = AclPolicy.DOCUMENT_OR_DEFAULT
    allowed_purposes: list[Slug] = Field(min_length=1)
    required_scopes: list[str] = Field(default_factory=list)
    trust_level: TrustLevel
    refresh_sla: timedelta = timedelta(hours=24)
    valid_time_field: str | None = None
    deletion_mode: DeletionMode = DeletionMode.TOMBSTONE_AND_PURGE
    history_retention: timedelta = timedelta(days=365)
    parser: str = "auto"  # or a parser name: markdown, csv, python, yaml, json, hcl, text
    schema_version: Literal[1] = 1
    enabled: bool = True
    git: GitSettings | None = None
    folder: FolderSettings | None = None
    cdc: CdcSettings | None = None
    web_url: str | None = Field(
        default=None,
        description="where a person opens a chunk: a template with {revision}, "
        "{source_version}, {path}, {line_start} and {line_end}, e.g. "
        "https://git.example.com/acme/handbook/blob/{revision}/{path}#L{line_start}-L{line_end}",
    )
    evidence_rules: list[EvidenceRule] = Field(
        default_factory=list,
        max_length=MAX_EVIDENCE_RULES,
        description="evidence types stamped on the chunks of the documents each rule's "
        "path selects (of its kinds only, when it names kinds); added to what a "
        "document's frontmatter and a chunk's kind say",
    )
    facts: list[FactMapping] = Field(
        default_factory=list,
        max_length=MAX_FACT_MAPPINGS,
        description="structured files or CDC tables whose entries are facts: each entry a "
        "fact chunk, with the entities it names and the relations it states "
        "(docs/sources/facts.md)",
    )
    relations: dict[
        Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]{0,63}$")],
        Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]{0,63}$")] | None,
    ] = Field(
        default_factory=dict,
        max_length=32,
        description="relations this source's fact mappings state beyond the vocabulary: "
        "name to the name it reads backwards (or null)",
    )

    @field_validator("web_url")
    @classmethod
    def _web_url_template(cls, value: str | None) -> str | None:
        if value is not None and (problem := template_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("default_acl")
    @classmethod
    def _acl_not_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError(
                "an empty default_acl would make documents visible to no one; "
                "list principals or leave the field out"
            )
        return value

    @model_validator(mode="after")
    def _policy_has_default(self) -> SourceManifest:
        if self.acl_policy is AclPolicy.MANIFEST_ONLY and not self.default_acl:
            raise ValueError("acl_policy manifest_only needs a default_acl")
        return self

    @model_validator(mode="after")
    def _facts_fit_the_source(self) -> SourceManifest:
        check_relations(self.facts, self.relations)
        for mapping in self.facts:
            if (mapping.table is not None) != (self.source_type is SourceType.CDC):
                raise ValueError(
                    f"fact mapping {mapping.name!r}: a cdc source maps its `table`, a git or "
                    "folder source maps files by `paths`"
                )
            if mapping.table is not None and self.cdc and mapping.table != self.cdc.table:
                raise ValueError(
                    f"fact mapping {mapping.name!r} maps table {mapping.table!r}, but this "
                    f"source reads {self.cdc.table!r}"
                )
        if len({m.name for m in self.facts}) != len(self.facts):
            raise ValueError("fact mappings need distinct names")
        return self

    def fact_mapping(self, path: str) -> FactMapping | None:
        """The first mapping that selects a file path or a CDC row's document id."""
        for mapping in self.facts:
            if mapping.paths is not None and selected(path, mapping.paths, ()):
                return mapping
            if mapping.table is not None and path.startswith(mapping.table + "/"):
                return mapping
        return None


@dataclass(frozen=True, slots=True)
class Span:
    """Where a chunk sits in its source: [char_start, char_end) and its 1-based lines."""

    char_start: int
    char_end: int
    line_start: int
    line_end: int


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    """What a parser produces: text at an exact span plus its place in the structure.

    A plain dataclass, not a wire model: parsers build many of these per document and
    pydantic's construction cost dominated parsing time. Stamping turns them into `Chunk`.
    """

    ordinal: int
    kind: ChunkKind
    text: str
    span: Span
    heading_path: tuple[str, ...]
    anchor: str
    parent_ordinal: int | None = None
    labels: tuple[str, ...] = ()
    context: str = ""

    def as_json(self) -> dict[str, object]:
        data = asdict(self)
        data["kind"] = self.kind.value
        return data


class Access(BaseModel):
    """Who may see a document's chunks, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    acl: tuple[str, ...] = Field(min_length=1)
    required_scopes: tuple[str, ...] = ()
    allowed_purposes: tuple[str, ...] = Field(min_length=1)
    classification: str


class Chunk(BaseModel):
    """A stamped chunk as stored in Postgres and projected to OpenSearch."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_id: str
    version_id: str
    tenant_id: str
    source_id: str
    doc_id: str
    source_version: str
    sequence: int
    version_sequence: int
    content_hash: str
    text: str
    valid_from: AwareDatetime
    valid_to: AwareDatetime | None
    recorded_at: AwareDatetime
    superseded_at: AwareDatetime | None
    observed_at: AwareDatetime
    indexed_at: AwareDatetime
    acl: tuple[str, ...]
    required_scopes: tuple[str, ...]
    allowed_purposes: tuple[str, ...]
    classification: str
    parser: str
    parser_version: str
    locator: str
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    heading_path: tuple[str, ...]
    labels: tuple[str, ...] = ()
    # The kinds of evidence the chunk can support (`deployment_record`, `root_cause`, …):
    # from frontmatter, the manifest's evidence_rules and the chunk's kind; what a pack
    # request's required_evidence selects by.
    evidence: tuple[str, ...] = ()
    # When the business event the chunk records happened (frontmatter `event_time`); None
    # when not known. It starts valid time when earlier than the observation.
    event_time: AwareDatetime | None = None
    context: str = ""
    parent_id: str | None
    prev_id: str | None
    next_id: str | None
    ordinal: int
    kind: str
    trust_level: str
    contains_instructions: bool
    token_estimate: int
    simhash: int
    index_generation: int


_NOT_SLUG = re.compile(r"[^\w\- ]")


def slugify(text: str) -> str:
    """GitHub-style heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return _NOT_SLUG.sub("", text.strip().lower()).replace(" ", "-")
