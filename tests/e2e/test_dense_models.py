"""Embedding models on the real servers: an embeddings endpoint down while documents arrive
(they are indexed and searchable at once, embedded when it is back, nothing lost), and a
change of model built beside the live one by the reembed job, switched in one commit, no
ranking ever mixing the two."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from govindex.adapters.postgres.vectors import vector_literal
from govindex.control.bootstrap import prepare
from govindex.control.jobs import start_job
from govindex.control.reembed import REEMBED
from govindex.core.jobs import JobState
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from indexer.embedding import drain_backlog
from reader.app import read_service
from reader.models import SearchRequest
from tests.support.embedding_server import EmbeddingServer
from tests.support.models import build_model2vec
from tests.support.pipeline import Pipeline, until

pytestmark = pytest.mark.e2e

FAILOVER = "# Failover\n\nPromote the replica when the primary database is down.\n"
REFUNDS = "# Refunds\n\nThe payments team approves invoice refunds and settles card payments.\n"
BACKUPS = "# Backups\n\nDatabase backups restore the replica and the primary.\n"


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Pipeline]:
    await prepare(settings)
    async with Runtime(settings, pool_size=6) as rt:
        p = Pipeline(rt, tenant="models")
        await p.register()
        await p.start_workers()
        try:
            yield p
        finally:
            await p.stop_workers()
            p.close()


def search(p: Pipeline, query: str, channels: list[str]) -> SearchRequest:
    return SearchRequest.model_validate(
        {
            "tenant": p.tenant,
            "subject": {"principals": ["group:eng"]},
            "purpose": "support",
            "query": query,
            "channels": channels,
            "cache": "bypass",
        }
    )


async def docs_found(p: Pipeline, query: str, channels: list[str]) -> list[str]:
    found = await read_service(p.rt).search(search(p, query, channels))
    return [h.anchor.doc_id for h in found.hits]


async def test_an_embedding_endpoint_down_then_back_loses_nothing(settings: Settings) -> None:
    with EmbeddingServer() as server:
        over_http = settings.model_copy(
            update={
                "embedder": f"http:{server.url}",
                "embedder_model": "wordllama",
                "embedder_dims": server.dims,
                "embedder_retries": 0,
                "embedder_timeout_s": 2.0,
                "embed_backlog_every_s": 0.2,
            }
        )
        async with running(over_http) as p:
            await p.wait_processed(p.publish(p.change("runbooks/failover.md", 1, FAILOVER)))
            assert await docs_found(p, "primary database down", ["dense"]) == [
                "runbooks/failover.md"
            ]

            server.stop()  # the model's service goes away
            await p.wait_processed(
                p.publish(
                    p.change("runbooks/refunds.md", 1, REFUNDS),
                    p.change("runbooks/backups.md", 1, BACKUPS),
                )
            )
            # Indexed regardless, found by the other channels at once, and counted.
            assert await docs_found(p, "invoice refunds", ["fulltext"]) == ["runbooks/refunds.md"]
            assert await p.rt.vectors.backlog_size() == 2
            found = await read_service(p.rt).search(search(p, "invoice refunds", ["dense"]))
            assert found.hits == [] and found.degraded == ["dense"]  # said, not hidden

            server.start()  # back: the backlog is embedded, nothing was lost
            await until(p.rt.vectors.backlog_size, lambda n: n == 0, 60, "the backlog drained")
            embedder = p.rt.embedder
            assert embedder is not None
            have, total = await p.rt.vectors.count(embedder.name, embedder.version)
            assert have == total == 3
            assert (await docs_found(p, "invoice refunds card payments", ["dense"]))[0] == (
                "runbooks/refunds.md"
            )


async def _vectors(p: Pipeline) -> tuple[int, int, int]:
    """(the tenant's chunks, those with a vector, those whose vector was written in the
    chunk's own transaction)."""
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*), count(v.chunk_id), count(*) FILTER (WHERE v.xmin = c.xmin) "
            "FROM chunks c LEFT JOIN chunk_vectors v USING (chunk_id) WHERE c.tenant_id = %s",
            (p.tenant,),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])


async def test_inline_embedding_commits_each_vector_with_its_chunk(settings: Settings) -> None:
    async with running(settings.model_copy(update={"embed_deferred": False})) as p:
        await p.wait_processed(p.publish(p.change("runbooks/refunds.md", 1, REFUNDS)))
        chunks, embedded, together = await _vectors(p)
        assert chunks == embedded == together > 0
        assert await p.rt.vectors.backlog_size() == 0


async def test_deferred_embedding_commits_chunks_first_and_embeds_them_right_after(
    settings: Settings,
) -> None:
    deferred = settings.model_copy(update={"embed_deferred": True, "embed_backlog_every_s": 0.2})
    async with running(deferred) as p:
        await p.wait_processed(
            p.publish(
                p.change("runbooks/failover.md", 1, FAILOVER),
                p.change("runbooks/refunds.md", 1, REFUNDS),
            )
        )
        await until(p.rt.vectors.backlog_size, lambda n: n == 0, 60, "the backlog drained")
        chunks, embedded, together = await _vectors(p)
        # Every chunk has its vector, none written by the transaction that committed it.
        assert chunks == embedded > 0 and together == 0
        assert (await docs_found(p, "invoice refunds card payments", ["dense"]))[0] == (
            "runbooks/refunds.md"
        )


async def test_indexers_draining_side_by_side_share_the_backlog(settings: Settings) -> None:
    # The loop drains once as the workers start, then not for an hour: what is queued
    # stays queued until the test drains it.
    deferred = settings.model_copy(update={"embed_deferred": True, "embed_backlog_every_s": 3600.0})
    async with running(deferred) as p:
        texts = (FAILOVER, REFUNDS, BACKUPS)
        await p.wait_processed(
            p.publish(*(p.change(f"runbooks/{n}.md", 1, t) for n, t in enumerate(texts)))
        )
        await p.stop_workers()
        vectors = p.rt.vectors
        queued = await vectors.backlog_size()
        assert (await _vectors(p))[:2] == (queued, 0) and queued >= 3
        # Committed and found at once by the other channels; by the dense one once embedded.
        assert await docs_found(p, "invoice refunds", ["fulltext"]) == ["runbooks/1.md"]
        assert await docs_found(p, "invoice refunds card payments", ["dense"]) == []

        first = await vectors.claim_backlog(1, 60.0)
        rest = await vectors.claim_backlog(queued, 60.0)
        assert len(first) == 1 and len(rest) == queued - 1
        assert not {c for c, _ in first} & {c for c, _ in rest}
        assert await vectors.claim_backlog(queued, 60.0) == []  # all held
        await vectors.release([c for c, _ in first])
        assert await vectors.claim_backlog(queued, 60.0) == first  # given back
        await vectors.release([c for c, _ in first + rest])
        lapsing = await vectors.claim_backlog(queued, 0.0)  # a claim that lapses at once
        assert len(lapsing) == queued
        assert len(await vectors.claim_backlog(queued, 60.0)) == queued
        await vectors.release([c for c, _ in lapsing])

        # Two drainers, a chunk at a time: each chunk is claimed (and embedded) once.
        done = await asyncio.gather(
            drain_backlog(vectors, p.rt.embedders, batch=1),
            drain_backlog(vectors, p.rt.embedders, batch=1),
        )
        assert sum(done) == queued
        assert await vectors.backlog_size() == 0
        assert (await _vectors(p))[:2] == (queued, queued)
        assert (await docs_found(p, "invoice refunds card payments", ["dense"]))[0] == (
            "runbooks/1.md"
        )


async def test_a_chunk_purged_while_its_batch_is_claimed_gets_no_vector(
    settings: Settings,
) -> None:
    deferred = settings.model_copy(update={"embed_deferred": True, "embed_backlog_every_s": 3600.0})
    async with running(deferred) as p:
        await p.wait_processed(
            p.publish(
                p.change("runbooks/failover.md", 1, FAILOVER),
                p.change("runbooks/refunds.md", 1, REFUNDS),
            )
        )
        vectors = p.rt.vectors
        claimed = await vectors.claim_backlog(100, 60.0)
        ids = [chunk_id for chunk_id, _ in claimed]
        gone = [c["chunk_id"] for c in await p.pg_chunks("runbooks/refunds.md")]
        assert gone and set(gone) <= set(ids)
        # The document is deleted and purged while its chunks are claimed, not yet embedded.
        p.publish(p.deletion("runbooks/refunds.md", 2))
        await p.wait_purged("runbooks/refunds.md", 2)
        (embedder,) = p.rt.embedders
        made = embedder.embed([text for _, text in claimed])
        await vectors.settle(ids, {(embedder.name, embedder.version): made})
        async with p.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM chunk_vectors WHERE chunk_id = ANY (%s)", (gone,)
            )
            row = await cur.fetchone()
        assert row is not None and row[0] == 0  # nothing of the purged document came back
        chunks, embedded, _ = await _vectors(p)
        assert chunks == embedded > 0  # the other document's chunks have their vectors
        assert await vectors.backlog_size() == 0


async def _exact(p: Pipeline, model: tuple[str, str], dims: int, query: bytes) -> list[str]:
    """The model's exact ranking of the tenant's current chunks (no index), by doc id."""
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT c.doc_id FROM chunk_vectors v JOIN chunks c USING (chunk_id) WHERE "
            "c.tenant_id = %s AND c.superseded_at IS NULL AND v.embedder = %s AND "
            f"v.embedder_version = %s ORDER BY v.embedding::vector({dims}) <#> "
            f"%s::vector({dims}), c.chunk_id",
            (p.tenant, *model, vector_literal(query)),
        )
        return [row[0] for row in await cur.fetchall()]


async def test_a_new_model_is_built_beside_the_live_one_and_switched_at_once(
    settings: Settings, tmp_path: Path
) -> None:
    model_dir = build_model2vec(tmp_path / "m2v")
    exact = settings.model_copy(update={"dense_min_similarity": -1.0})
    query = "the replica of the primary database"
    async with running(exact) as p:
        for n, text in enumerate((FAILOVER, REFUNDS, BACKUPS)):
            await p.wait_processed(p.publish(p.change(f"runbooks/{n}.md", 1, text)))
        old = p.rt.embedder
        assert old is not None
        ranked_old = await docs_found(p, query, ["dense"])
        assert ranked_old == await _exact(
            p, (old.name, old.version), old.dims, old.embed([query])[0]
        )

    changing = exact.model_copy(update={"embedder_next": f"model2vec:{model_dir}"})
    async with running(changing) as p:
        old, new = p.rt.embedders
        # While the next model is configured, new chunks get both models' vectors.
        await p.wait_processed(
            p.publish(p.change("runbooks/3.md", 1, "# Rotation\n\nRotate the credentials.\n"))
        )
        async with p.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT v.embedder FROM chunk_vectors v JOIN chunks c USING (chunk_id) "
                "WHERE c.doc_id = 'runbooks/3.md' ORDER BY 1"
            )
            assert [r[0] for r in await cur.fetchall()] == sorted([old.name, new.name])
        # Before the switch the live model still answers, alone.
        assert await docs_found(p, query, ["dense"]) == await _exact(
            p, (old.name, old.version), old.dims, old.embed([query])[0]
        )
        seen: list[tuple[int, int | None]] = []
        job = await start_job(
            p.rt,
            REEMBED,
            {"model": f"{new.name}/{new.version}"},
            dry_run=False,
            rate=None,
            progress=lambda done, total: seen.append((done, total)),
        )
        assert job.state == JobState.SUCCEEDED and job.counts["switched"] == 1
        assert job.counts["embedded"] == 3 and seen  # the three chunks from before
        live = await p.rt.vectors.live()
        assert live is not None and (live.embedder, live.version) == (new.name, new.version)
        # After it, the new model answers, alone: its exact ranking, every chunk included.
        ranked_new = await docs_found(p, query, ["dense"])
        assert ranked_new == await _exact(
            p, (new.name, new.version), new.dims, new.embed([query])[0]
        )
        assert sorted(ranked_new) == [f"runbooks/{n}.md" for n in range(4)]
        listed: Any = await p.rt.jobs.get(job.id)
        assert listed.kind == REEMBED  # visible to `govindex jobs`
