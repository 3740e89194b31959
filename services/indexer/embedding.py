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


# How long a batch of the backlog is an indexer's own: well past the time a model takes
# to embed one (an HTTP endpoint's timeout and retries included). A claim of an indexer
# that died lapses after it, and another indexer takes the chunks.
CLAIM_S = 300.0


async def drain_backlog(
    vectors: VectorStore, embedders: Sequence[Embedder], *, batch: int = 256
) -> int:
    """Embed queued chunks with every model, oldest first, until none is free; returns
    how many were settled. Each batch is claimed first, so indexers draining side by side
    share the backlog and embed no chunk twice. A model that fails leaves its batch queued
    (raises its error)."""
    done = 0
    while rows := await vectors.claim_backlog(batch, CLAIM_S):
        ids = [chunk_id for chunk_id, _ in rows]
        texts = [text for _, text in rows]
        try:
            made = {(e.name, e.version): await asyncio.to_thread(e.embed, texts) for e in embedders}
            await vectors.settle(ids, made)
        except BaseException:
            # Free at once for the next round (or another indexer), not after the claim.
            with contextlib.suppress(Exception):
                await vectors.release(ids)
            raise
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
    drainers: int = 1,
) -> None:
    """The indexer's background loop: drain the backlog every `every_s`; while a model
    keeps failing, wait twice as long each time (up to `longest_s`), so a service that is
    down is asked less and less often, and all is embedded once it is back. `drainers`
    batches at a time: with two, one batch is embedded while PostgreSQL inserts the
    other's vectors into the HNSW graph."""
    wait = every_s
    while not stop.is_set():
        try:
            async with asyncio.TaskGroup() as group:
                rounds = [
                    group.create_task(drain_backlog(vectors, embedders)) for _ in range(drainers)
                ]
            done = sum(r.result() for r in rounds)
            if done:
                log.info("embedding.backlog_drained", chunks=done)
            wait = every_s
        except Exception as exc:
            while isinstance(exc, ExceptionGroup):  # the first drainer's error says it
                exc = exc.exceptions[0]
            wait = min(wait * 2, longest_s)
            log.warning(
                "embedding.backlog_waiting",
                error=f"{exc.__class__.__name__}: {quote(str(exc))}",
                retry_in_s=wait,
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=wait)
