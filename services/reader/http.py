"""The internal listener: the read API and lineage registration, behind bearer tokens.

    POST /v1/search          fused, gated ranking
    POST /v1/packs           a context pack with its manifest
    POST /v1/packs/verify    is anything in this manifest deleted, revoked or superseded?
    GET  /v1/chunks/{id}     open one anchor, through the same gates
    POST /v1/lineage         a stored summary or memory registers what it was built from
    GET  /healthz

A token maps to the tenants it may read (settings `read_tokens`). No token or an unknown
one: 401. A tenant the token does not hold: 403. A malformed request: 400 naming the field
and the reason. Postgres unreachable: 503 (fail closed; OpenSearch alone never answers).
This listener is never the public one: the webhook receiver serves only signed webhooks.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog
from aiohttp import web
from pydantic import BaseModel, TypeAdapter, ValidationError

from govindex.core.errors import TransientError
from govindex.core.ports import LineageRegistry, ReadAccess
from govindex.core.records import Principal, Slug
from reader.manifest import anchor_of
from reader.models import (
    ApiError,
    ChunkView,
    DerivedArtifact,
    PackRequest,
    SearchRequest,
    VerifyRequest,
)
from reader.service import ReadService

log = structlog.get_logger(__name__)
M = TypeVar("M", bound=BaseModel)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_TENANTS = web.RequestKey("tenants", frozenset[str])
_PRINCIPAL = TypeAdapter(Principal)
_SLUG = TypeAdapter(Slug)
_WHEN = TypeAdapter(datetime)


class ApiRefusal(Exception):
    def __init__(self, status: int, error: str, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.body = status, ApiError(error=error, field=field, reason=reason)


def _json(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(
        body=model.model_dump_json().encode(), status=status, content_type="application/json"
    )


def _bad_request(exc: ValidationError) -> ApiRefusal:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or None
    return ApiRefusal(400, "bad_request", first["msg"], where)


async def _body(request: web.Request, model: type[M]) -> M:
    raw = await request.read()
    try:
        return model.model_validate_json(raw)
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
    given = token.strip().encode()
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
        body = await _body(request, VerifyRequest)
        _tenant_allowed(request, body.manifest.tenant)
        return _json(await service.verify(body.manifest))

    async def chunk(request: web.Request) -> web.Response:
        access = _access_from_query(request)
        _tenant_allowed(request, access.tenant_id)
        found = await service.chunk(request.match_info["chunk_id"], access)
        if found is None:  # refused and unknown look the same
            raise ApiRefusal(404, "not_found", "no such chunk for this subject at as_of")
        view = ChunkView(
            anchor=anchor_of(found), kind=found.kind, text=found.text, as_of=access.as_of
        )
        return _json(view)

    async def register(request: web.Request) -> web.Response:
        body = await _body(request, DerivedArtifact)
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

    app = web.Application(middlewares=[tokens_middleware(tokens)], client_max_size=8 * 1024**2)
    app.router.add_post("/v1/search", search)
    app.router.add_post("/v1/packs", packs)
    app.router.add_post("/v1/packs/verify", verify)
    app.router.add_get("/v1/chunks/{chunk_id}", chunk)
    app.router.add_post("/v1/lineage", register)
    app.router.add_get("/healthz", health)
    return app


def _access_from_query(request: web.Request) -> ReadAccess:
    """GET /v1/chunks/{id}?tenant=T&principal=P[&principal=..][&scope=S][&purpose=U][&as_of=TS]"""
    q = request.query

    def one(name: str, required: bool = True) -> str | None:
        value = q.get(name)
        if required and not value:
            raise ApiRefusal(400, "bad_request", "required", name)
        return value

    try:
        tenant = _SLUG.validate_python(one("tenant"))
        principals = [_PRINCIPAL.validate_python(p) for p in q.getall("principal", [])]
        scopes = [_PRINCIPAL.validate_python(s) for s in q.getall("scope", [])]
        purpose = _SLUG.validate_python(one("purpose"))
        when = one("as_of", required=False)
        as_of = _WHEN.validate_python(when) if when else datetime.now(UTC)
    except ValidationError as exc:
        raise _bad_request(exc) from None
    if not principals:
        raise ApiRefusal(400, "bad_request", "at least one principal", "principal")
    if as_of.tzinfo is None:
        raise ApiRefusal(400, "bad_request", "as_of needs a time zone (e.g. Z)", "as_of")
    return ReadAccess(
        tenant_id=tenant,
        principals=tuple(sorted(set(principals))),
        scopes=tuple(sorted(set(scopes))),
        purpose=purpose,
        as_of=as_of,
    )
