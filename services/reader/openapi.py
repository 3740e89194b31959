"""The read API's contract: an OpenAPI 3.1 document built from its wire models, served with
a docs page at GET /openapi.json and GET /docs (no credential) and committed in `schemas/`."""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from importlib import resources
from typing import Annotated, Any

from aiohttp import web
from pydantic import AwareDatetime, Field

from govindex.core.records import Slug
from govindex.core.schemas import OPENAPI_VERSION, Components, Mode, components
from reader.models import (
    MAX_PRINCIPALS,
    ApiError,
    ChunkView,
    DerivedArtifact,
    Id,
    Pack,
    PackRequest,
    Readiness,
    Registered,
    RelationsRequest,
    RelationsResponse,
    SearchRequest,
    SearchResponse,
    StoredPack,
    VerifyRequest,
    VerifyResponse,
    WirePrincipal,
)

OPENAPI_PATH = "/openapi.json"
DOCS_PATH = "/docs"
# Swagger UI's own files (from the swagger-ui-py wheel, nothing from a CDN: these listeners
# often have no internet) and the few lines that point it at OPENAPI_PATH.
DOCS_ASSETS = DOCS_PATH + "/assets"
_DOCS_INIT = DOCS_ASSETS + "/govindex-init.js"
_SWAGGER_FILES = ("swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png")
# What answers without a credential besides the probes: the contract is public to whoever
# reaches the (internal) listener.
CONTRACT_PATHS = frozenset(
    {OPENAPI_PATH, DOCS_PATH, _DOCS_INIT} | {f"{DOCS_ASSETS}/{name}" for name in _SWAGGER_FILES}
)
BEARER = "bearer"

_ERRORS = {
    400: "A malformed request: `field` names what is wrong, `reason` says why.",
    401: "No credential, or one that proves nothing (`WWW-Authenticate: Bearer`).",
    403: "A tenant, principal, scope or purpose beyond what the credential proves: named.",
    404: "No such thing for this subject (refused and unknown look the same).",
    409: "The request cannot be done in the current state: the reason says why.",
    410: "A kept pack none of whose items can be served again: the reason says why.",
    413: "The body is larger than this route takes.",
    503: "A server the answer needs is unreachable (fail closed): try again shortly.",
}


# --- document building blocks (the admin API's document uses them too) ---------------------


def json_content(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": dict(schema)}}


def answer(description: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": json_content(schema)}


def refusals(codes: Iterable[int], error: Mapping[str, Any]) -> dict[str, Any]:
    """The error answers `codes`, each an `error` body (a 401 with its challenge header)."""
    found: dict[str, Any] = {}
    for code in codes:
        found[str(code)] = answer(_ERRORS[code], error)
        if code == 401:
            found[str(code)]["headers"] = {
                "WWW-Authenticate": {
                    "description": "The bearer challenge (RFC 6750).",
                    "schema": {"type": "string"},
                }
            }
    return found


def contract_paths(title: str) -> dict[str, Any]:
    """The two routes that serve the contract itself, without a credential."""
    return {
        OPENAPI_PATH: {
            "get": {
                "operationId": "openapi",
                "summary": f"This document: the {title}'s OpenAPI 3.1 contract",
                "security": [],
                "responses": {
                    "200": {"description": "The document", "content": {"application/json": {}}}
                },
            }
        },
        DOCS_PATH: {
            "get": {
                "operationId": "docs",
                "summary": "Swagger UI over this document (served by this listener)",
                "security": [],
                "responses": {"200": {"description": "HTML", "content": {"text/html": {}}}},
            }
        },
    }


def document(
    *,
    title: str,
    description: str,
    security: Mapping[str, Any],
    paths: Mapping[str, Any],
    schemas: Components,
) -> dict[str, Any]:
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": "1", "description": description},
        "security": [{name: []} for name in security],
        "paths": {**paths, **contract_paths(title)},
        "components": {"schemas": schemas.schemas, "securitySchemes": dict(security)},
    }


def docs_page(title: str) -> str:
    """The page at /docs: Swagger UI over OPENAPI_PATH, every file served by this listener."""
    name = html.escape(title)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{name}</title>"
        f'<link rel="stylesheet" href="{DOCS_ASSETS}/swagger-ui.css">'
        f'<link rel="icon" type="image/png" href="{DOCS_ASSETS}/favicon-32x32.png">'
        "</head><body>\n"
        '<div id="swagger-ui"></div>\n'
        f'<noscript><p>The contract is the OpenAPI 3.1 document at <a href="{OPENAPI_PATH}">'
        f"{OPENAPI_PATH}</a>.</p></noscript>\n"
        f'<script src="{DOCS_ASSETS}/swagger-ui-bundle.js"></script>\n'
        f'<script src="{_DOCS_INIT}"></script>\n'
        "</body></html>\n"
    )


_INIT_JS = (
    "window.ui = SwaggerUIBundle({"
    f"url: {json.dumps(OPENAPI_PATH)}, dom_id: '#swagger-ui', deepLinking: true, "
    "presets: [SwaggerUIBundle.presets.apis], layout: 'BaseLayout', "
    "persistAuthorization: false});\n"
)
_MEDIA = {".css": "text/css", ".js": "text/javascript", ".png": "image/png"}


def _swagger_asset(name: str) -> bytes:
    return (resources.files("swagger_ui") / "static" / name).read_bytes()


def add_contract(app: web.Application, build: Callable[[], Mapping[str, Any]], title: str) -> None:
    """Route GET /openapi.json (the document `build` makes), GET /docs (Swagger UI) and the
    UI's files, each read once here."""
    body = json.dumps(build(), sort_keys=True).encode()
    page = docs_page(title)

    async def openapi(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def docs(_: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    app.router.add_get(OPENAPI_PATH, openapi)
    app.router.add_get(DOCS_PATH, docs)
    files = {f"{DOCS_ASSETS}/{name}": _swagger_asset(name) for name in _SWAGGER_FILES}
    files[_DOCS_INIT] = _INIT_JS.encode()
    for path, content in files.items():
        app.router.add_get(path, _static(content, _MEDIA[path[path.rindex(".") :]]))


def _static(content: bytes, media: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def serve(_: web.Request) -> web.Response:
        headers = {"Cache-Control": "public, max-age=3600"}
        return web.Response(body=content, content_type=media, headers=headers)

    return serve


# --- the read API ---------------------------------------------------------------------------

TITLE = "govindex read API"
_TYPES: dict[str, tuple[Any, Mode]] = {
    "SearchRequest": (SearchRequest, "validation"),
    "SearchResponse": (SearchResponse, "serialization"),
    "PackRequest": (PackRequest, "validation"),
    "Pack": (Pack, "serialization"),
    "VerifyRequest": (VerifyRequest, "validation"),
    "VerifyResponse": (VerifyResponse, "serialization"),
    "ChunkView": (ChunkView, "serialization"),
    "StoredPack": (StoredPack, "serialization"),
    "RelationsRequest": (RelationsRequest, "validation"),
    "RelationsResponse": (RelationsResponse, "serialization"),
    "DerivedArtifact": (DerivedArtifact, "validation"),
    "Registered": (Registered, "serialization"),
    "Readiness": (Readiness, "serialization"),
    "ApiError": (ApiError, "serialization"),
    # The chunk route's parameters, validated as the body fields of the same kind are.
    "Id": (Id, "validation"),
    "Slug": (Slug, "validation"),
    "Principals": (Annotated[list[WirePrincipal], Field(max_length=MAX_PRINCIPALS)], "validation"),
    "AsOf": (AwareDatetime, "validation"),
}
_V1_ERRORS = (400, 401, 403, 413, 503)


def _post(
    s: Components, operation: str, summary: str, body: str, answered: str, status: int = 200
) -> dict[str, Any]:
    return {
        "post": {
            "operationId": operation,
            "summary": summary,
            "requestBody": {"required": True, "content": json_content(s.of(body))},
            "responses": {
                str(status): answer(summary, s.of(answered, "serialization")),
                **refusals(_V1_ERRORS, s.of("ApiError", "serialization")),
            },
        }
    }


def _subject_query(s: Components, *, as_of: bool) -> list[dict[str, Any]]:
    """The query parameters a GET names its tenant, subject and purpose with."""

    def query(name: str, key: str, required: bool, description: str) -> dict[str, Any]:
        return {
            "name": name,
            "in": "query",
            "required": required,
            "description": description,
            "schema": s.of(key),
        }

    def repeated(name: str, what: str) -> dict[str, Any]:
        described = f"Repeatable; default: the credential's own {what}."
        return {**query(name, "Principals", False, described), "style": "form", "explode": True}

    found = [
        query("tenant", "Slug", True, "The tenant read."),
        repeated("principal", "principals"),
        repeated("scope", "scopes"),
        query("purpose", "Slug", True, "Why it is read."),
    ]
    if as_of:
        found.append(query("as_of", "AsOf", False, "An ISO time with a zone; default: now."))
    return found


def _get(
    s: Components, operation: str, summary: str, key: str, answered: str, codes: Iterable[int]
) -> dict[str, Any]:
    """A GET of one thing by its id in the path, named with `_subject_query`'s parameters."""
    return {
        "get": {
            "operationId": operation,
            "summary": summary,
            "parameters": [
                {"name": key, "in": "path", "required": True, "schema": s.of("Id")},
                *_subject_query(s, as_of=operation == "chunk"),
            ],
            "responses": {
                "200": answer(summary, s.of(answered, "serialization")),
                **refusals(codes, s.of("ApiError", "serialization")),
            },
        }
    }


def _chunk(s: Components) -> dict[str, Any]:
    summary = "Open one anchor, through the same gates as a search"
    return _get(s, "chunk", summary, "chunk_id", "ChunkView", (400, 401, 403, 404, 503))


def _packs(s: Components) -> dict[str, Any]:
    """POST /v1/packs, with the Idempotency-Key that keeps the pack."""
    found = _post(s, "pack", "A context pack with its manifest", "PackRequest", "Pack")
    operation = found["post"]
    operation["parameters"] = [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "description": "Keep the pack (GET /v1/packs/{pack_id}); a retry with the same key "
            "and body gets the same pack without retrieving again (header "
            "Idempotent-Replayed: true); the same key with another body is 409.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 128},
        }
    ]
    operation["responses"].update(refusals((409, 410), s.of("ApiError", "serialization")))
    return found


def _stored_pack(s: Components) -> dict[str, Any]:
    summary = "A kept pack, re-judged now: items no longer valid are withheld"
    codes = (400, 401, 403, 404, 410, 503)
    return _get(s, "stored_pack", summary, "pack_id", "StoredPack", codes)


def _probe(s: Components, operation: str, summary: str, ready: bool) -> dict[str, Any]:
    readiness = s.of("Readiness", "serialization")
    responses = {"200": answer("Live" if not ready else "Ready", readiness)}
    if ready:
        responses["503"] = answer("Not ready: `down` says what and why", readiness)
    return {
        "get": {
            "operationId": operation,
            "summary": summary,
            "security": [],
            "responses": responses,
        }
    }


@functools.cache
def _built() -> str:
    s = components(_TYPES)
    paths = {
        "/v1/search": _post(s, "search", "Fused, gated ranking", "SearchRequest", "SearchResponse"),
        "/v1/packs": _packs(s),
        "/v1/packs/{pack_id}": _stored_pack(s),
        "/v1/packs/verify": _post(
            s,
            "verify",
            "Is anything in this manifest deleted, revoked or superseded?",
            "VerifyRequest",
            "VerifyResponse",
        ),
        "/v1/chunks/{chunk_id}": _chunk(s),
        "/v1/relations": _post(
            s,
            "relations",
            "An entity's edges at a moment, each as visible as the chunk that states it",
            "RelationsRequest",
            "RelationsResponse",
        ),
        "/v1/lineage": _post(
            s,
            "lineage",
            "A stored summary or memory registers what it was built from",
            "DerivedArtifact",
            "Registered",
            201,
        ),
        "/livez": _probe(s, "livez", "Live while the event loop runs (no I/O)", ready=False),
        "/readyz": _probe(s, "readyz", "Ready while the system of record answers", ready=True),
        "/healthz": _probe(s, "healthz", "The same as /readyz", ready=True),
    }
    security = {
        BEARER: {
            "type": "http",
            "scheme": "bearer",
            "description": "A service token (GOVINDEX_READ_TOKENS) or a JWT from the identity "
            "provider, verified against its JWKS.",
        }
    }
    description = (
        "Governed reads: every answer is what the credential's subject may see, as of a time. "
        "Served on the internal listener only."
    )
    return json.dumps(
        document(title=TITLE, description=description, security=security, paths=paths, schemas=s)
    )


def read_openapi() -> dict[str, Any]:
    """The read API's OpenAPI 3.1 document (a fresh copy: callers may change it)."""
    found: dict[str, Any] = json.loads(_built())
    return found
