"""The internal listener: the read API and lineage registration, behind credentials.

    POST /v1/search          fused, gated ranking
    POST /v1/packs           a context pack with its manifest
    POST /v1/packs/verify    is anything in this manifest deleted, revoked or superseded?
    GET  /v1/chunks/{id}     open one anchor, through the same gates
    POST /v1/lineage         a stored summary or memory registers what it was built from
    GET  /livez, /readyz, /healthz   probes, without a credential (`reader.probes`)

Every /v1 request is authenticated by its bearer credential (`reader.credentials`): a
service token bound to tenants, principal patterns and purposes, or a JWT verified against
the identity provider's JWKS. No credential, or one that proves nothing: 401 with
`WWW-Authenticate: Bearer`; the JWKS unreadable: 503. A search, a pack or an opened anchor
runs as the subject its credential admits, never as more: a tenant, principal, scope or
purpose beyond the credential is a 403 naming it and the credential (never a silent
narrowing); no principals with a service token (it carries no subject): 400. Verify and
lineage act for a tenant, which the credential must prove (403).
A malformed request (not a JSON object, a wrong type, a value past its bound or holding a
control character): 400 naming the field and the reason; types are strict, so
`"trace": "yes"` is refused, not read as true. A body past its route's size: 413. Postgres
unreachable: 503 (fail closed; OpenSearch alone never answers). The body is read as JSON
whatever its declared content type.
This listener is never the public one: the webhook receiver serves only signed webhooks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog
from aiohttp import web
from pydantic import AwareDatetime, BaseModel, TypeAdapter, ValidationError

from govindex.core.errors import TransientError
from govindex.core.inputs import quote
from govindex.core.ports import LineageRegistry
from govindex.core.records import Slug
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
from reader.manifest import anchor_of
from reader.models import (
    MAX_PRINCIPALS,
    ApiError,
    ChunkView,
    DerivedArtifact,
    Id,
    PackRequest,
    SearchRequest,
    VerifyRequest,
    WirePrincipal,
)
from reader.probes import PROBES, add_probes
from reader.service import ReadService

log = structlog.get_logger(__name__)
M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound=SearchRequest)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_PROVEN = web.RequestKey("proven", Proven)
_PRINCIPAL: TypeAdapter[str] = TypeAdapter(WirePrincipal)
_SLUG: TypeAdapter[str] = TypeAdapter(Slug)
_ID: TypeAdapter[str] = TypeAdapter(Id)
_WHEN: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)

# Where each part of what `admit` judges sits in a request, to name it in a refusal.
_BODY_FIELDS = {"principals": "subject.principals", "scopes": "subject.scopes"}
_QUERY_FIELDS = {"principals": "principal", "scopes": "scope"}

# Bodies are read whole before they are parsed: each route reads at most this much. A search
# or pack request is a few KiB even at every bound; a manifest of MAX_PINS pins well under
# 4 MiB; a derived artifact may carry a 1,000,000-character text.
SEARCH_BODY_MAX = 1024**2
VERIFY_BODY_MAX = 4 * 1024**2
LINEAGE_BODY_MAX = 8 * 1024**2
_READ_CHUNK = 64 * 1024


class ApiRefusal(Exception):
    def __init__(
        self,
        status: int,
        error: str,
        reason: str,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(reason)
        self.status, self.body = status, ApiError(error=error, field=field, reason=reason)
        self.headers = headers


def _json(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(
        body=model.model_dump_json().encode(), status=status, content_type="application/json"
    )


def _bad_request(exc: ValidationError, field: str | None = None) -> ApiRefusal:
    first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or field
    reason = first["msg"]
    if first["type"] == "model_type" and not first["loc"]:
        reason = "the body must be a JSON object"
    return ApiRefusal(400, "bad_request", reason, where)


async def _read(request: web.Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to pass `limit` bytes (a declared
    length says so before anything is read; a chunked body, once it has)."""
    too_large = ApiRefusal(
        413, "too_large", f"the body is larger than this route takes ({limit} bytes)"
    )
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    body = bytearray()
    while chunk := await request.content.read(_READ_CHUNK):
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)


async def _body(request: web.Request, model: type[M], limit: int = SEARCH_BODY_MAX) -> M:
    raw = await _read(request, limit)
    try:
        # Strict: a boolean or a number that decides what happens is never coerced from a
        # string ("yes", "1"); JSON strings still parse as datetimes.
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        raise _bad_request(exc) from None
    except (ValueError, RecursionError):
        raise ApiRefusal(400, "bad_request", "the body is not valid JSON") from None


# --- credentials --------------------------------------------------------------------------


def credentials_middleware(auth: Authenticator) -> Any:
    """Authenticate every request but the probes; answer every refusal as JSON."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            if request.path not in PROBES:
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
            return _json(body, 503)

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
        raise ApiRefusal(
            503,
            "unavailable",
            "the identity provider's signing keys cannot be read now: try again shortly",
        ) from None


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
    return admitted


def _as_admitted(request: web.Request, body: R) -> R:
    """`body` as the subject its credential admits: what the service runs and echoes."""
    subject = body.subject
    admitted = _admit(
        request, body.tenant, subject.principals, subject.scopes_asked, body.purpose, _BODY_FIELDS
    )
    return admitted_request(body, admitted)


def _prove_tenant(request: web.Request, tenant: str, field: str) -> None:
    try:
        prove_tenant(request[_PROVEN], tenant)
    except CredentialError as exc:
        raise _refused(request, exc, {"tenant": field}) from None


# --- the app ------------------------------------------------------------------------------


def build_read_app(
    service: ReadService,
    lineage: LineageRegistry,
    tokens: Mapping[str, object],
    *,
    jwt_verifier: JwtVerifier | None = None,
) -> web.Application:
    """The read API over `service`, accepting the service tokens of `tokens` (the
    `GOVINDEX_READ_TOKENS` setting: token -> tenants, or a binding) and JWTs `jwt_verifier`
    verifies. Raises `TokenSettingsError` for an unusable entry, `ValueError` for no
    credential at all."""
    auth = Authenticator(bound_tokens(tokens), jwt_verifier)

    async def search(request: web.Request) -> web.Response:
        body = await _body(request, SearchRequest)
        return _json(await service.search(_as_admitted(request, body)))

    async def packs(request: web.Request) -> web.Response:
        body = await _body(request, PackRequest)
        return _json(await service.pack(_as_admitted(request, body)))

    async def verify(request: web.Request) -> web.Response:
        body = await _body(request, VerifyRequest, VERIFY_BODY_MAX)
        _prove_tenant(request, body.manifest.tenant, "manifest.tenant")
        return _json(await service.verify(body.manifest))

    async def chunk(request: web.Request) -> web.Response:
        asked = _opening(request)
        admitted = _admit(
            request, asked.tenant, asked.principals, asked.scopes, asked.purpose, _QUERY_FIELDS
        )
        access = admitted_access(
            tenant=asked.tenant, admitted=admitted, purpose=asked.purpose, as_of=asked.as_of
        )
        found = await service.chunk(_param(_ID, "chunk_id", request.match_info["chunk_id"]), access)
        if found is None:  # refused and unknown look the same
            raise ApiRefusal(404, "not_found", "no such chunk for this subject at as_of")
        view = ChunkView(
            anchor=anchor_of(found), kind=found.kind, text=found.text, as_of=access.as_of
        )
        return _json(view)

    async def register(request: web.Request) -> web.Response:
        body = await _body(request, DerivedArtifact, LINEAGE_BODY_MAX)
        _prove_tenant(request, body.tenant_id, "tenant_id")
        foreign = [
            b for b in body.built_from if "/" in b and not b.startswith(f"{body.tenant_id}/")
        ]
        if foreign:
            raise ApiRefusal(
                403, "forbidden", "built_from names another tenant's documents", "built_from"
            )
        await lineage.register_derived(
            body.kind,
            body.id,
            body.built_from,
            body.location,
            tenant_id=body.tenant_id,
            text=body.text,
        )
        return web.json_response({"registered": f"{body.kind}/{body.id}"}, status=201)

    app = web.Application(
        middlewares=[credentials_middleware(auth)], client_max_size=LINEAGE_BODY_MAX
    )
    app.router.add_post("/v1/search", search)
    app.router.add_post("/v1/packs", packs)
    app.router.add_post("/v1/packs/verify", verify)
    app.router.add_get("/v1/chunks/{chunk_id}", chunk)
    app.router.add_post("/v1/lineage", register)
    add_probes(app, service.ports.store)
    return app


def _param(adapter: TypeAdapter[Any], name: str, value: str) -> Any:
    """One path or query parameter, validated like the body's field of the same kind."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise _bad_request(exc, name) from None


@dataclass(frozen=True)
class _Opening:
    """What a request to open one anchor asks for; principals or scopes None: not named."""

    tenant: str
    principals: list[str] | None
    scopes: list[str] | None
    purpose: str
    as_of: datetime


def _opening(request: web.Request) -> _Opening:
    """GET /v1/chunks/{id}?tenant=T[&principal=P..][&scope=S..]&purpose=U[&as_of=TS]

    No `principal` (or no `scope`): the credential's own, as when a body omits them."""
    q = request.query

    def one(name: str) -> str:
        value = q.get(name)
        if not value:
            raise ApiRefusal(400, "bad_request", "required", name)
        return value

    def many(name: str) -> list[str] | None:
        given = q.getall(name, [])
        if len(given) > MAX_PRINCIPALS:
            raise ApiRefusal(
                400, "bad_request", f"at most {MAX_PRINCIPALS}, not {len(given)}", name
            )
        return [_param(_PRINCIPAL, name, v) for v in given] or None

    tenant: str = _param(_SLUG, "tenant", one("tenant"))
    principals = many("principal")
    scopes = many("scope")
    purpose: str = _param(_SLUG, "purpose", one("purpose"))
    when = q.get("as_of")
    try:
        as_of = _WHEN.validate_python(when) if when else datetime.now(UTC)
    except ValidationError:
        raise ApiRefusal(
            400,
            "bad_request",
            f"as_of is an ISO time with a zone (e.g. Z), not {quote(when)}",
            "as_of",
        ) from None
    return _Opening(tenant, principals, scopes, purpose, as_of)
