"""The published contracts: the read and admin APIs' OpenAPI 3.1 documents are valid, match
the committed files, name every route the apps register and resolve every reference."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp import web
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from govindex.cli.index import OPENAPI_DOCUMENTS
from govindex.control.admin import admin_openapi, build_admin_app
from govindex.core.jobs import Job
from govindex.core.ports import LineageRegistry, ReadStore
from govindex.core.schemas import check_documents, render_document
from govindex.runtime.composition import Runtime
from reader.http import build_read_app
from reader.openapi import DOCS_ASSETS, read_openapi
from reader.service import ReadPorts, ReadService

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "a-token-of-sixteen-or-more"


def _read_app() -> web.Application:
    # The routes are registered without touching a port: nothing here is ever called.
    service = ReadService(ReadPorts(store=cast(ReadStore, object()), index=None, cache=None))
    return build_read_app(service, cast(LineageRegistry, object()), {TOKEN: ["t"]})


def _admin_app() -> web.Application:
    tasks: set[asyncio.Task[Job]] = set()
    return build_admin_app(cast(Runtime, object()), TOKEN, tasks)


APIS: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[], web.Application]]] = {
    "openapi.read": (read_openapi, _read_app),
    "openapi.admin": (admin_openapi, _admin_app),
}


@pytest.fixture(params=sorted(APIS))
def api(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], web.Application]:
    name: str = request.param
    build, app = APIS[name]
    return name, build(), app()


def test_both_documents_validate_as_openapi_3_1(
    api: tuple[str, dict[str, Any], web.Application],
) -> None:
    _, document, _ = api
    assert document["openapi"].startswith("3.1.")
    validate(document, cls=OpenAPIV31SpecValidator)


def test_the_committed_documents_match_what_the_models_build() -> None:
    assert set(OPENAPI_DOCUMENTS) == set(APIS)
    assert check_documents(ROOT / "schemas", OPENAPI_DOCUMENTS) == [], (
        "run `govindex schemas --write`"
    )
    for name, (build, _) in APIS.items():
        committed = (ROOT / "schemas" / f"{name}.v1.json").read_text()
        assert committed == render_document(build()), name


def test_every_route_the_app_registers_is_in_the_document_and_nothing_else(
    api: tuple[str, dict[str, Any], web.Application],
) -> None:
    name, document, app = api
    registered = {
        (route.resource.canonical, route.method.lower())
        for route in app.router.routes()
        if route.resource is not None
        and route.method != "HEAD"  # aiohttp adds HEAD to GETs
        and not route.resource.canonical.startswith(DOCS_ASSETS + "/")  # Swagger UI's files
    }
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert registered == documented, name


def test_the_contract_and_the_probes_need_no_credential_and_the_rest_a_bearer(
    api: tuple[str, dict[str, Any], web.Application],
) -> None:
    _, document, _ = api
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path, item in document["paths"].items():
        for method, operation in item.items():
            public = not path.startswith("/v1/")
            assert (operation.get("security") == []) is public, (path, method)
            if not public:
                assert "401" in operation["responses"], (path, method)


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_every_reference_resolves_to_a_component_schema(
    api: tuple[str, dict[str, Any], web.Application],
) -> None:
    _, document, _ = api
    schemas = document["components"]["schemas"]
    refs = set(_refs(document))
    assert refs, "the bodies are referenced, not inlined"
    prefix = "#/components/schemas/"
    for ref in refs:
        assert ref.startswith(prefix) and ref.removeprefix(prefix) in schemas, ref
    assert "$defs" not in json.dumps(document), "every definition is a component"


def _body_ref(operation: dict[str, Any], status: str | None = None) -> str:
    if status is None:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
    else:
        schema = operation["responses"][status]["content"]["application/json"]["schema"]
    return cast(str, schema["$ref"]).rsplit("/", 1)[1]


def test_the_read_routes_take_and_answer_their_models() -> None:
    paths = read_openapi()["paths"]
    expected = {
        "/v1/search": ("SearchRequest", "200", "SearchResponse"),
        "/v1/packs": ("PackRequest", "200", "Pack"),
        "/v1/packs/verify": ("VerifyRequest", "200", "VerifyResponse"),
        "/v1/lineage": ("DerivedArtifact", "201", "Registered"),
    }
    for path, (request, status, response) in expected.items():
        post = paths[path]["post"]
        assert _body_ref(post) == request, path
        assert _body_ref(post, status) == response, path
        for code in ("400", "401", "403", "413", "503"):
            assert _body_ref(post, code) == "ApiError", (path, code)
    chunk = paths["/v1/chunks/{chunk_id}"]["get"]
    assert _body_ref(chunk, "200") == "ChunkView" and _body_ref(chunk, "404") == "ApiError"
    names = {(p["name"], p["in"], p["required"]) for p in chunk["parameters"]}
    assert names == {
        ("chunk_id", "path", True),
        ("tenant", "query", True),
        ("principal", "query", False),
        ("scope", "query", False),
        ("purpose", "query", True),
        ("as_of", "query", False),
    }


def test_the_admin_start_takes_every_kind_of_job() -> None:
    document = admin_openapi()
    start = document["paths"]["/v1/jobs"]["post"]
    assert _body_ref(start) == "StartJob" and _body_ref(start, "202") == "Job"
    job = document["components"]["schemas"]["StartJob"]["properties"]["job"]
    assert set(job["discriminator"]["mapping"]) == {
        "replay",
        "dlq-redrive",
        "offsets-reset",
        "reindex",
        "backfill",
        "reembed",
    }
