"""Embedding from stored text: the backlog of chunks committed while a model was away,
and re-embedding after a model change or for chunks cut before the dense channel existed
(like `reparse`, the text in Postgres is the source)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import structlog

from govindex.core.inputs import quote
from govindex.core.ports import Embedder, VectorStore

log = structlog.get_logger(__name__)


async def reembed(
    vectors: VectorStore,
    embedder: Embedder,
    *,
    batch: int = 256,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Embed every chunk that has no vector of this model (name and version); returns how
    many were embedded. Resumable: each batch commits on its own."""
    done = 0
    have, total = await vectors.count(embedder.name, embedder.version)
    todo = total - have
    while rows := await vectors.missing(embedder.name, embedder.version, batch):
        ids = [chunk_id for chunk_id, _ in rows]
        await vectors.put(
            ids, embedder.embed([t for _, t in rows]), (embedder.name, embedder.version)
        )
        done += len(rows)
        if progress is not None:
            progress(done, todo)
        if len(rows) < batch:
            break
    return done


async def drain_backlog(
    vectors: VectorStore, embedders: Sequence[Embedder], *, batch: int = 256
) -> int:
    """Embed queued chunks with every model, oldest first, until none is queued; returns
    how many were settled. A model that fails leaves them queued (raises its error)."""
    done = 0
    while rows := await vectors.backlog(batch):
        ids = [chunk_id for chunk_id, _ in rows]
        texts = [text for _, text in rows]
        for embedder in embedders:
            made = await asyncio.to_thread(embedder.embed, texts)
            await vectors.put(ids, made, (embedder.name, embedder.version))
        await vectors.settle(ids)
        done += len(rows)
        if len(rows) < batch:
            break
    return done


async def embed_backlog_forever(
    vectors: VectorStore,
    embedders: Sequence[Embedder],
    stop: asyncio.Event,
    *,
    every_s: float = 5.0,
    longest_s: float = 300.0,
) -> None:
    """The indexer's background loop: drain the backlog every `every_s`; while a model
    keeps failing, wait twice as long each time (up to `longest_s`), so a service that is
    down is asked less and less often, and all is embedded once it is back."""
    wait = every_s
    while not stop.is_set():
        try:
            done = await drain_backlog(vectors, embedders)
            if done:
                log.info("embedding.backlog_drained", chunks=done)
            wait = every_s
        except Exception as exc:
            wait = min(wait * 2, longest_s)
            log.warning(
                "embedding.backlog_waiting",
                error=f"{exc.__class__.__name__}: {quote(str(exc))}",
                retry_in_s=wait,
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=wait)
