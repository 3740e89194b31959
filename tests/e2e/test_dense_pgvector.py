"""The dense channel in pgvector: the admission predicate in the ranking statement (the
nearest chunks the subject may not see neither leak nor starve the answer), the model
generation's HNSW index, one model per ranking, and vectors carried over from bytea."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest

from govindex.adapters.postgres.pool import MigrationFailed, migrate, migration_files
from govindex.adapters.postgres.vectors import Generation, insert_vectors
from govindex.devstack.embedded import shared_buffers_mb
from reader.app import read_service
from reader.models import SearchRequest
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

QUERY = "rotate the payroll database credentials after a leaked password"


def _close(n: int) -> str:
    """A runbook nearly the query itself: the dense channel's nearest chunks."""
    return (
        f"# Credential rotation {n}\n\nRotate the payroll database credentials after a "
        f"leaked password, then restart payroll worker {n}.\n"
    )


def _far(n: int) -> str:
    return (
        f"# Database credentials {n}\n\nRotating database passwords: schedule the change "
        f"window {n} and tell the on-call engineer.\n"
    )


def _dense(p: Pipeline, principals: list[str], limit: int) -> SearchRequest:
    return SearchRequest.model_validate(
        {
            "tenant": p.tenant,
            "subject": {"principals": principals},
            "purpose": "support",
            "query": QUERY,
            "channels": ["dense"],
            "limit": limit,
            "window": limit,  # the channel's candidates: no spare ones to fall back on
            "cache": "bypass",
        }
    )


async def _seed(p: Pipeline) -> None:
    records = [
        p.change(f"hr/rotation-{n}.md", 1, _close(n), acl=["group:hr"]) for n in range(8)
    ] + [p.change(f"eng/credentials-{n}.md", 1, _far(n)) for n in range(4)]
    await p.wait_processed(p.publish(*records))


async def test_chunks_the_subject_may_not_see_neither_leak_nor_starve_the_ranking(
    pipeline: Pipeline,
) -> None:
    """Eight restricted runbooks are nearer the query than any the subject may see. With
    the filter after the ranking the answer would be empty; without it, it would leak."""
    p = pipeline
    await _seed(p)
    service = read_service(p.rt)
    seen = (await service.search(_dense(p, ["group:eng"], 3))).hits
    assert len(seen) == 3  # the 3 nearest the subject may see, not the 3 nearest overall
    assert all(h.anchor.doc_id.startswith("eng/") for h in seen)
    everything = (await service.search(_dense(p, ["group:hr", "group:eng"], 3))).hits
    assert [h.anchor.doc_id.split("/")[0] for h in everything] == ["hr"] * 3


async def test_the_live_generation_has_its_hnsw_index_and_answers_alone(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    await _seed(p)
    embedder = p.rt.embedder
    assert embedder is not None
    live = await p.rt.vectors.live()
    assert live == Generation(embedder.name, embedder.version, embedder.dims, "live")
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (live.index_name,)
        )
        (definition,) = await cur.fetchone() or ("",)
        assert "USING hnsw" in definition and f"vector({embedder.dims})" in definition
        # With the sequential scan priced out, the ranking runs on that index.
        await conn.execute("SET enable_seqscan = off")
        cur = await conn.execute(
            "EXPLAIN SELECT chunk_id FROM chunk_vectors WHERE embedder = %s AND "
            f"embedder_version = %s ORDER BY embedding::vector({embedder.dims}) <#> "
            f"(SELECT embedding FROM chunk_vectors LIMIT 1)::vector({embedder.dims}) LIMIT 5",
            (embedder.name, embedder.version),
        )
        plan = "\n".join(row[0] for row in await cur.fetchall())
    assert live.index_name in plan

    service = read_service(p.rt)
    assert (await service.search(_dense(p, ["group:eng"], 3))).hits
    # Another model goes live: this reader's model is no longer the live one, and it ranks
    # nothing rather than its query against the other model's vectors.
    other = await p.rt.vectors.ensure_generation("another-model", "1", 8)
    assert other.state == "building"
    async with p.pool.connection() as conn, conn.transaction():
        await conn.execute("UPDATE vector_generations SET state = 'retired' WHERE state = 'live'")
        await conn.execute(
            "UPDATE vector_generations SET state = 'live' WHERE embedder = 'another-model'"
        )
    assert (await service.search(_dense(p, ["group:eng"], 3))).hits == []


async def test_the_embedded_server_keeps_a_buffer_cache_sized_for_the_hnsw_index(
    migrated: dict[str, Any],
) -> None:
    """The embedded PostgreSQL gets a quarter of the machine's memory for its buffers
    (128 MB to 1 GB), not its 128 MB default: past the cache, every HNSW insert reads
    hundreds of the graph's pages from the kernel."""
    async with await psycopg.AsyncConnection.connect(migrated["pg_dsn"]) as conn:
        cur = await conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))")
        row = await cur.fetchone()
    assert row is not None
    assert row[0] == shared_buffers_mb() * 2**20
    assert 128 * 2**20 <= row[0] <= 2**30


async def test_vectors_stored_as_bytes_become_pgvector_vectors_exactly(
    migrated: dict[str, Any],
) -> None:
    """Migration 022 reads the float32 bytes written before it, subnormals included."""
    admin = migrated["pg_dsn"].rsplit("/", 1)[0] + "/postgres"
    name = "vectors_from_bytes"
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        await conn.execute(f"DROP DATABASE IF EXISTS {name}")
        await conn.execute(f"CREATE DATABASE {name}")
    dsn = migrated["pg_dsn"].rsplit("/", 1)[0] + "/" + name
    rng = np.random.default_rng(7)
    stored = rng.standard_normal((4, 256)).astype("<f4")
    stored[0, 0], stored[1, 1], stored[2, 2] = 1e-40, -0.0, 3.4e38
    files = migration_files()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for file, text in files:
            if file < "022":
                await conn.execute(text.encode())
        await conn.execute("SET session_replication_role = replica")  # no chunk rows needed
        for n, vector in enumerate(stored):
            await conn.execute(
                "INSERT INTO chunk_vectors (chunk_id, embedder, embedder_version, dims, "
                "vector) VALUES (%s, 'm', '1', 256, %s)",
                (f"c{n}", vector.tobytes()),
            )
        for file, text in files:
            if file.startswith("022"):
                await conn.execute(text.encode())
        cur = await conn.execute("SELECT embedding::real[] FROM chunk_vectors ORDER BY chunk_id")
        read = np.array([row[0] for row in await cur.fetchall()], dtype="<f4")
        cur = await conn.execute("SELECT embedder, dims, state FROM vector_generations")
        generations = await cur.fetchall()
    assert np.array_equal(read, stored)  # every value exactly (-0.0 equal to 0.0)
    assert generations == [("m", 256, "building")]


async def test_vectors_the_indexer_writes_arrive_exactly(migrated: dict[str, Any]) -> None:
    """`insert_vectors` sends pgvector's binary form: every float32 arrives as it was made
    (subnormals, -0.0 and the largest float included), and a vector with a NaN is stored
    as zeros (near nothing), as its text form was."""
    rng = np.random.default_rng(11)
    made = rng.standard_normal((4, 256)).astype("<f4")
    made[0, 0], made[1, 1], made[2, 2] = 1e-40, -0.0, 3.4e38
    made[3, 5] = np.nan
    ids = [f"binary-{n}" for n in range(4)]
    async with await psycopg.AsyncConnection.connect(migrated["pg_dsn"]) as conn:
        await conn.execute("SET session_replication_role = replica")  # no chunk rows needed
        await insert_vectors(conn, ids, [v.tobytes() for v in made], ("binary", "1"), 256)
        cur = await conn.execute(
            "SELECT embedding::real[] FROM chunk_vectors WHERE embedder = 'binary' "
            "ORDER BY chunk_id"
        )
        read = np.array([row[0] for row in await cur.fetchall()], dtype="<f4")
        await conn.execute("DELETE FROM chunk_vectors WHERE embedder = 'binary'")
        await conn.commit()
    assert np.array_equal(read[:3], made[:3])
    assert not read[3].any()


async def test_a_server_that_refuses_pgvector_is_named_with_the_fix(
    migrated: dict[str, Any],
) -> None:
    """A role that may not create the extension (as on a managed server before it is
    enabled): migration 022 is refused whole, with what to do; once an administrator
    creates the extension, the same role migrates."""
    base, _ = migrated["pg_dsn"].rsplit("/", 1)
    admin = base + "/postgres"
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        await conn.execute("DROP DATABASE IF EXISTS without_vector")
        await conn.execute("DROP ROLE IF EXISTS plain_owner")
        await conn.execute("CREATE ROLE plain_owner LOGIN PASSWORD 'owner-pw'")
        await conn.execute("CREATE DATABASE without_vector OWNER plain_owner")
    host = base.split("@", 1)[1]
    owner = f"postgresql://plain_owner:owner-pw@{host}/without_vector"
    with pytest.raises(MigrationFailed) as refused:
        await migrate(owner)
    message = str(refused.value)
    assert message.startswith("migration 022_pgvector.sql needs the pgvector extension")
    assert "CREATE EXTENSION vector;" in message and "owner-pw" not in message
    async with await psycopg.AsyncConnection.connect(owner, autocommit=True) as conn:
        cur = await conn.execute("SELECT max(name) FROM schema_migrations")
        assert (await cur.fetchone()) == ("021_raw_content.sql",)  # nothing of 022 applied
    superuser = base + "/without_vector"
    async with await psycopg.AsyncConnection.connect(superuser, autocommit=True) as conn:
        await conn.execute("CREATE EXTENSION vector")
    assert "022_pgvector.sql" in await migrate(owner)
