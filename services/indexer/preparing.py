"""Preparing: what planning needs, read before any transaction (the manifest, the content),
then the plans it makes, embedded in one call to the model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

import structlog

from govindex.core import formats, metrics
from govindex.core.envelope import Envelope, parse_payload
from govindex.core.errors import (
    ContentUnavailable,
    InvalidEvent,
    PermanentError,
    SourceDisabled,
    UnknownSource,
)
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.inputs import quote
from govindex.core.ports import (
    BlobStore,
    ChunkStore,
    DocumentKey,
    Embedder,
    SourceRegistry,
    VersionPlan,
)
from govindex.core.records import SourceManifest
from govindex.core.tokens import HEURISTIC, TokenEstimator
from indexer.extractors import Extracted, extract, extractor_for
from indexer.planning import PlannedEvent, plan_change, plan_deletion

log = structlog.get_logger(__name__)


class Manifests(Protocol):
    async def get(self, tenant_id: str, source_id: str) -> SourceManifest | None: ...


class _BatchManifests:
    """The batch's source manifests, each read once: a batch of 500 events of one source
    read the same row 500 times (7 % of the indexer's time in a profile of the purge
    benchmark). Within a batch one answer holds for all its events, as it would have if
    the batch had been read an instant earlier."""

    def __init__(self, registry: SourceRegistry) -> None:
        self._registry = registry
        self._got: dict[tuple[str, str], SourceManifest | None] = {}

    async def get(self, tenant_id: str, source_id: str) -> SourceManifest | None:
        key = (tenant_id, source_id)
        if key not in self._got:
            self._got[key] = await self._registry.get(tenant_id, source_id)
        return self._got[key]


async def require_source(
    registry: Manifests, tenant_id: str, source_id: str, *, deletion: bool = False
) -> SourceManifest:
    manifest = await registry.get(tenant_id, source_id)
    if manifest is None:
        raise UnknownSource(
            f"source {source_id!r} of tenant {tenant_id!r} is not registered; register it with "
            "`govindex source apply MANIFEST.yaml` and replay the event"
        )
    if not manifest.enabled and not deletion:  # a deletion is always honoured
        raise SourceDisabled(
            f"source {source_id!r} is disabled in its manifest; events from it are refused"
        )
    return manifest


async def prepare_batch(
    envelopes: Sequence[Envelope],
    *,
    registry: SourceRegistry,
    blobs: BlobStore,
    store: ChunkStore,
    generation: int,
    now: datetime,
    tokens: TokenEstimator = HEURISTIC,
) -> tuple[list[PlannedEvent], dict[int, PermanentError]]:
    """Every event planned, in order; or, by position, the permanent error that
    dead-letters it (an invalid payload, an unknown or disabled source, missing or altered
    content, what parsing and stamping refuse)."""
    planned: list[PlannedEvent] = []
    refused: dict[int, PermanentError] = {}
    manifests = _BatchManifests(registry)
    for position, envelope in enumerate(envelopes):
        try:
            planned.append(
                await prepare(
                    position,
                    envelope,
                    registry=manifests,
                    blobs=blobs,
                    store=store,
                    generation=generation,
                    now=now,
                    tokens=tokens,
                )
            )
        except PermanentError as error:
            refused[position] = error
        await asyncio.sleep(0)  # parsing is CPU: let the deletion lane in between events
    return planned, refused


async def prepare(
    position: int,
    envelope: Envelope,
    *,
    registry: Manifests,
    blobs: BlobStore,
    store: ChunkStore,
    generation: int,
    now: datetime,
    tokens: TokenEstimator = HEURISTIC,
) -> PlannedEvent:
    payload = parse_payload(envelope)
    deletion = isinstance(payload, DocumentDeleted)
    manifest = await require_source(
        registry, payload.tenant_id, payload.source_id, deletion=deletion
    )
    if isinstance(payload, DocumentDeleted):
        return plan_deletion(position, envelope, payload, manifest, now=now)
    text = await content(payload, blobs=blobs, store=store)
    extracted = None
    if text is not None and extractor_for(payload.path or payload.doc_id) is not None:
        # Only a file an extractor reads hops to a thread: a hop for every Markdown
        # event was a twentieth of the indexer's CPU.
        extracted = await asyncio.to_thread(extracted_text, payload, text)
    return plan_change(
        position,
        envelope,
        payload,
        text,
        manifest,
        generation=generation,
        now=now,
        tokens=tokens,
        extracted=extracted,
    )


def extracted_text(payload: DocumentChanged, text: str | None) -> Extracted | None:
    """The canonical text of a file whose type has an extractor (PDF, Word, HTML, …), run
    in the extraction sandbox; None for a type a parser reads as it is, or stale content."""
    if text is None or extractor_for(payload.path or payload.doc_id) is None:
        return None
    if payload.content_encoding == formats.BASE64:
        try:
            data = formats.decode(text)
        except ValueError:
            raise InvalidEvent(
                "content_encoding is base64 but the content is not base64; the producer must "
                "base64-encode a binary file"
            ) from None
    else:
        data = text.encode("utf-8")
    return extract(payload.path or payload.doc_id, data)


async def content(payload: DocumentChanged, *, blobs: BlobStore, store: ChunkStore) -> str | None:
    """The event's text; None when its blob is gone because the document was deleted (and
    purged) at a later sequence: the event is stale, and its content must stay gone."""
    text = payload.content
    if text is None:
        assert payload.content_ref is not None
        text = await blobs.blob(payload.content_ref)
        if text is None:
            key = DocumentKey(payload.tenant_id, payload.source_id, payload.doc_id)
            if payload.sequence <= await store.last_sequence(key):
                return None
            raise ContentUnavailable(
                f"claim-check blob {payload.content_ref} is not in Postgres; the producer must "
                "store the blob before emitting the event"
            )
    if sha256_hex(text) != payload.content_hash:
        raise InvalidEvent(
            f"content does not match content_hash {payload.content_hash}; the event was "
            "altered or built wrongly"
        )
    return text


def queue_for_embedding(planned: list[PlannedEvent]) -> list[PlannedEvent]:
    """The events with their chunks queued for every model (`GOVINDEX_EMBED_DEFERRED`):
    committed without vectors, embedded by the backlog loop right after."""
    return [
        replace(e, plan=replace(e.plan, embed_pending=True))
        if isinstance(e.plan, VersionPlan) and e.plan.chunks
        else e
        for e in planned
    ]


def embed(planned: list[PlannedEvent], embedders: Sequence[Embedder]) -> list[PlannedEvent]:
    """The events with their chunks' vectors: one call per model for the whole batch.

    A model that fails (its service down, a timeout, an answer it should not have given)
    does not hold the batch up: its chunks are committed without its vectors and queued
    (`embed_pending`), so ingestion and deletion go on while the embedder is away; the
    backlog is embedded when it is back (`indexer.embedding.drain_backlog`).
    """
    plans = [(i, e.plan) for i, e in enumerate(planned) if isinstance(e.plan, VersionPlan)]
    texts = [c.text for _, plan in plans for c in plan.chunks]
    if not embedders or not texts:
        return planned
    made: dict[tuple[str, str], list[bytes]] = {}
    pending = False
    for embedder in embedders:
        model = (embedder.name, embedder.version)
        try:
            vectors = embedder.embed(texts)
            if len(vectors) != len(texts):
                raise ValueError(f"gave {len(vectors)} vectors for {len(texts)} texts")
        except Exception as exc:
            pending = True
            metrics.EMBEDDING_DEFERRED.labels(f"{model[0]}/{model[1]}").inc(len(texts))
            log.warning(
                "embedding.deferred",
                model=f"{model[0]}/{model[1]}",
                chunks=len(texts),
                error=f"{exc.__class__.__name__}: {quote(str(exc))}",
            )
            continue
        made[model] = list(vectors)
    embedded = list(planned)
    at = 0
    for i, plan in plans:
        if not plan.chunks:
            continue
        own = {model: vectors[at : at + len(plan.chunks)] for model, vectors in made.items()}
        at += len(plan.chunks)
        embedded[i] = replace(embedded[i], plan=replace(plan, vectors=own, embed_pending=pending))
    return embedded
