"""The plain records that cross the ports: decided facts between layers, not wire models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from govindex.core.envelope import KafkaRecord
from govindex.core.records import Chunk

Outcome = Literal["indexed", "metadata_updated", "tombstoned", "duplicate", "stale"]


# --- records crossing the ports -------------------------------------------------------


@dataclass(frozen=True)
class DocumentKey:
    tenant_id: str
    source_id: str
    doc_id: str


@dataclass(frozen=True)
class DocumentState:
    """What the index holds for a document, read under its row lock."""

    active: bool
    last_sequence: int
    current_version_id: str | None
    current_content_hash: str | None
    current_parser: tuple[str, str] | None
    current_principals: frozenset[str]


@dataclass(frozen=True)
class OutboxMessage:
    """An event to publish after the transaction that decided it commits.

    With `awaits`, the event stays pending (and is re-published) until that consumer has
    processed or dead-lettered it: the broker is a transport, never the only copy.
    """

    topic: str
    record: KafkaRecord
    awaits: str | None = None
    tenant_id: str | None = None
    source_id: str | None = None
    content_hash: str | None = None  # a claim-check blob the event needs until it settles
    sequence: int | None = None

    @property
    def event_id(self) -> str | None:
        value = dict(self.record.headers).get("ce_id")
        return value.decode() if value is not None else None


@dataclass(frozen=True)
class GraphEdge:
    """An edge a version states. Frontmatter edges hold as long as their document's version
    (`own_time` False); a fact mapping's edge has its own window and event time from its
    entry's fields (`own_time` True: `valid_to` None is open-ended) and names the chunk of
    its entry (`evidence`, an index into the plan's chunks; None: the first)."""

    subject: str
    relation: str
    object: str
    subject_alias: str
    object_alias: str
    own_time: bool = False
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    event_time: datetime | None = None
    evidence: int | None = None
    confidence: float = 1.0
    method: str = "frontmatter"  # or facts:<mapping name>


@dataclass(frozen=True)
class EntityDecl:
    """An entity a fact entry declares by its business id, with the names it goes by."""

    entity_id: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class _AboutOneDocument:
    """Which document, and the event (sequence, source_version) a plan comes from."""

    tenant_id: str
    source_id: str
    doc_id: str
    sequence: int
    source_version: str

    @property
    def key(self) -> DocumentKey:
        return DocumentKey(self.tenant_id, self.source_id, self.doc_id)


@dataclass(frozen=True)
class _VersionStamps:
    """When a version is valid, when it was seen and recorded, which parser cut it."""

    valid_from: datetime
    valid_to: datetime | None
    observed_at: datetime
    recorded_at: datetime
    parser: str
    parser_version: str


@dataclass(frozen=True)
class VersionPlan(_AboutOneDocument, _VersionStamps):
    """A decided content revision (or metadata-only change), ready to execute."""

    content_hash: str
    content: str
    media_type: str
    title: str | None
    path: str | None
    metadata: dict[str, Any]
    chunks: Sequence[Chunk]
    version_id: str
    edges: Sequence[GraphEdge] = ()
    entities: Sequence[EntityDecl] = ()  # declared by the version's fact entries
    # The event's content when an extractor made `content` of it (base64 for a binary
    # file): kept so a new extractor version can re-extract without the source.
    raw_content: str | None = None
    # Per model (name, version): one unit-length float32 vector per chunk, in order.
    vectors: Mapping[tuple[str, str], Sequence[bytes]] = field(default_factory=dict)
    # A configured model could not embed the chunks now (its service down or slow): they
    # are committed without its vectors and queued for it (`embedding_backlog`).
    embed_pending: bool = False


@dataclass(frozen=True)
class TombstonePlan(_AboutOneDocument):
    event_id: str
    reason: str
    deletion_mode: str
    deleted_at: datetime
    recorded_at: datetime


@dataclass(frozen=True)
class ApplyResult:
    """`written`: the chunk rows the change wrote, as stored, when no other statement of
    the transaction changed them (a document's first version, alone in its batch); the
    projection then need not read them back. None: read them back."""

    outcome: Outcome
    version_id: str | None = None
    chunk_count: int = 0
    revoked: tuple[str, ...] = ()
    written: tuple[Chunk, ...] | None = None


@dataclass(frozen=True)
class BulkResult:
    """What one bulk write did: how many chunks the index took (a 409, "already newer", is
    neither taken nor rejected), and the chunks it refused for good, with the reason."""

    taken: int
    rejected: Mapping[str, str]


@dataclass(frozen=True)
class DocumentRow:
    tenant_id: str
    source_id: str
    doc_id: str
    state: str
    last_sequence: int
    source_version: str
    content_hash: str | None
    last_indexed_at: datetime
    chunk_count: int
    valid_from: datetime | None
    valid_to: datetime | None


@dataclass(frozen=True)
class TombstoneRow:
    tenant_id: str
    source_id: str
    doc_id: str
    sequence: int
    event_id: str
    deletion_mode: str
    deleted_at: datetime
    recorded_at: datetime
    chunk_ids: list[str]
    purge_state: str
    purge_attempts: int
    purge_error: str | None


@dataclass(frozen=True)
class StoredVersion(_VersionStamps):
    """A current version with its raw content: what `reparse` re-chunks."""

    tenant_id: str
    source_id: str
    doc_id: str
    path: str | None
    version_id: str
    version_sequence: int
    sequence: int
    source_version: str
    content_hash: str
    content: str
    media_type: str
    raw_content: str | None = None  # what an extractor made `content` of, if one did


@dataclass(frozen=True)
class ExpiredVersion:
    version_id: str
    doc_id: str
    version_sequence: int
    superseded_at: datetime


@dataclass(frozen=True)
class Invalidated:
    kind: str
    artifact_id: str
    location: str


# --- the read audit ---------------------------------------------------------------------

AuditEndpoint = Literal["search", "pack", "chunk", "verify", "lineage", "stored_pack", "relations"]
AUDIT_ENDPOINTS: tuple[AuditEndpoint, ...] = (
    "search",
    "pack",
    "chunk",
    "verify",
    "lineage",
    "stored_pack",
    "relations",
)
AUDIT_LIST_MAX = 1000  # the most rows one listing returns


@dataclass(frozen=True)
class AuditEntry:
    """One answered read, as the read audit keeps it.

    `credential_kind` and `credential_name` name the credential that proved the caller
    (`token` or `jwt`, and its configured name), `subject` a JWT's `sub`; `principals` and
    `scopes` are the subject the read ran as (proven or admitted), never more than the
    credential proved. `request_hash` is `sha256:<hex>` of the canonical JSON of the request
    body (sorted keys, no spaces), so a request can be matched to its record without the
    record holding its text; `chunk_ids` are the chunks the answer returned, `pack_hash` a
    pack's manifest hash. `at` None: the database's time when the entry is recorded.
    """

    endpoint: AuditEndpoint
    status: int
    credential_kind: str
    credential_name: str
    tenant: str
    principals: tuple[str, ...]
    scopes: tuple[str, ...]
    request_hash: str
    chunk_ids: tuple[str, ...] = ()
    subject: str | None = None
    purpose: str | None = None
    as_of: datetime | None = None
    known_at: datetime | None = None
    pack_hash: str | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class AuditRow:
    """A recorded `AuditEntry`: its id and the time it was recorded at."""

    id: int
    at: datetime
    endpoint: AuditEndpoint
    status: int
    credential_kind: str
    credential_name: str
    subject: str | None
    tenant: str
    principals: tuple[str, ...]
    scopes: tuple[str, ...]
    purpose: str | None
    as_of: datetime | None
    known_at: datetime | None
    request_hash: str
    chunk_ids: tuple[str, ...]
    pack_hash: str | None


@dataclass(frozen=True)
class StoredPackRow:
    """A kept pack without its items' text: `shell` is the pack's JSON with `items` empty
    and `keys` its items' citation keys in order; each item's text is a lineage artifact
    (`pack_artifact_id`), so a deletion or a purge removes it."""

    pack_id: str
    tenant_id: str
    credential_name: str
    idempotency_key: str | None
    request_hash: str
    pack_hash: str
    built_at: datetime
    expires_at: datetime
    shell: dict[str, Any]


@dataclass(frozen=True)
class KeptItem:
    """One item of a kept pack: its JSON (text included) and what it copies."""

    key: str
    text: str
    built_from: tuple[str, ...]  # the document key and every chunk id the item holds


@dataclass(frozen=True)
class StoredItem:
    """An item of a kept pack as read back: its JSON, or why its text is gone."""

    key: str
    text: str | None
    reason: str | None


def pack_artifact_id(pack_id: str, key: str) -> str:
    """The lineage id of one item of a kept pack."""
    return f"{pack_id}:{key}"
