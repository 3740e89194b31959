"""The read API's wire edge: bodies read within their route's cap and parsed strictly,
query parameters validated like body fields, and the 4xx refusals they raise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web
from pydantic import AwareDatetime, BaseModel, TypeAdapter, ValidationError

from govindex.core.inputs import quote
from govindex.core.records import Slug
from reader.models import (
    MAX_FIELD_ERRORS,
    MAX_PRINCIPALS,
    ApiError,
    FieldError,
    Id,
    WirePrincipal,
)
from reader.service import Trail, request_hash

M = TypeVar("M", bound=BaseModel)
# What the audit learns of a request as it is read (set by the audit middleware).
TRAIL = web.RequestKey("trail", Trail)
PRINCIPAL: TypeAdapter[str] = TypeAdapter(WirePrincipal)
SLUG: TypeAdapter[str] = TypeAdapter(Slug)
ID: TypeAdapter[str] = TypeAdapter(Id)
WHEN: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)

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
        errors: Sequence[FieldError] = (),
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.body = ApiError(error=error, field=field, reason=reason, errors=list(errors))
        self.headers = headers


def json_answer(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(
        body=model.model_dump_json().encode(), status=status, content_type="application/json"
    )


def bad_request(exc: ValidationError, field: str | None = None) -> ApiRefusal:
    """Every validation problem of a request in one 400; the first also as field/reason."""
    found = exc.errors(include_url=False, include_context=False, include_input=False)
    problems = []
    for error in found[:MAX_FIELD_ERRORS]:
        reason = error["msg"]
        if error["type"] == "model_type" and not error["loc"]:
            reason = "the body must be a JSON object"
        where = ".".join(str(p) for p in error["loc"]) or field
        problems.append(FieldError(field=where, reason=reason))
    first = problems[0]
    return ApiRefusal(400, "bad_request", first.reason, first.field, errors=problems)


async def read_body(request: web.Request, limit: int) -> bytes:
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


async def parse_body(request: web.Request, model: type[M], limit: int = SEARCH_BODY_MAX) -> M:
    raw = await read_body(request, limit)
    request[TRAIL].request_hash = request_hash(raw)
    try:
        # Strict: a boolean or a number that decides what happens is never coerced from a
        # string ("yes", "1"); JSON strings still parse as datetimes.
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        raise bad_request(exc) from None
    except (ValueError, RecursionError):
        raise ApiRefusal(400, "bad_request", "the body is not valid JSON") from None


# --- metrics and audit --------------------------------------------------------------------


def param(adapter: TypeAdapter[Any], name: str, value: str) -> Any:
    """One path or query parameter, validated like the body's field of the same kind."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise bad_request(exc, name) from None


@dataclass(frozen=True)
class Opening:
    """What a request to open one anchor asks for; principals or scopes None: not named."""

    tenant: str
    principals: list[str] | None
    scopes: list[str] | None
    purpose: str
    as_of: datetime


def opening(request: web.Request) -> Opening:
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
        return [param(PRINCIPAL, name, v) for v in given] or None

    tenant: str = param(SLUG, "tenant", one("tenant"))
    principals = many("principal")
    scopes = many("scope")
    purpose: str = param(SLUG, "purpose", one("purpose"))
    when = q.get("as_of")
    try:
        as_of = WHEN.validate_python(when) if when else datetime.now(UTC)
    except ValidationError:
        reason = f"as_of is an ISO time with a zone (e.g. Z), not {quote(when)}"
        raise ApiRefusal(400, "bad_request", reason, "as_of") from None
    return Opening(tenant, principals, scopes, purpose, as_of)
