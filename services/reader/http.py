"""The internal listener: the read API and lineage registration, behind credentials.

    POST /v1/search          fused, gated ranking
    POST /v1/packs           a context pack with its manifest
    POST /v1/packs/verify    is anything in this manifest deleted, revoked or superseded?
    GET  /v1/chunks/{id}     open one anchor, through the same gates
    POST /v1/lineage         a stored summary or memory registers what it was built from
    GET  /livez, /readyz, /healthz   probes, without a credential (`reader.probes`)
    GET  /openapi.json, /docs        the contract (OpenAPI 3.1), without a credential

Every /v1 request is authenticated by its bearer credential (`reader.credentials`): a
service token bound to tenants, principal patterns and purposes, or a JWT verified against
the identity provider's JWKS. None, or one that proves nothing: 401 (`WWW-Authenticate:
Bearer`); the JWKS unreadable: 503. A read runs as the subject its credential admits, never
more: a tenant, principal, scope or purpose beyond it is a 403 naming it and the credential
(never a silent narrowing); a service token without principals: 400. Verify and lineage act
for a tenant the credential must prove (403). A malformed request: 400 naming the field
(types are strict: `"trace": "yes"` is refused); a body past its route's size: 413;
Postgres unreachable: 503 (fail closed; OpenSearch alone never answers). Bodies are read as
JSON whatever their declared content type. Every answer leaves one audit record
(`ReadAudit`), and so does every refusal (4xx) of an accepted credential; a 401 is only
logged. An answer whose record cannot be written is a 503 (fail closed). Every request is
counted and timed by endpoint and status (`govindex.core.metrics`).
This listener is never the public one: the webhook receiver serves only signed webhooks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from aiohttp import web
from pydantic import BaseModel

from govindex.core.errors import TransientError
from govindex.core.graph_templates import UnknownGraphTemplate
from govindex.core.metrics import OTHER, observe_read
from govindex.core.ports import (
    AUDIT_ENDPOINTS,
    AuditEndpoint,
    AuditEntry,
    LineageRegistry,
    ReadAudit,
)
from reader.access import admitted_access, admitted_request
from reader.credentials import (
    Admitted,
    Authenticator,
    CredentialError,
    JwksUnavailable,
    JwtVerifier,
    Proven,
    Unauthenticated,
    admit,
    bound_tokens,
    prove_tenant,
)
from reader.keeping import Keeping, KeptGone, KeyReused, PackKeeper
from reader.manifest import anchor_of, described
from reader.models import (
    MAX_PRINCIPALS,
    ApiError,
    ChunkView,
    DerivedArtifact,
    FieldError,
    Pack,
    PackRequest,
    RelationsRequest,
    SearchRequest,
    VerifyRequest,
)
from reader.openapi import CONTRACT_PATHS, TITLE, add_contract, read_openapi
from reader.probes import PROBES, add_probes
from reader.service import Answer, ReadService, Trail, canonical_hash, record
from reader.wire import (
    ID,
    LINEAGE_BODY_MAX,
    TRAIL,
    VERIFY_BODY_MAX,
    ApiRefusal,
    json_answer,
    opening,
    param,
    parse_body,
)

log = structlog.get_logger(__name__)
M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", SearchRequest, PackRequest, RelationsRequest)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_PROVEN = web.RequestKey("proven", Proven)

# Where each part of what `admit` judges sits in a request, to name it in a refusal.
_BODY_FIELDS = {"principals": "subject.principals", "scopes": "subject.scopes"}
_QUERY_FIELDS = {"principals": "principal", "scopes": "scope"}
# The /v1 routes are named after their audit endpoint, which is their metrics label too.
_AUDITED: dict[str, AuditEndpoint] = {endpoint: endpoint for endpoint in AUDIT_ENDPOINTS}
# What answers without a credential: the probes and the contract.
_PUBLIC = PROBES | CONTRACT_PATHS


def _route(request: web.Request) -> AuditEndpoint | None:
    """The audited endpoint a request reached; None for a probe, an unknown path or method."""
    return _AUDITED.get(request.match_info.route.name or "")


def metrics_middleware() -> Any:
    """Count and time every request by endpoint and status (`observe_read`)."""

    @web.middleware
    async def measured(request: web.Request, handler: Handler) -> web.StreamResponse:
        started, status = time.perf_counter(), 500  # what escapes as an exception is a 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:  # aiohttp's own: an unknown path or method
            status = exc.status
            raise
        finally:
            endpoint = _route(request) or ("probe" if request.path in PROBES else OTHER)
            observe_read(endpoint, status, time.perf_counter() - started)

    return measured


def audit_middleware(audit: ReadAudit | None) -> Any:
    """Record each request to an audited route whose credential was accepted: its answer, or
    its refusal (4xx), with what its `Trail` holds by then. An answer whose record cannot be
    written is not given (503: an unaudited answer must not leave); a refusal is given
    whatever its record's fate. `audit` None: nothing is recorded."""

    @web.middleware
    async def audited(request: web.Request, handler: Handler) -> web.StreamResponse:
        endpoint, proven = _route(request), request.get(_PROVEN)
        if endpoint is None or proven is None:
            return await handler(request)
        trail = request[TRAIL] = Trail.of(endpoint, proven)
        try:
            response = await handler(request)
        except ApiRefusal as refusal:
            if refusal.status < 500:
                await record(audit, trail, refusal.status)
            raise
        if not await record(audit, trail, response.status):
            reason = "the read cannot be audited now, so it is not answered: try again shortly"
            raise ApiRefusal(503, "unavailable", reason)
        return response

    return audited


def _answered(request: web.Request, answer: Answer) -> web.Response:
    request[TRAIL].answered(answer)
    return json_answer(answer)


# --- credentials --------------------------------------------------------------------------


def credentials_middleware(auth: Authenticator) -> Any:
    """Authenticate every request but the probes and the contract; answer every refusal as
    JSON."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            if request.path not in _PUBLIC:
                request[_PROVEN] = await _authenticate(auth, request)
            return await handler(request)
        except ApiRefusal as refusal:
            return web.Response(
                body=refusal.body.model_dump_json().encode(),
                status=refusal.status,
                content_type="application/json",
                headers=refusal.headers,
            )
        except TransientError as exc:
            log.warning("read.unavailable", error=str(exc))
            body = ApiError(error="unavailable", reason="the system of record is unreachable")
            return json_answer(body, 503)

    return guard


async def _authenticate(auth: Authenticator, request: web.Request) -> Proven:
    """What the request's credential proves; in a thread, as a JWKS read may block."""
    try:
        return await asyncio.to_thread(auth.authenticate, request.headers.get("Authorization"))
    except Unauthenticated as exc:
        log.info("read.unauthenticated", reason=exc.reason, detail=exc.detail, path=request.path)
        # RFC 6750: a request without credentials gets the bare challenge.
        challenge = "Bearer" if exc.reason == "no_credential" else 'Bearer error="invalid_token"'
        raise ApiRefusal(
            401, "unauthorized", str(exc), headers={"WWW-Authenticate": challenge}
        ) from None
    except JwksUnavailable as exc:
        log.warning("read.jwks_unavailable", error=str(exc))
        reason = "the identity provider's signing keys cannot be read now: try again shortly"
        raise ApiRefusal(503, "unavailable", reason) from None


def _refused(request: web.Request, exc: CredentialError, fields: Mapping[str, str]) -> ApiRefusal:
    proven = request[_PROVEN]
    field = fields.get(exc.field, exc.field) if exc.field is not None else None
    log.info(
        "read.refused",
        status=exc.status,
        reason=exc.reason,
        credential=proven.name,
        field=field,
        path=request.path,
    )
    error = "forbidden" if exc.status == 403 else "bad_request"
    return ApiRefusal(exc.status, error, str(exc), field)


def _admit(
    request: web.Request,
    tenant: str,
    principals: list[str] | None,
    scopes: list[str] | None,
    purpose: str,
    fields: Mapping[str, str],
) -> Admitted:
    """The subject the request's credential admits for it, or the refusal naming the field."""
    proven = request[_PROVEN]
    try:
        admitted = admit(proven, tenant, principals, scopes, purpose)
    except CredentialError as exc:
        raise _refused(request, exc, fields) from None
    for name, held in (("principals", admitted.principals), ("scopes", admitted.scopes)):
        if len(held) > MAX_PRINCIPALS:
            raise ApiRefusal(
                400,
                "bad_request",
                f"the credential {proven.label} carries {len(held)} {name}, more than one read "
                f"takes ({MAX_PRINCIPALS}): name the {name} this read is for",
                fields[name],
            )
    request[TRAIL].ran_as(admitted)
    return admitted


def _as_admitted(request: web.Request, body: R) -> R:
    """`body` as the subject its credential admits: what the service runs and echoes."""
    request[TRAIL].asked(body)
    subject = body.subject
    admitted = _admit(
        request, body.tenant, subject.principals, subject.scopes_asked, body.purpose, _BODY_FIELDS
    )
    return admitted_request(body, admitted)


IDEMPOTENCY_HEADER = "Idempotency-Key"
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:")


def _idempotency_key(request: web.Request) -> str | None:
    """The request's Idempotency-Key: 1 to 128 of letters, digits and `-_.:` (a UUID, say)."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return None
    if not 1 <= len(key) <= 128 or not set(key) <= _KEY_CHARS:
        raise ApiRefusal(
            400,
            "bad_request",
            "1 to 128 letters, digits, '-', '_', '.' or ':' (a UUID, say)",
            IDEMPOTENCY_HEADER,
        )
    return key


@contextmanager
def _templates_held() -> Iterator[None]:
    """A graph template this server does not hold: a 400 naming the field and the known
    templates (which templates exist is the server's setting, not the wire model's)."""
    try:
        yield
    except UnknownGraphTemplate as exc:
        reason, field = str(exc), UnknownGraphTemplate.field
        errors = [FieldError(field=field, reason=reason)]
        raise ApiRefusal(400, "bad_request", reason, field, errors=errors) from None


def _prove_tenant(request: web.Request, tenant: str, field: str) -> None:
    request[TRAIL].tenant = tenant
    try:
        prove_tenant(request[_PROVEN], tenant)
    except CredentialError as exc:
        raise _refused(request, exc, {"tenant": field}) from None


# --- the app ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Routes:
    """The /v1 handlers, over the read service and the lineage registry."""

    service: ReadService
    lineage: LineageRegistry
    keeper: PackKeeper | None = None

    async def search(self, request: web.Request) -> web.Response:
        body = await parse_body(request, SearchRequest)
        with _templates_held():
            return _answered(request, await self.service.search(_as_admitted(request, body)))

    async def pack(self, request: web.Request) -> web.Response:
        with _templates_held():
            return await self._pack(request)

    async def _pack(self, request: web.Request) -> web.Response:
        key = _idempotency_key(request)
        body = await parse_body(request, PackRequest)
        admitted = _as_admitted(request, body)
        if key is None or self.keeper is None:
            return _answered(request, await self.service.pack(admitted))
        trail = request[TRAIL]

        def audit(pack: Pack) -> AuditEntry:
            trail.answered(pack)
            trail.kept = True
            return trail.entry(200)

        keeping = Keeping(trail.credential_name, key, trail.request_hash, audit)
        try:
            pack, replayed = await self.keeper.pack(admitted, keeping)
        except KeyReused as exc:
            raise ApiRefusal(409, "conflict", str(exc), IDEMPOTENCY_HEADER) from None
        except KeptGone as exc:
            raise ApiRefusal(410, "gone", str(exc)) from None
        if replayed:
            trail.kept = False  # a replay is an answer of its own, recorded as one
            response = _answered(request, pack)
            response.headers["Idempotent-Replayed"] = "true"
            return response
        return json_answer(pack)

    async def stored_pack(self, request: web.Request) -> web.Response:
        """GET /v1/packs/{pack_id}?tenant=&principal=&scope=&purpose=: a kept pack,
        re-judged now for the subject it was built for, which the caller must hold."""
        trail = request[TRAIL]
        query = {name: request.query.getall(name) for name in request.query}
        trail.request_hash = canonical_hash({"path": request.path, "query": query})
        asked = opening(request)
        trail.tenant, trail.purpose = asked.tenant, asked.purpose
        admitted = _admit(
            request, asked.tenant, asked.principals, asked.scopes, asked.purpose, _QUERY_FIELDS
        )
        pack_id = param(ID, "pack_id", request.match_info["pack_id"])
        if self.keeper is None:
            raise ApiRefusal(404, "not_found", "packs are not kept by this server")

        def holds(pack: Pack) -> bool:
            built_for = pack.manifest.subject
            return (
                pack.manifest.purpose == asked.purpose
                and set(built_for.principals or ()) <= set(admitted.principals)
                and set(built_for.scopes or ()) <= set(admitted.scopes)
            )

        try:
            found = await self.keeper.stored(asked.tenant, pack_id, holds)
        except KeptGone as exc:
            raise ApiRefusal(410, "gone", str(exc)) from None
        if found is None:  # unknown, expired, or built for a subject the caller lacks
            raise ApiRefusal(404, "not_found", "no such kept pack for this subject")
        trail.answered(found.pack)
        return json_answer(found)

    async def relations(self, request: web.Request) -> web.Response:
        body = await parse_body(request, RelationsRequest)
        found = await self.service.relations(_as_admitted(request, body))
        trail = request[TRAIL]
        trail.chunk_ids = tuple(e.evidence.chunk_id for e in found.edges)
        trail.as_of, trail.known_at = found.as_of, found.known_at
        return json_answer(found)

    async def verify(self, request: web.Request) -> web.Response:
        manifest = (await parse_body(request, VerifyRequest, VERIFY_BODY_MAX)).manifest
        request[TRAIL].verifying(manifest)
        _prove_tenant(request, manifest.tenant, "manifest.tenant")
        return _answered(request, await self.service.verify(manifest))

    async def chunk(self, request: web.Request) -> web.Response:
        trail = request[TRAIL]
        # What is hashed for a GET: its path and every query parameter's values, in order.
        query = {name: request.query.getall(name) for name in request.query}
        trail.request_hash = canonical_hash({"path": request.path, "query": query})
        asked = opening(request)
        trail.tenant, trail.purpose, trail.as_of = asked.tenant, asked.purpose, asked.as_of
        admitted = _admit(
            request, asked.tenant, asked.principals, asked.scopes, asked.purpose, _QUERY_FIELDS
        )
        access = admitted_access(
            tenant=asked.tenant, admitted=admitted, purpose=asked.purpose, as_of=asked.as_of
        )
        chunk_id = param(ID, "chunk_id", request.match_info["chunk_id"])
        found = await self.service.chunk(chunk_id, access)
        if found is None:  # refused and unknown look the same
            raise ApiRefusal(404, "not_found", "no such chunk for this subject at as_of")
        trail.chunk_ids = (found.chunk.chunk_id,)
        return json_answer(
            ChunkView(
                **described(found),
                anchor=anchor_of(found.chunk),
                text=found.chunk.text,
                as_of=access.as_of,
            )
        )

    async def register(self, request: web.Request) -> web.Response:
        body = await parse_body(request, DerivedArtifact, LINEAGE_BODY_MAX)
        _prove_tenant(request, body.tenant_id, "tenant_id")
        foreign = [
            b for b in body.built_from if "/" in b and not b.startswith(f"{body.tenant_id}/")
        ]
        if foreign:
            raise ApiRefusal(
                403, "forbidden", "built_from names another tenant's documents", "built_from"
            )
        await self.lineage.register_derived(
            body.kind,
            body.id,
            body.built_from,
            body.location,
            tenant_id=body.tenant_id,
            text=body.text,
        )
        return web.json_response({"registered": f"{body.kind}/{body.id}"}, status=201)


def build_read_app(
    service: ReadService,
    lineage: LineageRegistry,
    tokens: Mapping[str, object],
    *,
    jwt_verifier: JwtVerifier | None = None,
    audit: ReadAudit | None = None,
    keeper: PackKeeper | None = None,
) -> web.Application:
    """The read API over `service`, accepting the service tokens of `tokens` (the
    `GOVINDEX_READ_TOKENS` setting: token -> tenants, or a binding) and JWTs `jwt_verifier`
    verifies, recording every answer and refusal in `audit` (None: nothing is recorded, for
    an app a test builds by hand). Raises `TokenSettingsError` for an unusable entry,
    `ValueError` for no credential at all."""
    auth = Authenticator(bound_tokens(tokens), jwt_verifier)
    routes = _Routes(service, lineage, keeper)
    app = web.Application(
        middlewares=[metrics_middleware(), credentials_middleware(auth), audit_middleware(audit)],
        client_max_size=LINEAGE_BODY_MAX,
    )
    app.router.add_post("/v1/search", routes.search, name="search")
    app.router.add_post("/v1/packs", routes.pack, name="pack")
    app.router.add_post("/v1/packs/verify", routes.verify, name="verify")
    app.router.add_get("/v1/packs/{pack_id}", routes.stored_pack, name="stored_pack")
    app.router.add_get("/v1/chunks/{chunk_id}", routes.chunk, name="chunk")
    app.router.add_post("/v1/relations", routes.relations, name="relations")
    app.router.add_post("/v1/lineage", routes.register, name="lineage")
    add_probes(app, service.ports.store)
    add_contract(app, read_openapi, TITLE)
    return app
