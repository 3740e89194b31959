"""Event payloads (past tense, versioned) and their deterministic identities.

See docs/design/events.md.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from govindex.core.records import Principal, Slug

EVENT_PREFIX = "io.govindex"
DOCUMENT_CREATED = f"{EVENT_PREFIX}.document.created.v1"
DOCUMENT_UPDATED = f"{EVENT_PREFIX}.document.updated.v1"
DOCUMENT_DELETED = f"{EVENT_PREFIX}.document.deleted.v1"
DOCUMENT_INDEXED = f"{EVENT_PREFIX}.document.indexed.v1"
DOCUMENT_PURGED = f"{EVENT_PREFIX}.document.purged.v1"
PACK_BUILT = f"{EVENT_PREFIX}.pack.built.v1"

DOCUMENT_EVENT_TYPES = frozenset({DOCUMENT_CREATED, DOCUMENT_UPDATED, DOCUMENT_DELETED})

# Fixed namespace so the same change always gets the same event id, on any machine.
_EVENT_ID_NAMESPACE = uuid.UUID("6f1c3f0e-3a53-4b43-9d7e-2f8f4c1d2a10")

IDENTITY = ("tenant_id", "source_id", "doc_id", "source_version", "sequence")

DocId = Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[^\x00-\x1f]+$")]
Sha256 = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class DocumentPayload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Slug
    source_id: Slug
    doc_id: DocId
    source_version: str = Field(min_length=1, max_length=512)
    sequence: int = Field(ge=1, le=2**63 - 1)

    @property
    def key(self) -> str:
        return document_key(self.tenant_id, self.source_id, self.doc_id)

    def identity(self) -> dict[str, Any]:
        """Which document, which version, which sequence: what every record about it repeats."""
        return {name: getattr(self, name) for name in IDENTITY}


class DocumentChanged(DocumentPayload):
    """Payload of document.created.v1 and document.updated.v1.

    Content travels inline (`content`) up to the inline limit; larger documents are stored
    content-addressed in Postgres and referenced by `content_ref` (claim check). Exactly one
    of the two is set. `content_hash` is the sha256 of the UTF-8 bytes either way.
    """

    observed_at: AwareDatetime
    content_hash: Sha256
    content: str | None = None
    content_ref: Sha256 | None = None
    media_type: str = "text/markdown"
    content_encoding: Literal["utf-8", "base64"] = Field(
        default="utf-8",
        description="base64: the content is a binary file's bytes (PDF, Word, ...), which "
        "the indexer extracts to text; content_hash is of the base64 text either way",
    )
    path: str | None = None
    title: str | None = None
    acl: list[Principal] | None = None
    valid_from: AwareDatetime | None = None
    valid_to: AwareDatetime | None = None
    metadata: dict[str, str] = Field(default_factory=dict)

    def model_post_init(self, __context: object) -> None:
        if (self.content is None) == (self.content_ref is None):
            raise ValueError("exactly one of content and content_ref must be set")


class DocumentDeleted(DocumentPayload):
    """Payload of document.deleted.v1: the document is gone from the source at `deleted_at`."""

    deleted_at: AwareDatetime
    reason: str = Field(default="deleted_in_source", min_length=1, max_length=256)


class DocumentIndexed(DocumentPayload):
    """Receipt: the indexer applied (or knowingly skipped) a document event."""

    event_id: str
    outcome: Literal["indexed", "metadata_updated", "tombstoned"]
    version_id: str | None
    chunk_count: int
    content_hash: str | None
    index_generation: int
    indexed_at: AwareDatetime


class PackBuilt(BaseModel):
    """Receipt: a pack was built and kept under an idempotency key (`GET /v1/packs/{id}`).
    Ids and hashes only, never text; its documents are what a deletion must reach."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Slug
    pack_id: str
    pack_hash: str
    request_hash: str
    credential_name: str
    purpose: Slug
    as_of: AwareDatetime
    built_at: AwareDatetime
    expires_at: AwareDatetime
    items: int
    documents: list[str]


class SinkResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sink: str
    removed: int
    remaining: int
    verified: bool
    detail: str = ""


class DocumentPurged(DocumentPayload):
    """Receipt: every sink was purged of the document and a read-back found nothing left."""

    event_id: str
    deletion_mode: str
    sinks: list[SinkResult]
    deleted_at: AwareDatetime
    purged_at: AwareDatetime
    duration_ms: int


def document_key(tenant_id: str, source_id: str, doc_id: str) -> str:
    """The Kafka key and identity of a document: `tenant_id/source_id/doc_id`."""
    return f"{tenant_id}/{source_id}/{doc_id}"


def event_id(tenant_id: str, source_id: str, doc_id: str, source_version: str, op: str) -> str:
    """Deterministic id: a redelivered or replayed change keeps its id and is recognised."""
    name = f"{document_key(tenant_id, source_id, doc_id)}\x00{source_version}\x00{op}"
    return str(uuid.uuid5(_EVENT_ID_NAMESPACE, name))


PAYLOAD_MODELS: dict[str, type[BaseModel]] = {
    "document.changed": DocumentChanged,
    "document.deleted": DocumentDeleted,
    "document.indexed": DocumentIndexed,
    "document.purged": DocumentPurged,
}


ARTIFACT_INVALIDATED = f"{EVENT_PREFIX}.artifact.invalidated.v1"


class ArtifactInvalidated(BaseModel):
    """A stored summary or memory lost (part of) what it was built from: rebuild it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Slug
    kind: str
    artifact_id: str
    location: str
    reason: str
    caused_by: str
    invalidated_at: AwareDatetime


PAYLOAD_MODELS["artifact.invalidated"] = ArtifactInvalidated


ACCESS_REVOKED = f"{EVENT_PREFIX}.access.revoked.v1"


class AccessRevoked(DocumentPayload):
    """Principals lost access to a document: a deletion for them (docs/design/deletion.md)."""

    principals: list[str] = Field(min_length=1)
    revoked_at: AwareDatetime


PAYLOAD_MODELS["access.revoked"] = AccessRevoked


# One registry: every event type we produce or consume, and the model of its data.
EVENT_MODELS: dict[str, type[BaseModel]] = {
    DOCUMENT_CREATED: DocumentChanged,
    DOCUMENT_UPDATED: DocumentChanged,
    DOCUMENT_DELETED: DocumentDeleted,
    DOCUMENT_INDEXED: DocumentIndexed,
    DOCUMENT_PURGED: DocumentPurged,
    ARTIFACT_INVALIDATED: ArtifactInvalidated,
    ACCESS_REVOKED: AccessRevoked,
}
