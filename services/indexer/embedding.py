"""Re-embedding from stored text: after a model change, or for chunks cut before the
dense channel existed (like `reparse`, the text in Postgres is the source)."""

from __future__ import annotations

from collections.abc import Callable

from govindex.core.ports import Embedder, VectorStore


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
