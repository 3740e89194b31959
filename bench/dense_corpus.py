"""The dense benchmark's corpus, and the two references the channel is measured against.

Documents are generated from the sentences and headings of the pinned Prometheus Operator
runbooks (bench/corpus/prometheus-runbooks) with a seeded RNG: a title and an opening
sentence, then eight sections of two to six sentences, some with a word swapped for
another word of the corpus. The indexer's own planning cuts and stamps them
(`plan_version`: every column as ingest fills it), WordLlama embeds the chunks in batches
(real 256-d vectors), and the rows go in with COPY: sources, documents, the versions and
chunks by the write path's own COPY, and chunk_vectors in binary (pgvector's wire form,
the float32 values exactly). Every chunk carries `group:all`; hash-random subsets of the
chunks also carry `group:p50`, `group:p10` and `group:p1`, so a subject holding only that
principal admits that share.

The references: exact search over the admissible vectors the bench holds (`Corpus.exact`)
and the BASELINE (`BaselineCache`), the in-process ranking the pgvector channel replaced.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.embedder import WordLlamaEmbedder
from govindex.adapters.postgres.admission import WHERE_ADMISSIBLE, admission_params
from govindex.adapters.postgres.chunks import copy_chunks
from govindex.adapters.postgres.tx import transaction
from govindex.adapters.postgres.version_rows import copy_versions
from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex
from govindex.core.ports import ReadAccess, ReadFilters, VersionPlan
from govindex.core.records import Chunk, SourceManifest
from indexer.planning import plan_version
from reader.access import request_access
from reader.models import SearchRequest
from reader.retrieval import filters_of

Vectors = np.ndarray[Any, np.dtype[np.float32]]
LIMIT = 10  # Recall@10: the ten nearest
RUNBOOKS = Path(__file__).parent / "corpus" / "prometheus-runbooks" / "runbooks"
TENANT = "bench"
SOURCES = 8
BATCH_DOCS = 500  # documents (9 chunks each) cut, embedded and copied per transaction
SEED, QUERY_SEED = 20_260_101, 7_777_777  # queries come from their own RNG stream
# The principal a subject holds, and the share of the chunks it admits.
FILTERS: dict[str, float] = {"group:all": 1.0, "group:p50": 0.5, "group:p10": 0.1, "group:p1": 0.01}
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)

_FRONTMATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
_FENCE = re.compile(r"```.*?```", re.S)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")


@dataclass(frozen=True)
class Material:
    """What the texts are made of: sentences, headings and words of the runbooks."""

    sentences: tuple[str, ...]
    headings: tuple[str, ...]
    words: tuple[str, ...]


def material() -> Material:
    sentences: dict[str, None] = {}
    headings: dict[str, None] = {}
    for path in sorted(RUNBOOKS.rglob("*.md")):
        prose: list[str] = []
        for line in _FENCE.sub(" ", _FRONTMATTER.sub("", path.read_text())).splitlines():
            line = line.strip()
            if line.startswith("#"):
                headings[line.lstrip("#").strip()] = None
            elif line and not line.startswith(("|", "<", "{{")):
                prose.append(line.lstrip("-*0123456789. ").replace("`", ""))
        for sentence in _SENTENCE.split(" ".join(prose)):
            if 4 <= len(sentence.split()) <= 40:
                sentences[sentence.strip()] = None
    words = sorted({w.lower() for s in sentences for w in _WORD.findall(s)})
    assert len(sentences) > 500, "the runbooks give the sentences the texts are made of"
    return Material(tuple(sentences), tuple(h for h in headings if h), tuple(words))


def section(m: Material, rng: random.Random, title: str) -> str:
    """A section: a heading, then 2-6 sentences, some with one word swapped."""
    picked = []
    for sentence in rng.sample(m.sentences, rng.randint(2, 6)):
        words = sentence.split()
        if rng.random() < 0.4:
            words[rng.randrange(len(words))] = rng.choice(m.words)
        picked.append(" ".join(words))
    return f"## {rng.choice(m.headings)} ({title})\n\n" + " ".join(picked)


def query_texts(m: Material, n: int) -> list[str]:
    """Queries made as sections are, from another RNG stream."""
    rng = random.Random(QUERY_SEED)
    return [section(m, rng, rng.choice(m.headings)) for _ in range(n)]


def acl_of(chunk_id: str) -> tuple[str, ...]:
    """group:all, and each share's principal by an independent draw from the id's hash."""
    digest = hashlib.sha256(chunk_id.encode()).digest()
    drawn = [int.from_bytes(digest[4 * k : 4 * k + 4], "big") / 2**32 for k in range(3)]
    shares = list(FILTERS.items())[1:]
    return ("group:all", *(p for (p, share), u in zip(shares, drawn, strict=True) if u < share))


def manifest(source_id: str) -> SourceManifest:
    return SourceManifest.model_validate(
        {
            "source_id": source_id,
            "tenant": TENANT,
            "source_type": "git",
            "owner_team": "platform",
            "classification": "internal",
            "default_acl": ["group:all"],
            "allowed_purposes": ["support"],
            "trust_level": "authoritative",
        }
    )


def document(m: Material, d: int) -> VersionPlan:
    """Document d, cut and stamped by the indexer's planning; the chunks' ACLs drawn."""
    rng = random.Random(SEED * 1_000_003 + d)
    title = rng.choice(m.headings)
    text = f"# {title}\n\n{rng.choice(m.sentences)}\n\n" + "\n\n".join(
        section(m, rng, title) for _ in range(8)
    )
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    source, doc_id = f"runbooks-{d % SOURCES}", f"runbooks/{slug}-{d}.md"
    observed = EPOCH + timedelta(days=d % 365, seconds=d % 86_400)
    event = DocumentChanged(
        tenant_id=TENANT,
        source_id=source,
        doc_id=doc_id,
        path=doc_id,
        sequence=1,
        source_version=f"git:{d:040x}",
        observed_at=observed,
        content_hash=sha256_hex(text),
        content=text,
    )
    plan = plan_version(
        event, text, manifest(source), generation=1, now=observed + timedelta(hours=1)
    )
    chunks = [c.model_copy(update={"acl": acl_of(c.chunk_id)}) for c in plan.chunks]
    return replace(plan, chunks=chunks)


@dataclass
class Batch:
    plans: list[VersionPlan]
    chunks: list[Chunk]
    vectors: Vectors
    embed_s: float


def embed(embedder: WordLlamaEmbedder, texts: list[str]) -> Vectors:
    """Unit float32 vectors (rows), as the indexer stores them."""
    raw = b"".join(embedder.embed(texts))
    return np.frombuffer(raw, dtype="<f4").reshape(len(texts), embedder.dims).copy()


def _binary_vectors(ids: list[str], vectors: Vectors, model: tuple[str, str]) -> bytes:
    """chunk_vectors rows in COPY's binary format; `vector` in pgvector's wire form
    (int16 dims, int16 unused, big-endian float4s): the float32 values exactly."""
    dims = vectors.shape[1]
    name, version = (s.encode() for s in model)
    fixed = b"".join(
        [
            struct.pack(">i", len(name)),
            name,
            struct.pack(">i", len(version)),
            version,
            struct.pack(">ii", 4, dims),
            struct.pack(">ihh", 4 + 4 * dims, dims, 0),
        ]
    )
    parts = [b"PGCOPY\n\xff\r\n\x00" + bytes(8)]
    for chunk_id, row in zip(ids, vectors.astype(">f4"), strict=True):
        c = chunk_id.encode()
        parts.append(struct.pack(">hi", 5, len(c)) + c + fixed + row.tobytes())
    parts.append(b"\xff\xff")
    return b"".join(parts)


async def copy_batch(conn: AsyncConnection[Any], batch: Batch, model: tuple[str, str]) -> None:
    async with conn.transaction(), conn.cursor() as cur:
        new = {p.source_id for p in batch.plans} - {
            row[0] for row in await (await cur.execute("SELECT source_id FROM sources")).fetchall()
        }
        async with cur.copy(
            "COPY sources (tenant_id, source_id, manifest, enabled, last_synced_at) FROM STDIN"
        ) as copy:
            for s in sorted(new):
                await copy.write_row(
                    [TENANT, s, Jsonb(manifest(s).model_dump(mode="json")), True, datetime.now(UTC)]
                )
        async with cur.copy(
            "COPY documents (tenant_id, source_id, doc_id, state, last_sequence, "
            "current_version_id, source_version, content_hash, path, last_indexed_at) FROM STDIN"
        ) as copy:
            for p in batch.plans:
                await copy.write_row(
                    [
                        p.tenant_id,
                        p.source_id,
                        p.doc_id,
                        "active",
                        p.sequence,
                        p.version_id,
                        p.source_version,
                        p.content_hash,
                        p.path,
                        p.recorded_at,
                    ]
                )
        await copy_versions(conn, batch.plans)
        await copy_chunks(conn, batch.chunks)
        async with cur.copy(
            "COPY chunk_vectors (chunk_id, embedder, embedder_version, dims, embedding) "
            "FROM STDIN (FORMAT BINARY)"
        ) as copy:
            await copy.write(
                _binary_vectors([c.chunk_id for c in batch.chunks], batch.vectors, model)
            )


@dataclass
class Corpus:
    """What the bench holds of what it loaded: ids, vectors and who may see each chunk."""

    capacity: int
    ids: list[str] = field(default_factory=list)
    at: dict[str, int] = field(default_factory=dict)
    text_hashes: set[int] = field(default_factory=set)
    docs: int = 0
    embed_s: float = 0.0
    load_s: float = 0.0

    def __post_init__(self) -> None:
        self.vectors = np.zeros((self.capacity, WordLlamaEmbedder.dims), dtype=np.float32)
        self.admits = {p: np.zeros(self.capacity, dtype=bool) for p in FILTERS}

    def __len__(self) -> int:
        return len(self.ids)

    def keep(self, batch: Batch) -> None:
        lo = len(self.ids)
        self.vectors[lo : lo + len(batch.chunks)] = batch.vectors
        for i, chunk in enumerate(batch.chunks, start=lo):
            self.ids.append(chunk.chunk_id)
            self.at[chunk.chunk_id] = i
            self.text_hashes.add(hash(chunk.text))
            for principal in chunk.acl:
                self.admits[principal][i] = True
        self.docs += len(batch.plans)
        self.embed_s += batch.embed_s

    def exact(self, queries: Vectors, k: int = LIMIT) -> dict[str, list[set[str]]]:
        """The true k nearest admissible chunks of each query, per principal (numpy)."""
        n = len(self.ids)
        where = {p: np.flatnonzero(self.admits[p][:n]) for p in FILTERS}
        out: dict[str, list[set[str]]] = {p: [] for p in FILTERS}
        for q in queries:
            scores = self.vectors[:n] @ q
            for p, idx in where.items():
                top = idx[np.argpartition(-scores[idx], k - 1)[:k]]
                out[p].append({self.ids[i] for i in top})
        return out

    def check_no_leak(self, answers: list[list[str]], principal: str) -> None:
        """The leak check (not a timing): every chunk returned carries the principal."""
        for answer in answers:
            for chunk_id in answer:
                assert self.admits[principal][self.at[chunk_id]], f"{chunk_id} leaked"


async def grow(
    conn: AsyncConnection[Any],
    corpus: Corpus,
    m: Material,
    embedder: WordLlamaEmbedder,
    size: int,
) -> None:
    """Load more documents until the corpus holds `size` chunks (the last one cut short):
    the next batch is cut and embedded in a thread while the database takes this one."""

    def prepare(first: int, room: int) -> Batch:
        plans = [document(m, d) for d in range(first, first + BATCH_DOCS)]
        chunks = [c for p in plans for c in p.chunks][:room]
        started = time.perf_counter()
        vectors = embed(embedder, [c.text for c in chunks])
        return Batch(plans, chunks, vectors, time.perf_counter() - started)

    started, first, room = time.perf_counter(), corpus.docs, size - len(corpus)
    pending: asyncio.Future[Batch] | None
    pending = asyncio.ensure_future(asyncio.to_thread(prepare, first, room))
    while pending is not None:
        batch = await pending
        first, room = first + BATCH_DOCS, room - len(batch.chunks)
        pending = asyncio.ensure_future(asyncio.to_thread(prepare, first, room)) if room else None
        await copy_batch(conn, batch, (embedder.name, embedder.version))
        corpus.keep(batch)
    corpus.load_s += time.perf_counter() - started


# --- the references: exact search (Corpus.exact) and the BASELINE --------------------


def accesses(principal: str, texts: Sequence[str], now: datetime) -> list[tuple[Any, ...]]:
    """(access, filters, text) per query, built as the read service builds them."""
    out: list[tuple[Any, ...]] = []
    for text in texts:
        request = SearchRequest.model_validate(
            {
                "tenant": TENANT,
                "subject": {"principals": [principal]},
                "purpose": "support",
                "query": text,
                "channels": ["dense"],
                "limit": LIMIT,
                "window": LIMIT,
                "cache": "bypass",
            }
        )
        out.append((request_access(request, now), filters_of(request), text))
    return out


@dataclass
class Run:
    """One pass of the queries: the ids returned and the seconds each took."""

    answers: list[list[str]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def pct(self, q: float) -> float:
        return float(np.percentile(np.asarray(self.seconds) * 1000, q))


# --- the BASELINE: the dense channel before pgvector -------------------------------------

_BASELINE_IDS = sql.Composed(
    [
        sql.SQL("SELECT c.chunk_id FROM chunks c JOIN chunk_vectors cv USING (chunk_id)"),
        sql.SQL(WHERE_ADMISSIBLE),
        sql.SQL(" AND cv.embedder = %(embedder)s AND cv.embedder_version = %(embedder_version)s"),
    ]
)


class BaselineCache:
    """BASELINE: the admissible ids by SQL, their vectors from a per-process dict (loaded
    from Postgres on first use, kept: a chunk id names immutable text), numpy brute force
    (`matrix @ query`, then top-k). The old `reads.VectorCache`, reading the `vector`
    column now that the bytea one is gone."""

    def __init__(self, embedder: WordLlamaEmbedder) -> None:
        self.embedder = embedder
        self.vectors: dict[str, Vectors] = {}

    async def rank(
        self, conn: AsyncConnection[Any], access: ReadAccess, filters: ReadFilters, text: str
    ) -> list[str]:
        e = self.embedder
        params = admission_params(access, filters, embedder=e.name, embedder_version=e.version)
        ids = [row[0] for row in await (await conn.execute(_BASELINE_IDS, params)).fetchall()]
        if not ids:
            return []
        missing = [i for i in ids if i not in self.vectors]
        if missing:
            cur = await conn.execute(
                "SELECT chunk_id, vector_send(embedding) FROM chunk_vectors WHERE chunk_id = "
                "ANY (%s) AND embedder = %s AND embedder_version = %s",
                (missing, e.name, e.version),
            )
            for chunk_id, wire in await cur.fetchall():  # int16 dims, int16, float4 BE
                self.vectors[chunk_id] = np.frombuffer(wire, ">f4", offset=4).astype("<f4")
        zero = np.zeros(e.dims, dtype=np.float32)
        matrix = np.vstack([self.vectors.get(i, zero) for i in ids])
        query = np.frombuffer(e.embed([text])[0], dtype="<f4")
        scores = matrix @ query
        order = np.lexsort((np.array(ids), -scores))[:LIMIT]
        return [ids[i] for i in order]


async def baseline_pass(
    pool: AsyncConnectionPool, cache: BaselineCache, queries: list[tuple[Any, ...]]
) -> Run:
    """The baseline, each read in a snapshot like the channel's."""
    run = Run()
    for access, filters, text in queries:
        started = time.perf_counter()
        async with transaction(pool) as conn:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            run.answers.append(await cache.rank(conn, access, filters, text))
        run.seconds.append(time.perf_counter() - started)
    return run
