"""The governed read service: search, pack, verify and open one anchor, over the read ports.

One request reads one Postgres snapshot. Every channel filters by tenant, ACL, scope,
purpose, valid/system time and deletion inside its own query; every candidate it returns is
then re-checked by `reader.gates` on facts read in the same snapshot (integrity included)
before fusion, so nothing is ever filtered after ranking (`reader.retrieval`). Hydrated
parents and neighbours pass the same gates (`reader.packing`). Nothing about a candidate
refused by tenant, ACL, scope or purpose is returned: not its id, not a count, not a trace
line. Hit totals are never returned. Answers are cached by `reader.cache`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from govindex.core.ports import CandidateIndex, ReadAccess, ReadCache, ReadSnapshot, ReadStore
from govindex.core.records import Chunk
from reader.access import manifest_access, request_access
from reader.cache import AnswerCache, cache_key, doc_key
from reader.gates import refusal
from reader.manifest import judge_pin, overall, pack_hash, pins
from reader.models import (
    Manifest,
    Pack,
    PackRequest,
    SearchRequest,
    SearchResponse,
    VerifyResponse,
)
from reader.packing import assemble
from reader.retrieval import Ranked, rank, search_response, top_chunks

# cache_key stays importable from here: callers that inspect entries name them as we do.
__all__ = ["ReadPorts", "ReadService", "cache_key"]


@dataclass(frozen=True)
class ReadPorts:
    store: ReadStore
    index: CandidateIndex | None
    cache: ReadCache | None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


class ReadService:
    """search, pack, verify and open one chunk, over the read ports."""

    def __init__(self, ports: ReadPorts) -> None:
        self.ports = ports
        self._answers = AnswerCache(ports.cache, ports.store, ports.clock)

    async def search(self, request: SearchRequest) -> SearchResponse:
        async def build() -> tuple[SearchResponse, list[Chunk], dict[str, int]]:
            async with self.ports.store.snapshot() as snap:
                ranked = await self._rank(request, snap)
                top = top_chunks(request, ranked)
                sequences = await snap.doc_sequences(sorted({doc_key(c) for c in top}))
            return search_response(request, ranked), top, sequences

        return await self._answers.answer("search", request, build, SearchResponse)

    async def pack(self, request: PackRequest) -> Pack:
        async def build() -> tuple[Pack, list[Chunk], dict[str, int]]:
            async with self.ports.store.snapshot() as snap:
                pack, held = await assemble(request, await self._rank(request, snap), snap)
                sequences = await snap.doc_sequences(sorted({doc_key(c) for c in held}))
            return pack, held, sequences

        return await self._answers.answer("pack", request, build, Pack)

    async def verify(self, manifest: Manifest) -> VerifyResponse:
        hash_ok = pack_hash(manifest) == manifest.pack_hash
        access = manifest_access(manifest)
        pinned = pins(manifest)
        async with self.ports.store.snapshot() as snap:
            facts = await snap.facts([p.chunk_id for p, _ in pinned])
        verdicts = []
        for pin, key in pinned:
            found = facts.get(pin.chunk_id)
            if found is not None and found.chunk.tenant_id != manifest.tenant:
                found = None  # a pin naming another tenant's chunk learns nothing
            verdicts.append(judge_pin(pin, key, found, access))
        return VerifyResponse(
            status=overall(verdicts, hash_ok), checked_at=self.ports.clock(), pins=verdicts
        )

    async def chunk(self, chunk_id: str, access: ReadAccess) -> Chunk | None:
        """The chunk if it passes every gate at access.as_of; None otherwise (whatever the
        reason, so a refused id is indistinguishable from an unknown one)."""
        async with self.ports.store.snapshot() as snap:
            facts = (await snap.facts([chunk_id])).get(chunk_id)
        if facts is None or refusal(facts, access) is not None:
            return None
        return facts.chunk

    async def _rank(self, request: SearchRequest, snap: ReadSnapshot) -> Ranked:
        access = request_access(request, self.ports.clock())
        return await rank(request, snap, access, self.ports.index)

    async def _store(
        self,
        name: str,
        request: SearchRequest,
        result: Pack | SearchResponse,
        held: Sequence[Chunk],
        sequences: dict[str, int],
    ) -> None:
        """A cache write as `search` and `pack` make it (the race test writes a late one)."""
        await self._answers.keep(name, request, result, held, sequences)
