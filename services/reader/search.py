"""The minimal governed read path: OpenSearch finds, Postgres decides (DESIGN §7).

OpenSearch filters by tenant, ACL, purpose and valid time in the query; every candidate is
then re-checked against Postgres, which is the system of record: a chunk that Postgres no
longer holds (purged), holds with other access, or whose text no longer matches its hash is
not returned. Nothing else is returned — no counts or highlights of what was filtered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from govindex.core.hashing import sha256_hex
from govindex.core.ports import CandidateIndex, ChunkStore
from govindex.core.records import Chunk


@dataclass(frozen=True)
class Query:
    text: str
    tenant_id: str
    principals: tuple[str, ...]
    purpose: str | None
    as_of: datetime
    limit: int = 10


@dataclass(frozen=True)
class Hit:
    score: float
    chunk: Chunk


def admitted(chunk: Chunk, query: Query) -> bool:
    """The gates, in order: tenant, ACL, purpose, valid time, integrity."""
    if chunk.tenant_id != query.tenant_id:
        return False
    if not set(chunk.acl) & set(query.principals):
        return False
    if query.purpose is not None and query.purpose not in chunk.allowed_purposes:
        return False
    if chunk.valid_from > query.as_of:
        return False
    if chunk.valid_to is not None and chunk.valid_to <= query.as_of:
        return False
    return sha256_hex(chunk.text) == chunk.content_hash


async def search(query: Query, *, index: CandidateIndex, store: ChunkStore) -> list[Hit]:
    if not query.principals:
        return []
    candidates = await index.search(
        text=query.text,
        tenant_id=query.tenant_id,
        principals=query.principals,
        purpose=query.purpose,
        as_of=query.as_of,
        size=max(query.limit * 3, 20),
    )
    scores = {c["chunk_id"]: float(c["score"]) for c in candidates}
    stored = await store.chunks_by_id(list(scores))
    hits = [Hit(scores[c.chunk_id], c) for c in stored if admitted(c, query)]
    hits.sort(key=lambda h: (-h.score, h.chunk.chunk_id))
    return hits[: query.limit]


def principals_of(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted({v.strip() for v in values if v.strip()}))
