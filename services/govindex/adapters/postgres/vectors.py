"""Chunk vectors in pgvector: storing them, their model generations, the HNSW index.

A chunk's vector is a pgvector `vector` in `chunk_vectors`, stamped with the model (name,
version) that made it; a chunk may hold one per model, so a new model's generation is
built beside the live one. Each generation has its own partial HNSW index over its rows
(`embedding::vector(dims)`, inner product: the embedders give unit vectors, so the order
is cosine's), and the dense channel (`reads.PostgresReadSnapshot.dense`) ranks with it in
the same statement as the admission predicate.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog
from psycopg import AsyncConnection, sql
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.tx import transaction

log = structlog.get_logger(__name__)

# Only one session creates a generation's index at a time (readers and indexers start
# together).
_GENERATION_LOCK = 0x60F1DF
# The HNSW graph's shape: pgvector's defaults (recall per filter and ef_search on 100,000
# and 500,000 WordLlama vectors: docs/benchmarks/dense.md).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64


@dataclass(frozen=True)
class Generation:
    """The vectors of one model: what a dense query ranks by when it is live."""

    embedder: str
    version: str
    dims: int
    state: str = "building"

    @property
    def index_name(self) -> str:
        digest = hashlib.sha256(f"{self.embedder}\0{self.version}\0{self.dims}".encode())
        return f"chunk_vectors_hnsw_{digest.hexdigest()[:16]}"

    def cast(self, column: sql.Composable) -> sql.Composed:
        """`column::vector(dims)`: the expression the generation's index is built over."""
        return sql.SQL("({}::vector({}))").format(column, sql.Literal(self.dims))

    def rows(self, alias: str | None = None) -> sql.Composed:
        """The predicate of the generation's rows (literals: a partial index must match)."""

        def column(name: str) -> sql.Identifier:
            return sql.Identifier(alias, name) if alias else sql.Identifier(name)

        return sql.SQL("{} = {} AND {} = {}").format(
            column("embedder"),
            sql.Literal(self.embedder),
            column("embedder_version"),
            sql.Literal(self.version),
        )


def _finite(vector: bytes) -> np.ndarray[Any, np.dtype[np.float32]]:
    """A float32 little-endian vector's values; one a model made of a text it has no token
    of (NaN) is all zeros, which is near nothing."""
    values = np.frombuffer(vector, dtype="<f4")
    return values if np.isfinite(values).all() else np.zeros_like(values)


def vector_literal(vector: bytes) -> str:
    """A float32 little-endian vector as pgvector's text form, `[x,y,…]`."""
    return "[" + ",".join(map(str, _finite(vector).tolist())) + "]"


class VectorBytes(bytes):
    """A float32 little-endian vector, sent to the server in pgvector's binary form."""


class _VectorDumper(Dumper):
    """pgvector's binary input (`vector_recv`): the dimensions and a reserved int16, then
    the values as big-endian float4: 2 µs for 256 dimensions against 113 µs for the text
    form, which formats every float in Python (8 % of the indexer's time, on its event
    loop, in a profile of the purge benchmark)."""

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        values = _finite(obj)
        return struct.pack(">HH", len(values), 0) + values.astype(">f4").tobytes()


async def _binary_vectors(conn: AsyncConnection[Any]) -> None:
    """Teach this connection to dump `VectorBytes` as the server's `vector` type (its oid
    is the server's, looked up once per connection)."""
    if conn.adapters.types.get("vector") is None:
        info = await TypeInfo.fetch(conn, "vector")
        if info is None:
            raise RuntimeError("the vector type is missing: is the pgvector extension created?")
        info.register(conn)
    conn.adapters.register_dumper(VectorBytes, vector_dumper(conn.adapters.types["vector"].oid))


def vector_dumper(oid: int) -> type[Dumper]:
    """The dumper of `VectorBytes` for a server whose `vector` type has this oid (for a
    connection of one's own: `conn.adapters.register_dumper(VectorBytes, ...)`)."""
    if oid not in _DUMPERS:
        _DUMPERS[oid] = type("VectorDumper", (_VectorDumper,), {"oid": oid})
    return _DUMPERS[oid]


_DUMPERS: dict[int, type[Dumper]] = {}  # by the server's oid of `vector`


async def insert_vectors(
    conn: AsyncConnection[Any],
    chunk_ids: Sequence[str],
    vectors: Sequence[bytes],
    embedder: tuple[str, str],
    dims: int,
) -> None:
    """Store one vector per chunk for the model (name, version) that made it."""
    if not vectors:
        return
    await _binary_vectors(conn)
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO chunk_vectors (chunk_id, embedder, embedder_version, dims, embedding) "
            "VALUES (%s, %s, %s, %s, %b) "
            "ON CONFLICT (chunk_id, embedder, embedder_version) DO UPDATE SET "
            "dims = EXCLUDED.dims, embedding = EXCLUDED.embedding",
            [
                (c, embedder[0], embedder[1], dims, VectorBytes(v))
                for c, v in zip(chunk_ids, vectors, strict=True)
            ],
        )


async def copy_vectors(
    conn: AsyncConnection[Any],
    chunk_ids: Sequence[str],
    vectors: Sequence[bytes],
    embedder: tuple[str, str],
    dims: int,
) -> None:
    """The vectors of chunks written in this same transaction, with a binary COPY: no row
    of theirs can exist yet (the chunks are new, and a vector row goes with its chunk), so
    there is nothing to upsert; an `INSERT` per row, each formatted in Python, was a
    twentieth of the indexer's CPU."""
    if not vectors:
        return
    await _binary_vectors(conn)
    statement = (
        "COPY chunk_vectors (chunk_id, embedder, embedder_version, dims, embedding) "
        "FROM STDIN (FORMAT BINARY)"
    )
    async with conn.cursor() as cur, cur.copy(statement) as copy:
        copy.set_types(["text", "text", "text", "int4", "vector"])
        for chunk_id, vector in zip(chunk_ids, vectors, strict=True):
            await copy.write_row((chunk_id, embedder[0], embedder[1], dims, VectorBytes(vector)))


def _index_ddl(generation: Generation) -> sql.Composed:
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON chunk_vectors USING hnsw ({expr} vector_ip_ops) "
        "WITH (m = {m}, ef_construction = {ef}) WHERE {rows}"
    ).format(
        name=sql.Identifier(generation.index_name),
        expr=generation.cast(sql.Identifier("embedding")),
        m=sql.Literal(HNSW_M),
        ef=sql.Literal(HNSW_EF_CONSTRUCTION),
        rows=generation.rows(),
    )


async def _put_present(
    conn: AsyncConnection[Any],
    chunk_ids: Sequence[str],
    made: Mapping[tuple[str, str], Sequence[bytes]],
) -> None:
    """Each model's vectors of the chunks still there: a chunk purged since its text was
    read is skipped (its foreign key would fail), and none can go while this commits."""
    if not any(made.values()):
        return
    cur = await conn.execute(
        "SELECT chunk_id FROM chunks WHERE chunk_id = ANY (%s) FOR SHARE", (list(chunk_ids),)
    )
    present = {row[0] for row in await cur.fetchall()}
    for model, vectors in made.items():
        keep = [(c, v) for c, v in zip(chunk_ids, vectors, strict=True) if c in present]
        if keep:
            dims = len(keep[0][1]) // 4
            await insert_vectors(conn, [c for c, _ in keep], [v for _, v in keep], model, dims)


class PostgresVectorStore:
    """Implements VectorStore: which chunks lack a model's vector, storing them, and the
    model generations."""

    def __init__(self, pool: AsyncConnectionPool, *, build_memory: str = "1GB") -> None:
        self._pool = pool
        self._build_memory = build_memory  # maintenance_work_mem while an index is built

    async def missing(self, embedder: str, version: str, limit: int) -> list[tuple[str, str]]:
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT c.chunk_id, c.text FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM "
                "chunk_vectors v WHERE v.chunk_id = c.chunk_id AND v.embedder = %s AND "
                "v.embedder_version = %s) ORDER BY c.chunk_id LIMIT %s",
                (embedder, version, limit),
            )
            return [(row[0], row[1]) for row in await cur.fetchall()]

    async def missing_after(
        self, embedder: str, version: str, after: str, limit: int
    ) -> list[tuple[str, str]]:
        """(chunk id, text) of chunks past `after` in id order lacking the model's vector:
        a reembed job's pages, with the last id as its checkpoint."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT c.chunk_id, c.text FROM chunks c WHERE c.chunk_id > %s AND NOT EXISTS "
                "(SELECT 1 FROM chunk_vectors v WHERE v.chunk_id = c.chunk_id AND "
                "v.embedder = %s AND v.embedder_version = %s) ORDER BY c.chunk_id LIMIT %s",
                (after, embedder, version, limit),
            )
            return [(row[0], row[1]) for row in await cur.fetchall()]

    async def switch_generation(self, embedder: str, version: str) -> bool:
        """Make the model's generation live and the live one retired, in one commit (so
        no read ranks by both); False when it already was live. Retired vectors stay
        until their generation is dropped."""
        async with transaction(self._pool) as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_GENERATION_LOCK,))
            cur = await conn.execute(
                "SELECT state FROM vector_generations WHERE embedder = %s AND "
                "embedder_version = %s FOR UPDATE",
                (embedder, version),
            )
            row = await cur.fetchone()
            if row is None:
                raise ValueError(f"model {embedder} {version} has no vector generation")
            if row[0] == "live":
                return False
            await conn.execute(
                "UPDATE vector_generations SET state = 'retired' WHERE state = 'live'"
            )
            await conn.execute(
                "UPDATE vector_generations SET state = 'live', live_at = now() WHERE "
                "embedder = %s AND embedder_version = %s",
                (embedder, version),
            )
            return True

    async def put(
        self, chunk_ids: Sequence[str], vectors: Sequence[bytes], embedder: tuple[str, str]
    ) -> None:
        if not vectors:
            return
        async with transaction(self._pool) as conn:
            await _put_present(conn, chunk_ids, {embedder: vectors})

    async def count(self, embedder: str, version: str) -> tuple[int, int]:
        """(chunks with a vector of this model, all chunks)."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT (SELECT count(*) FROM chunk_vectors WHERE embedder = %s AND "
                "embedder_version = %s), (SELECT count(*) FROM chunks)",
                (embedder, version),
            )
            row = await cur.fetchone()
            assert row is not None
            return int(row[0]), int(row[1])

    async def claim_backlog(self, limit: int, lease_s: float) -> list[tuple[str, str]]:
        # Rows another indexer is claiming right now are skipped, not waited for; a claim
        # holds no lock once this commits, so a purge of a claimed chunk goes ahead (and
        # `put` then skips it).
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "UPDATE embedding_backlog b SET claimed_until = now() + make_interval(secs => %s) "
                "FROM chunks c WHERE b.chunk_id = ANY (ARRAY(SELECT chunk_id FROM "
                " embedding_backlog WHERE claimed_until IS NULL OR claimed_until < now() "
                " ORDER BY queued_at, chunk_id LIMIT %s FOR UPDATE SKIP LOCKED)) "
                " AND c.chunk_id = b.chunk_id "
                "RETURNING b.queued_at, b.chunk_id, c.text",
                (lease_s, limit),
            )
            rows = sorted(await cur.fetchall())
            return [(row[1], row[2]) for row in rows]

    async def settle(
        self, chunk_ids: Sequence[str], made: Mapping[tuple[str, str], Sequence[bytes]]
    ) -> None:
        async with transaction(self._pool) as conn:
            await _put_present(conn, chunk_ids, made)
            await conn.execute(
                "DELETE FROM embedding_backlog WHERE chunk_id = ANY (%s)", (list(chunk_ids),)
            )

    async def release(self, chunk_ids: Sequence[str]) -> None:
        async with transaction(self._pool) as conn:
            await conn.execute(
                "UPDATE embedding_backlog SET claimed_until = NULL WHERE chunk_id = ANY (%s)",
                (list(chunk_ids),),
            )

    async def backlog_size(self) -> int:
        async with transaction(self._pool) as conn:
            cur = await conn.execute("SELECT count(*) FROM embedding_backlog")
            row = await cur.fetchone()
            return int(row[0]) if row else 0

    async def ensure_generation(self, embedder: str, version: str, dims: int) -> Generation:
        """The model's generation, registered (with its HNSW index) if it is new; the live
        one when none is: the first model a deployment runs answers its reads."""
        generation = Generation(embedder, version, dims)
        async with transaction(self._pool) as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_GENERATION_LOCK,))
            cur = await conn.execute(
                "SELECT dims, state FROM vector_generations WHERE embedder = %s AND "
                "embedder_version = %s",
                (embedder, version),
            )
            row = await cur.fetchone()
            if row is not None and int(row[0]) != dims:
                raise ValueError(
                    f"model {embedder} {version} made {row[0]}-dimension vectors before and "
                    f"{dims} now; give the changed model a new version"
                )
            if row is None:
                await conn.execute(
                    "INSERT INTO vector_generations (embedder, embedder_version, dims, state) "
                    "VALUES (%s, %s, %s, 'building')",
                    (embedder, version, dims),
                )
            # The graph is built in memory while it fits: past maintenance_work_mem the build
            # goes on disk, 9.6 times slower at 500,000 vectors (docs/benchmarks/dense.md).
            await conn.execute(
                "SELECT set_config('maintenance_work_mem', %s, true)", (self._build_memory,)
            )
            await conn.execute(_index_ddl(generation))
            await conn.execute(
                "UPDATE vector_generations SET state = 'live', live_at = now() WHERE "
                "embedder = %s AND embedder_version = %s AND NOT EXISTS (SELECT 1 FROM "
                "vector_generations WHERE state = 'live')",
                (embedder, version),
            )
            cur = await conn.execute(
                "SELECT state FROM vector_generations WHERE embedder = %s AND "
                "embedder_version = %s",
                (embedder, version),
            )
            state = await cur.fetchone()
        assert state is not None
        made = Generation(embedder, version, dims, str(state[0]))
        log.info("vectors.generation", embedder=embedder, version=version, state=made.state)
        return made

    async def live(self) -> Generation | None:
        async with transaction(self._pool) as conn:
            return await live_generation(conn)


async def live_generation(
    conn: AsyncConnection[Any], *, ef_search: int | None = None, max_scan: int | None = None
) -> Generation | None:
    """The generation reads rank by (in the caller's snapshot), if any; with `ef_search`,
    the transaction's HNSW search is set in the same statement: that many candidates,
    iterative scans (relaxed order) up to `max_scan` index entries."""
    if ef_search is None:
        cur = await conn.execute(
            "SELECT embedder, embedder_version, dims FROM vector_generations WHERE state = 'live'"
        )
    else:
        cur = await conn.execute(
            "SELECT embedder, embedder_version, dims, set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.max_scan_tuples', %s, true) FROM vector_generations "
            "WHERE state = 'live'",
            (str(ef_search), str(max_scan or 20_000)),
        )
    row = await cur.fetchone()
    return None if row is None else Generation(str(row[0]), str(row[1]), int(row[2]), "live")
