"""The governed read service: search, pack, verify and open one anchor, over the read ports.

One request reads one Postgres snapshot. Every channel filters by tenant, ACL, scope,
purpose, valid/system time and deletion inside its own query; every candidate it returns is
then re-checked by `reader.gates` on facts read in the same snapshot (integrity included)
before fusion, so nothing is ever filtered after ranking (`reader.retrieval`). Hydrated
parents and neighbours pass the same gates (`reader.packing`). Nothing about a candidate
refused by tenant, ACL, scope or purpose is returned: not its id, not a count, not a trace
line. Hit totals are never returned. Answers are cached by `reader.cache`. What each answer
is audited with is kept on a `Trail` (`reader.http` records it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeAlias

import structlog

from govindex.core.errors import RejectedByStore, TransientError
from govindex.core.graph_templates import BUILTIN, GraphTemplates
from govindex.core.hashing import sha256_hex
from govindex.core.metrics import observe_refusals
from govindex.core.ports import (
    AuditEndpoint,
    AuditEntry,
    CandidateIndex,
    ChunkFacts,
    ReadAccess,
    ReadAudit,
    ReadCache,
    ReadSnapshot,
    ReadStore,
)
from govindex.core.records import Chunk
from govindex.core.tokens import HEURISTIC, TokenEstimator
from reader.access import manifest_access, relations_access, request_access
from reader.cache import AnswerCache, cache_key, doc_key
from reader.credentials import Admitted, Proven
from reader.gates import refusal
from reader.manifest import is_past, judge_pin, overall, pack_hash, pins
from reader.models import (
    Manifest,
    Pack,
    PackRequest,
    RelationsRequest,
    RelationsResponse,
    SearchRequest,
    SearchResponse,
    VerifyResponse,
    Versions,
)
from reader.packing import PACKER, assemble
from reader.relations import MAX_PEER_EDGES, asked, peer_queries, relations_response
from reader.retrieval import Ranked, rank, search_response, top_chunks

log = structlog.get_logger(__name__)
Answer: TypeAlias = SearchResponse | Pack | VerifyResponse  # an answer that names chunks

# cache_key stays importable from here: callers that inspect entries name them as we do.
__all__ = [
    "Answer",
    "ReadPorts",
    "ReadService",
    "Trail",
    "cache_key",
    "canonical_hash",
    "record",
    "request_hash",
    "returned",
]


@dataclass(frozen=True)
class ReadPorts:
    store: ReadStore
    index: CandidateIndex | None
    cache: ReadCache | None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    embedder: str | None = None  # the dense channel's model, name/version (packs name it)
    tokens: TokenEstimator = HEURISTIC  # counts budgets, as ingest counted token_estimate
    graph: GraphTemplates = BUILTIN  # the path templates the graph channel may walk


class ReadService:
    """search, pack, verify and open one chunk, over the read ports."""

    def __init__(self, ports: ReadPorts) -> None:
        self.ports = ports
        self._answers = AnswerCache(ports.cache, ports.store, ports.clock)

    async def search(self, request: SearchRequest) -> SearchResponse:
        async def build() -> tuple[SearchResponse, list[Chunk], dict[str, int]]:
            async with self.ports.store.snapshot() as snap:
                ranked = await self._rank(request, snap)
                observe_refusals(ranked.refused)
                top = top_chunks(request, ranked)
                sequences = await snap.doc_sequences(sorted({doc_key(c) for c in top}))
            return search_response(request, ranked), top, sequences

        return await self._answers.answer("search", request, build, SearchResponse)

    async def pack(self, request: PackRequest) -> Pack:
        async def build() -> tuple[Pack, list[Chunk], dict[str, int]]:
            now = self.ports.clock()
            async with self.ports.store.snapshot() as snap:
                kinds = [need.type for need in request.required_evidence]
                ranked = await self._rank(request, snap, now, omissions=True, evidence=kinds)
                pack, held = await assemble(
                    request,
                    ranked,
                    snap,
                    built_at=now,
                    versions=self._versions(),
                    tokens=self.ports.tokens,
                )
                observe_refusals(ranked.refused)  # dedup included
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
            verdicts.append(judge_pin(pin, key, found, access, past=is_past(manifest)))
        return VerifyResponse(
            status=overall(verdicts, hash_ok), checked_at=self.ports.clock(), pins=verdicts
        )

    async def relations(self, request: RelationsRequest) -> RelationsResponse:
        """The entity's edges at as_of (and known_at), each as visible as its evidence."""
        access = relations_access(request, self.ports.clock())
        relation, outgoing, incoming = asked(request)
        async with self.ports.store.snapshot() as snap:
            rows = await snap.relations(
                access,
                request.entity,
                relation,
                outgoing,
                incoming,
                request.limit,
                request.object_type,
            )
            peers = []  # what else the subjects hold of a one-at-a-time relation
            for subject, relation in peer_queries(request.entity, rows):
                peers += await snap.relations(
                    access, subject, relation, True, False, MAX_PEER_EDGES
                )
            chunk_ids = {r.evidence_chunk_id for r in (*rows, *peers)}
            facts = await snap.facts(sorted(chunk_ids))
        return relations_response(request, access, rows, facts, peers)

    async def chunk(self, chunk_id: str, access: ReadAccess) -> ChunkFacts | None:
        """The chunk and its facts if it passes every gate at access.as_of; None otherwise
        (whatever the reason, so a refused id is indistinguishable from an unknown one)."""
        async with self.ports.store.snapshot() as snap:
            facts = (await snap.facts([chunk_id])).get(chunk_id)
        if facts is None or refusal(facts, access) is not None:
            return None
        return facts

    async def _rank(
        self,
        request: SearchRequest,
        snap: ReadSnapshot,
        now: datetime | None = None,
        *,
        omissions: bool = False,
        evidence: Sequence[str] = (),
    ) -> Ranked:
        access = request_access(request, now or self.ports.clock())
        return await rank(
            request,
            snap,
            access,
            self.ports.index,
            omissions=omissions,
            evidence=evidence,
            graph=self.ports.graph,
        )

    def _versions(self) -> Versions:
        estimator = self.ports.tokens.label
        return Versions(packer=PACKER, estimator=estimator, embedder=self.ports.embedder)

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


# --- the audit ----------------------------------------------------------------------------


@dataclass
class Trail:
    """What one request is known to be so far, for its audit record (`AuditEntry`): who
    proved it, then what it asked for, the subject it ran as and what it returned, as each
    becomes known. A refusal is recorded with what was known when it was refused: the
    tenant empty until a valid request named one, the principals and scopes the credential's
    own (a JWT's; none for a service token) until a subject was admitted."""

    endpoint: AuditEndpoint
    credential_kind: str
    credential_name: str
    subject: str | None
    principals: tuple[str, ...]
    scopes: tuple[str, ...]
    tenant: str = ""
    request_hash: str = ""  # empty: the body was refused unread (too large)
    purpose: str | None = None
    as_of: datetime | None = None
    known_at: datetime | None = None
    chunk_ids: tuple[str, ...] = ()
    pack_hash: str | None = None
    kept: bool = False  # its record was written with the pack it kept (one transaction)

    @classmethod
    def of(cls, endpoint: AuditEndpoint, proven: Proven) -> Trail:
        return cls(
            endpoint=endpoint,
            credential_kind=proven.kind,
            credential_name=proven.name,
            subject=proven.subject,
            principals=tuple(sorted(proven.principals)),
            scopes=tuple(sorted(proven.scopes or ())),
        )

    def asked(self, request: SearchRequest | RelationsRequest) -> None:
        self.tenant, self.purpose = request.tenant, request.purpose
        self.as_of, self.known_at = request.as_of, request.known_at

    def verifying(self, manifest: Manifest) -> None:
        """A verification acts for the manifest's tenant, at its as_of, by what is held now."""
        self.tenant, self.purpose, self.as_of = manifest.tenant, manifest.purpose, manifest.as_of
        self.pack_hash = manifest.pack_hash

    def ran_as(self, admitted: Admitted) -> None:
        self.principals, self.scopes = admitted.principals, admitted.scopes

    def answered(self, answer: Answer) -> None:
        self.chunk_ids = returned(answer)
        if isinstance(answer, Pack):
            self.pack_hash = answer.manifest.pack_hash
        if not isinstance(answer, VerifyResponse):  # the moment it ran for, `now` resolved
            self.as_of, self.known_at = answer.as_of, answer.known_at

    def entry(self, status: int) -> AuditEntry:
        return AuditEntry(
            endpoint=self.endpoint,
            status=status,
            credential_kind=self.credential_kind,
            credential_name=self.credential_name,
            subject=self.subject,
            tenant=self.tenant,
            principals=self.principals,
            scopes=self.scopes,
            purpose=self.purpose,
            as_of=self.as_of,
            known_at=self.known_at,
            request_hash=self.request_hash,
            chunk_ids=self.chunk_ids,
            pack_hash=self.pack_hash,
        )


async def record(audit: ReadAudit | None, trail: Trail, status: int) -> bool:
    """Keep the trail's record with `status`; False, and logged, when it cannot be kept
    (PostgreSQL unavailable, or the row refused). `audit` None: nothing to keep."""
    if audit is None or trail.kept:
        return True
    try:
        await audit.record(trail.entry(status))
    except (TransientError, RejectedByStore) as exc:
        log.error(
            "read.audit_failed",
            endpoint=trail.endpoint,
            status=status,
            credential=trail.credential_name,
            error=str(exc),
        )
        return False
    return True


def request_hash(body: bytes) -> str:
    """`sha256:<hex>` of the canonical JSON of `body`: `json.dumps(value, sort_keys=True,
    separators=(",", ":"))` of the value it parses to, so the same request however spaced or
    ordered has one hash. A body that is not JSON: the hash of its bytes."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return "sha256:" + hashlib.sha256(body).hexdigest()
    return canonical_hash(value)


def canonical_hash(value: object) -> str:
    return sha256_hex(json.dumps(value, sort_keys=True, separators=(",", ":")))


def returned(answer: Answer) -> tuple[str, ...]:
    """The chunk ids an answer names, in its order: a search's hits; each pack item, then
    its hydrated chunks and the copies that corroborate it; the pins a verdict judged."""
    if isinstance(answer, SearchResponse):
        return tuple(hit.anchor.chunk_id for hit in answer.hits)
    if isinstance(answer, VerifyResponse):
        return tuple(pin.chunk_id for pin in answer.pins)
    ids: list[str] = []
    for item in answer.items:
        ids.append(item.anchor.chunk_id)
        ids.extend(h.anchor.chunk_id for h in item.hydrated)
        ids.extend(c.chunk_id for c in item.corroboration)
    return tuple(ids)
