"""Sync and async clients of the read API, over httpx: `GovindexClient`, `AsyncGovindexClient`.

    with GovindexClient(url, token, tenant="acme", purpose="support",
                        principals=["group:eng"]) as client:
        pack = client.pack("orders-db failover", budget=Budget(max_tokens=2000))
        assert client.verify(pack.manifest).status == "valid"

Tenant, purpose and subject (principals, scopes) are set once on the client and used by
every call; a call may override any of them. Principals or scopes None: the credential's own
(a verified JWT's; a service token carries no principals, so it must be given them).
Answers are parsed into the wire models (`govindex_client.models`); a refusal raises the
`GovindexError` of its status. A 503 is retried (`retries` times, backoff doubling from
`backoff` seconds up to `backoff_max`, or the server's `Retry-After`); nothing else is.
Arguments the models refuse raise pydantic's `ValidationError` before anything is sent.


(Over 450 lines on purpose: the sync and async clients side by side, method for method.)
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from types import TracebackType
from typing import Any, Generic, Literal, Self, TypedDict, TypeVar, Unpack
from urllib.parse import quote as quote_path

import httpx
from pydantic import BaseModel

from govindex_client.errors import Unreachable, refusal
from govindex_client.models import (
    Budget,
    CacheMode,
    Channel,
    ChunkView,
    DerivedArtifact,
    Filters,
    GraphSpec,
    Hydration,
    Manifest,
    Pack,
    PackRequest,
    Readiness,
    Registered,
    RelationsRequest,
    RelationsResponse,
    RequiredEvidence,
    SearchRequest,
    SearchResponse,
    StoredPack,
    Subject,
    VerifyRequest,
    VerifyResponse,
)

M = TypeVar("M", bound=BaseModel)
S = TypeVar("S", bound=SearchRequest)

# A bearer credential: a service token or a JWT, or what returns one when asked (called for
# every request, so a provider can hand out a fresh JWT before the last one expires).
Credential = str | Callable[[], str]

_USER_AGENT = f"govindex-client/{version('govindex-client')}"


class Asking(TypedDict, total=False):
    """Who asks and why, for one call; a key left out is the client's default. Principals
    or scopes given as None: the credential's own."""

    tenant: str
    purpose: str
    principals: Sequence[str] | None
    scopes: Sequence[str] | None
    as_of: datetime | None


class SearchOptions(Asking, total=False):
    """The rest of a search request (`SearchRequest`), each as the model takes it."""

    known_at: datetime | None
    entities: Sequence[str]
    filters: Filters | Mapping[str, Any]
    channels: Sequence[Channel]
    graph: GraphSpec | Mapping[str, Any]
    window: int
    limit: int
    trace: bool
    cache: CacheMode


class PackOptions(SearchOptions, total=False):
    """The rest of a pack request (`PackRequest`)."""

    hydration: Hydration | Mapping[str, Any]
    dedup_threshold: int
    budget: Budget | Mapping[str, Any]
    required_evidence: Sequence[RequiredEvidence | Mapping[str, Any]]


class RelationOptions(Asking, total=False):
    """What a relations request may name besides its entity (`RelationsRequest`)."""

    known_at: datetime
    relation: str | None
    direction: Literal["out", "in", "both"]
    object_type: str | None
    limit: int


class LineageFields(TypedDict, total=False):
    """A derived artifact (`DerivedArtifact`); the tenant defaults to the client's."""

    tenant: str
    kind: str
    id: str
    built_from: Sequence[str]
    location: str
    text: str | None


@dataclass(frozen=True)
class _Call(Generic[M]):
    """One request and the model its answer parses into (when its status is `ok`)."""

    method: Literal["GET", "POST"]
    path: str
    answer: type[M]
    body: bytes | None = None
    params: tuple[tuple[str, str], ...] = ()
    ok: frozenset[int] = frozenset({200})
    headers: tuple[tuple[str, str], ...] = ()


class _Calls:
    """What both clients share: the defaults, how a call becomes a request, how an answer
    becomes a model, an error or a retry."""

    def __init__(
        self,
        base_url: str,
        credential: Credential,
        *,
        tenant: str | None = None,
        purpose: str | None = None,
        principals: Sequence[str] | None = None,
        scopes: Sequence[str] | None = None,
        timeout: float | httpx.Timeout = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
    ) -> None:
        if retries < 0 or backoff < 0 or backoff_max < 0:
            raise ValueError("retries, backoff and backoff_max are never negative")
        self.base_url = base_url.rstrip("/")
        self.tenant, self.purpose = tenant, purpose
        self.principals = None if principals is None else list(principals)
        self.scopes = None if scopes is None else list(scopes)
        self.retries, self.backoff, self.backoff_max = retries, backoff, backoff_max
        self._credential = credential
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)

    # --- requests ---------------------------------------------------------------------

    def _headers(self, call: _Call[Any]) -> dict[str, str]:
        token = self._credential() if callable(self._credential) else self._credential
        headers = {"Accept": "application/json"}
        if token:  # none (an unset variable, say): the read API's 401 says what to send
            headers["Authorization"] = f"Bearer {token}"
        if call.body is not None:
            headers["Content-Type"] = "application/json"
        headers.update(call.headers)
        return headers

    def _asked(self, options: dict[str, Any]) -> dict[str, Any]:
        """Pop the asking keys of `options`: tenant, purpose and subject, defaults filled."""
        principals = options.pop("principals", self.principals)
        scopes = options.pop("scopes", self.scopes)
        subject: dict[str, Any] = {"principals": None if principals is None else list(principals)}
        if scopes is not None:  # unnamed scopes stay unnamed: the credential's own
            subject["scopes"] = list(scopes)
        asked: dict[str, Any] = {"subject": Subject.model_validate(subject)}
        for name in ("tenant", "purpose"):
            value = options.pop(name, getattr(self, name))
            if value is not None:
                asked[name] = value
        return asked

    def _read_request(self, model: type[S], query: str | S, options: Mapping[str, Any]) -> S:
        if isinstance(query, model):
            if options:
                raise TypeError("give a request model or options, not both")
            return query
        fields = dict(options)
        asked = self._asked(fields)
        return model.model_validate({**asked, "query": query, **fields})

    def _search(
        self, query: str | SearchRequest, options: Mapping[str, Any]
    ) -> _Call[SearchResponse]:
        request = self._read_request(SearchRequest, query, options)
        return _Call("POST", "/v1/search", SearchResponse, request.model_dump_json().encode())

    def _pack(
        self, query: str | PackRequest, options: Mapping[str, Any], key: str | None = None
    ) -> _Call[Pack]:
        request = self._read_request(PackRequest, query, options)
        headers = () if key is None else (("Idempotency-Key", key),)
        body = request.model_dump_json().encode()
        return _Call("POST", "/v1/packs", Pack, body, headers=headers)

    def _relations(self, entity: str, options: Mapping[str, Any]) -> _Call[RelationsResponse]:
        fields = dict(options)
        asked = self._asked(fields)
        request = RelationsRequest.model_validate({**asked, "entity": entity, **fields})
        body = request.model_dump_json().encode()
        return _Call("POST", "/v1/relations", RelationsResponse, body)

    @staticmethod
    def _verify(manifest: Manifest | Pack) -> _Call[VerifyResponse]:
        pinned = manifest.manifest if isinstance(manifest, Pack) else manifest
        body = VerifyRequest(manifest=pinned).model_dump_json().encode()
        return _Call("POST", "/v1/packs/verify", VerifyResponse, body)

    def _query(self, call: str, asking: Mapping[str, Any]) -> list[tuple[str, str]]:
        """A GET's tenant, purpose and subject (and `as_of`) as query parameters."""
        fields = dict(asking)
        as_of = fields.pop("as_of", None)
        asked = self._asked(fields)
        if fields:
            raise TypeError(f"{call}() takes no {', '.join(sorted(fields))}")
        for name in ("tenant", "purpose"):
            if name not in asked:
                raise ValueError(f"no {name}: give {name}= to this call or to the client")
        subject: Subject = asked["subject"]
        params = [("tenant", asked["tenant"]), ("purpose", asked["purpose"])]
        params += [("principal", p) for p in subject.principals or ()]
        # A query string cannot say "no scopes": none named is the credential's own.
        params += [("scope", s) for s in subject.scopes or ()]
        if as_of is not None:
            params.append(("as_of", as_of.isoformat()))
        return params

    def _chunk(self, chunk_id: str, asking: Mapping[str, Any]) -> _Call[ChunkView]:
        params = self._query("chunk", asking)
        path = f"/v1/chunks/{quote_path(chunk_id, safe='')}"
        return _Call("GET", path, ChunkView, params=tuple(params))

    def _stored_pack(self, pack_id: str, asking: Mapping[str, Any]) -> _Call[StoredPack]:
        if "as_of" in asking:
            raise TypeError("stored_pack() takes no as_of: a kept pack has its own")
        params = self._query("stored_pack", asking)
        path = f"/v1/packs/{quote_path(pack_id, safe='')}"
        return _Call("GET", path, StoredPack, params=tuple(params))

    def _lineage(
        self, artifact: DerivedArtifact | None, fields: Mapping[str, Any]
    ) -> _Call[Registered]:
        if artifact is None:
            given = dict(fields)
            tenant = given.pop("tenant", self.tenant)
            artifact = DerivedArtifact.model_validate({"tenant_id": tenant, **given})
        elif fields:
            raise TypeError("give a DerivedArtifact or its fields, not both")
        body = artifact.model_dump_json().encode()
        return _Call("POST", "/v1/lineage", Registered, body, ok=frozenset({201}))

    @staticmethod
    def _ready() -> _Call[Readiness]:
        # The probe answers 503 with what is down: an answer, not a refusal, and not retried.
        return _Call("GET", "/readyz", Readiness, ok=frozenset({200, 503}))

    # --- answers ----------------------------------------------------------------------

    def _answer(self, call: _Call[M], response: httpx.Response, attempt: int) -> M | None:
        """The model `response` holds, None to send `call` again, or the error raised."""
        if response.status_code in call.ok:
            return call.answer.model_validate_json(response.content)
        if response.status_code == 503 and attempt <= self.retries:
            return None
        raise refusal(response.status_code, response.content, attempts=attempt)

    def _delay(self, attempt: int, response: httpx.Response) -> float:
        """Seconds to wait before retry number `attempt`: doubling from `backoff`, jittered
        (so many clients do not come back at once), or the server's Retry-After if longer;
        never past `backoff_max`."""
        delay = min(self.backoff_max, self.backoff * 2.0 ** (attempt - 1))
        delay *= random.uniform(0.5, 1.0)
        after = response.headers.get("Retry-After", "")
        if after.isdigit():
            delay = max(delay, float(after))
        return min(delay, self.backoff_max)

    def _unreachable(self, call: _Call[Any], exc: httpx.TransportError) -> Unreachable:
        what = "did not answer in time" if isinstance(exc, httpx.TimeoutException) else "failed"
        return Unreachable(
            None,
            "unreachable",
            f"{call.method} {self.base_url}{call.path} {what} ({type(exc).__name__}: {exc}): "
            "check the URL and that the read API is up",
        )


class GovindexClient(_Calls):
    """The read API, blocking. Thread-safe; close it (or use `with`) to free connections.

    `transport` is handed to httpx (a custom transport, e.g. with a proxy or client TLS).
    """

    def __init__(
        self,
        base_url: str,
        credential: Credential,
        *,
        tenant: str | None = None,
        purpose: str | None = None,
        principals: Sequence[str] | None = None,
        scopes: Sequence[str] | None = None,
        timeout: float | httpx.Timeout = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            credential,
            tenant=tenant,
            purpose=purpose,
            principals=principals,
            scopes=scopes,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            backoff_max=backoff_max,
        )
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=self._timeout,
            transport=transport,
            headers={"User-Agent": _USER_AGENT},
        )

    def search(
        self, query: str | SearchRequest = "", **options: Unpack[SearchOptions]
    ) -> SearchResponse:
        """POST /v1/search: fused, gated hits for `query` (or send a `SearchRequest`)."""
        return self._send(self._search(query, options))

    def pack(
        self,
        query: str | PackRequest = "",
        *,
        idempotency_key: str | None = None,
        **options: Unpack[PackOptions],
    ) -> Pack:
        """POST /v1/packs: a context pack with its manifest (or send a `PackRequest`). With
        `idempotency_key` the pack is kept: a retry with the same key and request gets the
        same pack, another request under the key is `Conflict`."""
        return self._send(self._pack(query, options, idempotency_key))

    def relations(self, entity: str, **options: Unpack[RelationOptions]) -> RelationsResponse:
        """POST /v1/relations: the entity's edges at `as_of`, each with its validity, its
        evidence anchor and the edges it contradicts; only edges whose evidence the subject
        may see. `relation` names one of the vocabulary (or its inverse, e.g. OWNS)."""
        return self._send(self._relations(entity, options))

    def stored_pack(self, pack_id: str, **asking: Unpack[Asking]) -> StoredPack:
        """GET /v1/packs/{id}: a kept pack re-judged now, items no longer valid withheld;
        `NotFound` for a pack built for a subject the caller does not hold, `Gone` when
        nothing of it can be served."""
        return self._send(self._stored_pack(pack_id, asking))

    def verify(self, manifest: Manifest | Pack) -> VerifyResponse:
        """POST /v1/packs/verify: valid, stale, invalid or tampered, pin by pin."""
        return self._send(self._verify(manifest))

    def chunk(self, chunk_id: str, **asking: Unpack[Asking]) -> ChunkView:
        """GET /v1/chunks/{id}: open one anchor through the same gates; `NotFound` when the
        subject may not see it at `as_of` (or it does not exist)."""
        return self._send(self._chunk(chunk_id, asking))

    def register_lineage(
        self, artifact: DerivedArtifact | None = None, /, **fields: Unpack[LineageFields]
    ) -> Registered:
        """POST /v1/lineage: a stored summary or memory registers what it was built from,
        so deleting a source reaches it. Give a `DerivedArtifact` or its fields."""
        return self._send(self._lineage(artifact, fields))

    def ready(self) -> Readiness:
        """GET /readyz: whether the read API can answer now (never retried)."""
        return self._send(self._ready())

    def _send(self, call: _Call[M]) -> M:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    content=call.body,
                    params=call.params,
                    headers=self._headers(call),
                )
            except httpx.TransportError as exc:
                raise self._unreachable(call, exc) from exc
            answer = self._answer(call, response, attempt)
            if answer is not None:
                return answer
            time.sleep(self._delay(attempt, response))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncGovindexClient(_Calls):
    """The read API for asyncio: the same calls as `GovindexClient`, awaited. Close it with
    `aclose` (or use `async with`)."""

    def __init__(
        self,
        base_url: str,
        credential: Credential,
        *,
        tenant: str | None = None,
        purpose: str | None = None,
        principals: Sequence[str] | None = None,
        scopes: Sequence[str] | None = None,
        timeout: float | httpx.Timeout = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            credential,
            tenant=tenant,
            purpose=purpose,
            principals=principals,
            scopes=scopes,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            backoff_max=backoff_max,
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=self._timeout,
            transport=transport,
            headers={"User-Agent": _USER_AGENT},
        )

    async def search(
        self, query: str | SearchRequest = "", **options: Unpack[SearchOptions]
    ) -> SearchResponse:
        """POST /v1/search (see `GovindexClient.search`)."""
        return await self._send(self._search(query, options))

    async def pack(
        self,
        query: str | PackRequest = "",
        *,
        idempotency_key: str | None = None,
        **options: Unpack[PackOptions],
    ) -> Pack:
        """POST /v1/packs (see `GovindexClient.pack`)."""
        return await self._send(self._pack(query, options, idempotency_key))

    async def relations(self, entity: str, **options: Unpack[RelationOptions]) -> RelationsResponse:
        """POST /v1/relations (see `GovindexClient.relations`)."""
        return await self._send(self._relations(entity, options))

    async def stored_pack(self, pack_id: str, **asking: Unpack[Asking]) -> StoredPack:
        """GET /v1/packs/{id} (see `GovindexClient.stored_pack`)."""
        return await self._send(self._stored_pack(pack_id, asking))

    async def verify(self, manifest: Manifest | Pack) -> VerifyResponse:
        """POST /v1/packs/verify (see `GovindexClient.verify`)."""
        return await self._send(self._verify(manifest))

    async def chunk(self, chunk_id: str, **asking: Unpack[Asking]) -> ChunkView:
        """GET /v1/chunks/{id} (see `GovindexClient.chunk`)."""
        return await self._send(self._chunk(chunk_id, asking))

    async def register_lineage(
        self, artifact: DerivedArtifact | None = None, /, **fields: Unpack[LineageFields]
    ) -> Registered:
        """POST /v1/lineage (see `GovindexClient.register_lineage`)."""
        return await self._send(self._lineage(artifact, fields))

    async def ready(self) -> Readiness:
        """GET /readyz (see `GovindexClient.ready`)."""
        return await self._send(self._ready())

    async def _send(self, call: _Call[M]) -> M:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    content=call.body,
                    params=call.params,
                    headers=self._headers(call),
                )
            except httpx.TransportError as exc:
                raise self._unreachable(call, exc) from exc
            answer = self._answer(call, response, attempt)
            if answer is not None:
                return answer
            await asyncio.sleep(self._delay(attempt, response))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


__all__ = [
    "Asking",
    "AsyncGovindexClient",
    "Credential",
    "GovindexClient",
    "LineageFields",
    "PackOptions",
    "SearchOptions",
]
