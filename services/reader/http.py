"""The internal listener: the read API and lineage registration, behind bearer tokens.

    POST /v1/search          fused, gated ranking
    POST /v1/packs           a context pack with its manifest
    POST /v1/packs/verify    is anything in this manifest deleted, revoked or superseded?
    GET  /v1/chunks/{id}     open one anchor, through the same gates
    POST /v1/lineage         a stored summary or memory registers what it was built from
    GET  /healthz

A token maps to the tenants it may read (settings `read_tokens`). No token or an unknown
one: 401. A tenant the token does not hold: 403. A malformed request (not a JSON object, a
wrong type, a value past its bound or holding a control character): 400 naming the field
and the reason; types are strict, so `"trace": "yes"` is refused, not read as true. A body
past its route's size: 413. Postgres unreachable: 503 (fail closed; OpenSearch alone never
answers). The body is read as JSON whatever its declared content type.
This listener is never the public one: the webhook receiver serves only signed webhooks.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog
from aiohttp import web
from pydantic import AwareDatetime, BaseModel, TypeAdapter, ValidationError

from govindex.core.errors import TransientError
from govindex.core.inputs import quote
from govindex.core.ports import LineageRegistry, ReadAccess
from govindex.core.records import Slug
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
from reader.service import ReadService

log = structlog.get_logger(__name__)
M = TypeVar("M", bound=BaseModel)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_TENANTS = web.RequestKey("tenants", frozenset[str])
_PRINCIPAL: TypeAdapter[str] = TypeAdapter(WirePrincipal)
_SLUG: TypeAdapter[str] = TypeAdapter(Slug)
_ID: TypeAdapter[str] = TypeAdapter(Id)
_WHEN: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)

# Bodies are read whole before they are parsed: each route reads at most this much. A search
# or pack request is a few KiB even at every bound; a manifest of MAX_PINS pins well under
# 4 MiB; a derived artifact may carry a 1,000,000-character text.
SEARCH_BODY_MAX = 1024**2
VERIFY_BODY_MAX = 4 * 1024**2
LINEAGE_BODY_MAX = 8 * 1024**2
_READ_CHUNK = 64 * 1024


class ApiRefusal(Exception):
    def __init__(self, status: int, error: str, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.body = status, ApiError(error=error, field=field, reason=reason)


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


def _tenant_allowed(request: web.Request, tenant: str) -> None:
    held = request[_TENANTS]
    if tenant not in held and "*" not in held:
        raise ApiRefusal(403, "forbidden", "this token may not act for that tenant", "tenant")


def tokens_middleware(tokens: Mapping[str, Sequence[str]]) -> Any:
    known = [(t.encode(), frozenset(tenants)) for t, tenants in tokens.items() if t]

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            if request.path != "/healthz":
                request[_TENANTS] = _authenticate(request, known)
            return await handler(request)
        except ApiRefusal as refusal:
            headers = {"WWW-Authenticate": "Bearer"} if refusal.status == 401 else None
            return web.Response(
                body=refusal.body.model_dump_json().encode(),
                status=refusal.status,
                content_type="application/json",
                headers=headers,
            )
        except TransientError as exc:
            log.warning("read.unavailable", error=str(exc))
            body = ApiError(error="unavailable", reason="the system of record is unreachable")
            return _json(body, 503)

    return guard


def _authenticate(
    request: web.Request, known: Sequence[tuple[bytes, frozenset[str]]]
) -> frozenset[str]:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiRefusal(401, "unauthorized", "send Authorization: Bearer <token>")
    given = token.strip().encode(errors="surrogateescape")  # header bytes, as they came
    for candidate, tenants in known:
        if hmac.compare_digest(candidate, given):
            return tenants
    raise ApiRefusal(401, "unauthorized", "unknown token")


def build_read_app(
    service: ReadService,
    lineage: LineageRegistry,
    tokens: Mapping[str, Sequence[str]],
) -> web.Application:
    async def search(request: web.Request) -> web.Response:
        body = await _body(request, SearchRequest)
        _tenant_allowed(request, body.tenant)
        return _json(await service.search(body))

    async def packs(request: web.Request) -> web.Response:
        body = await _body(request, PackRequest)
        _tenant_allowed(request, body.tenant)
        return _json(await service.pack(body))

    async def verify(request: web.Request) -> web.Response:
        body = await _body(request, VerifyRequest, VERIFY_BODY_MAX)
        _tenant_allowed(request, body.manifest.tenant)
        return _json(await service.verify(body.manifest))

    async def chunk(request: web.Request) -> web.Response:
        access = _access_from_query(request)
        _tenant_allowed(request, access.tenant_id)
        found = await service.chunk(_param(_ID, "chunk_id", request.match_info["chunk_id"]), access)
        if found is None:  # refused and unknown look the same
            raise ApiRefusal(404, "not_found", "no such chunk for this subject at as_of")
        view = ChunkView(
            anchor=anchor_of(found), kind=found.kind, text=found.text, as_of=access.as_of
        )
        return _json(view)

    async def register(request: web.Request) -> web.Response:
        body = await _body(request, DerivedArtifact, LINEAGE_BODY_MAX)
        _tenant_allowed(request, body.tenant_id)
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

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application(middlewares=[tokens_middleware(tokens)], client_max_size=LINEAGE_BODY_MAX)
    app.router.add_post("/v1/search", search)
    app.router.add_post("/v1/packs", packs)
    app.router.add_post("/v1/packs/verify", verify)
    app.router.add_get("/v1/chunks/{chunk_id}", chunk)
    app.router.add_post("/v1/lineage", register)
    app.router.add_get("/healthz", health)
    return app


def _param(adapter: TypeAdapter[Any], name: str, value: str) -> Any:
    """One path or query parameter, validated like the body's field of the same kind."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise _bad_request(exc, name) from None


def _access_from_query(request: web.Request) -> ReadAccess:
    """GET /v1/chunks/{id}?tenant=T&principal=P[&principal=..][&scope=S][&purpose=U][&as_of=TS]"""
    q = request.query

    def one(name: str) -> str:
        value = q.get(name)
        if not value:
            raise ApiRefusal(400, "bad_request", "required", name)
        return value

    def many(name: str) -> list[str]:
        given = q.getall(name, [])
        if len(given) > MAX_PRINCIPALS:
            raise ApiRefusal(
                400, "bad_request", f"at most {MAX_PRINCIPALS}, not {len(given)}", name
            )
        return [_param(_PRINCIPAL, name, v) for v in given]

    tenant: str = _param(_SLUG, "tenant", one("tenant"))
    principals = many("principal")
    scopes = many("scope")
    purpose: str = _param(_SLUG, "purpose", one("purpose"))
    when = q.get("as_of")
    if not principals:
        raise ApiRefusal(400, "bad_request", "at least one principal", "principal")
    try:
        as_of = _WHEN.validate_python(when) if when else datetime.now(UTC)
    except ValidationError:
        raise ApiRefusal(
            400,
            "bad_request",
            f"as_of is an ISO time with a zone (e.g. Z), not {quote(when)}",
            "as_of",
        ) from None
    return ReadAccess(
        tenant_id=tenant,
        principals=tuple(sorted(set(principals))),
        scopes=tuple(sorted(set(scopes))),
        purpose=purpose,
        as_of=as_of,
    )
