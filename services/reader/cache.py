"""The answer cache: keys per subject, eviction tags, and entries served only while current.

An entry is never kept when a change raced its write (docs/design/read-path.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

import structlog
from pydantic import BaseModel

from govindex.core.errors import TransientError
from govindex.core.metrics import observe_cache
from govindex.core.ports import ReadCache, ReadStore
from govindex.core.records import Chunk
from reader.models import Pack, SearchRequest, SearchResponse

log = structlog.get_logger(__name__)
T = TypeVar("T", Pack, SearchResponse)
Built = tuple[T, list[Chunk], dict[str, int]]  # the answer, what it holds, their sequences

CACHE_TTL_S = 300
NOW_TTL_S = 30  # a request about "now" goes stale as time passes: cached briefly


class Entry(BaseModel):
    """A cache entry: the response and the sequence of every document it holds."""

    documents: dict[str, int]
    body: str


@dataclass(frozen=True)
class Tags:
    """What an entry is evicted by: a change to any of its documents or chunks, or to any
    of its subject's principals."""

    documents: list[str]
    chunks: list[str]
    principals: list[str]


def doc_key(c: Chunk) -> str:
    return f"{c.tenant_id}/{c.source_id}/{c.doc_id}"


def cache_key(kind: str, request: SearchRequest) -> str:
    """The canonical request (subject included, so entries are never shared across
    subjects); a request without as_of is keyed as "now" and cached briefly."""
    body = request.model_dump(mode="json", exclude={"cache", "trace"})
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return f"read:{kind}:{hashlib.sha256(canonical.encode()).hexdigest()}"


def tags_of(request: SearchRequest, held: Sequence[Chunk], sequences: dict[str, int]) -> Tags:
    return Tags(
        documents=sorted(sequences),
        chunks=sorted({c.chunk_id for c in held}),
        principals=sorted(set(request.subject.principals or ())),
    )


def ttl_of(request: SearchRequest, held: Sequence[Chunk], now: datetime) -> int:
    """Bounded by the earliest moment an item stops being valid (for a request about
    "now"); evictions take care of every change recorded before then."""
    ttl = timedelta(seconds=CACHE_TTL_S if request.as_of is not None else NOW_TTL_S)
    if request.as_of is None:
        for c in held:
            if c.valid_to is not None:
                ttl = min(ttl, c.valid_to - now)
    return max(0, int(ttl.total_seconds()))


def checkable(held: Sequence[Chunk], sequences: dict[str, int]) -> bool:
    """Every held document has an order-guard row, so a hit can be checked against it."""
    return len(sequences) == len({doc_key(c) for c in held})


class AnswerCache:
    """Serve from the cache only what is provably current, and keep nothing that is not.

    An entry records the sequence of every document it holds. A hit is served only if
    Postgres still has each at that sequence with its source enabled (one small query),
    which closes the window between a commit and its eviction. After a write the same check
    runs again and deletes the entry if a change committed meanwhile; a change committing
    later evicts it through its tags (the indexer and purger evict after they commit), so
    no entry outlives a purge, revocation or version."""

    def __init__(
        self, cache: ReadCache | None, store: ReadStore, clock: Callable[[], datetime]
    ) -> None:
        self._cache = cache
        self._store = store
        self._clock = clock

    async def answer(
        self,
        kind: str,
        request: SearchRequest,
        build: Callable[[], Awaitable[Built[T]]],
        model: type[T],
    ) -> T:
        name = cache_key(kind, request)
        if self._cache is not None and request.cache == "use":
            try:
                served = await self._served(self._cache, name, model)
            except TransientError as exc:  # the cache is away: answer fresh, as on a miss
                log.warning("cache.unavailable", during="lookup", error=str(exc))
                served = None
            observe_cache(hit=served is not None)
            if served is not None:
                return served
        result, held, sequences = await build()
        if self._cache is not None and request.cache != "bypass":
            try:
                await self.keep(name, request, result, held, sequences)
            except TransientError as exc:
                # Not kept, or kept without being checked again: either way safe, since a
                # hit is served only once Postgres confirms every document it holds.
                log.warning("cache.unavailable", during="write", error=str(exc))
        return result

    async def _served(self, cache: ReadCache, name: str, model: type[T]) -> T | None:
        """The entry under `name` if it is still current (a hit), else None (a miss)."""
        stored = await cache.get(name)
        if stored is None:
            return None
        entry = Entry.model_validate_json(stored)
        if not await self._store.still_current(entry.documents):
            return None
        return model.model_validate_json(entry.body).model_copy(update={"cached": True})

    async def keep(
        self,
        name: str,
        request: SearchRequest,
        result: Pack | SearchResponse,
        held: Sequence[Chunk],
        sequences: dict[str, int],
    ) -> None:
        """Write the entry, then delete it again if what it holds changed meanwhile."""
        cache = self._cache
        ttl = ttl_of(request, held, self._clock())
        if cache is None or ttl <= 0 or not checkable(held, sequences):
            return
        entry = Entry(documents=sequences, body=result.model_dump_json())
        tags = tags_of(request, held, sequences)
        await cache.put(
            name,
            entry.model_dump_json().encode(),
            documents=tags.documents,
            chunks=tags.chunks,
            principals=tags.principals,
            ttl_s=ttl,
        )
        if not await self._store.still_current(sequences):
            await cache.delete(name)  # changed while we wrote: the entry must not stay
