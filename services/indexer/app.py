"""The indexer's wiring: its ports and subscription from a Runtime, and its operator verbs."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import structlog

from govindex.core.inputs import quote
from govindex.runtime.composition import Runtime
from govindex.runtime.subscription import Subscription, subscription
from indexer.embedding import reembed
from indexer.extractors import extractor_for
from indexer.handlers import CONSUMER, IndexerPorts, index_batch
from indexer.reparse import ReparseReport, reparse

log = structlog.get_logger(__name__)


def indexer_ports(rt: Runtime, generation: int) -> IndexerPorts:
    return IndexerPorts(
        registry=rt.registry,
        store=rt.chunks,
        blobs=rt.blobs,
        index=rt.index,
        topics=rt.settings.topics,
        generation=generation,
        cache=rt.cache,
        embedders=rt.embedders,
        embed_deferred=rt.settings.embed_deferred,
        generations=rt.generations,
        tokens=rt.tokens,
    )


def warm_up(rt: Runtime) -> None:
    """Load what the first batch would otherwise load (blocking: run it in a thread): the
    extractors' libraries and each local model (a model with a `warm` method), so the
    first batch is not seconds slower than the next. A model that fails to load is logged
    and left: its chunks are committed without vectors and queued, as on any batch."""
    extractor_for(None)  # registers the extractors, importing their libraries
    for embedder in rt.embedders:
        warm = getattr(embedder, "warm", None)  # optional: a remote model has nothing to load
        if not callable(warm):
            continue
        try:
            warm()
        except Exception as exc:
            log.warning(
                "embedding.warm_failed",
                model=f"{embedder.name}/{embedder.version}",
                error=f"{exc.__class__.__name__}: {quote(str(exc))}",
            )


def indexer_subscriptions(rt: Runtime, generation: int) -> list[Subscription]:
    handle = partial(index_batch, ports=indexer_ports(rt, generation))
    return [subscription(rt.settings, CONSUMER, rt.settings.topics.documents, handle, batched=True)]


async def reparse_documents(
    rt: Runtime,
    *,
    source_id: str | None,
    parser_name: str | None,
    progress: Callable[[int, int, str], None] | None = None,
) -> ReparseReport:
    return await reparse(
        versions=rt.versions,
        chunks=rt.chunks,
        registry=rt.registry,
        index=rt.index,
        source_id=source_id,
        parser_name=parser_name,
        generation=await rt.index.live_generation() or 0,
        progress=progress,
        tokens=rt.tokens,
    )


async def reembed_chunks(rt: Runtime, progress: Callable[[int, int], None] | None = None) -> int:
    if rt.embedder is None:
        raise ValueError("no embedder configured (GOVINDEX_EMBEDDER=none)")
    return await reembed(rt.vectors, rt.embedder, progress=progress)
