"""The read API serves its contract on the real embedded servers: GET /openapi.json (the
committed document) and GET /docs (Swagger UI, every file from this listener) answer without
a credential; /v1 still needs one; a client generated from the committed document by a
generator from the package registry (openapi-python-client) searches the live API."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from govindex.control.workers import Workers
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from reader.app import ReadServer
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "openapi-read-token-0123456789"


@pytest.fixture
async def api(module_runtime: tuple[Runtime, Workers]) -> AsyncIterator[str]:
    rt, _ = module_runtime
    tokens = dict(Settings(read_tokens={TOKEN: [f"tenant-{uuid.uuid4().hex[:8]}"]}).read_tokens)
    server = ReadServer(rt, tokens)
    url = await server.start()
    yield url
    await server.stop()


async def test_openapi_json_is_the_committed_document_without_a_credential(api: str) -> None:
    async with aiohttp.ClientSession() as session, session.get(api + "/openapi.json") as resp:
        assert resp.status == 200 and resp.content_type == "application/json"
        served = json.loads(await resp.read())
    committed = json.loads((ROOT / "schemas" / "openapi.read.v1.json").read_text())
    assert served == committed


async def test_docs_is_swagger_ui_served_whole_by_the_listener_and_v1_still_needs_a_credential(
    api: str,
) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(api + "/docs") as resp:
            assert resp.status == 200 and resp.content_type == "text/html"
            page = await resp.text()
        assert 'href="/openapi.json"' in page  # for a browser without scripts
        scripts = [part.split('"', 1)[0] for part in page.split('src="')[1:]]
        styles = [part.split('"', 1)[0] for part in page.split('href="')[1:]]
        assert scripts and all(src.startswith("/docs/") for src in scripts)  # no CDN
        fetched = {}
        for path in scripts + [s for s in styles if s.startswith("/docs/")]:
            async with session.get(api + path) as resp:  # without a credential
                assert resp.status == 200, path
                fetched[path] = await resp.read()
        bundle = fetched["/docs/assets/swagger-ui-bundle.js"]
        assert b"SwaggerUIBundle" in bundle and len(bundle) > 500_000  # the real UI
        assert b'url: "/openapi.json"' in fetched["/docs/assets/govindex-init.js"]
        async with session.post(api + "/v1/search", json={}) as resp:
            assert resp.status == 401
        async with session.get(api + "/docs/assets/../../v1/chunks/x") as resp:
            assert resp.status in (401, 404)  # a path outside the assets is not public


GENERATED_SECRET = "QUOKKAVELVET4412"


@pytest.fixture
async def searchable(module_runtime: tuple[Runtime, Workers]) -> AsyncIterator[tuple[str, str]]:
    """A read API over one indexed runbook (readable by group:eng) and its tenant."""
    rt, workers = module_runtime
    p = Pipeline(rt, tenant=f"tenant-{uuid.uuid4().hex[:8]}")
    await p.register()
    p.workers = workers
    text = f"# Failover\n\nPromote the replica; the drill word is {GENERATED_SECRET}.\n"
    await p.wait_processed(p.publish(p.change("runbooks/failover.md", 1, text)))
    await rt.index.refresh()
    tokens = dict(Settings(read_tokens={TOKEN: [p.tenant]}).read_tokens)
    server = ReadServer(rt, tokens)
    url = await server.start()
    yield url, p.tenant
    await server.stop()
    p.workers = None
    p.close()


def _generate(tmp_path: Path) -> Any:
    """A client package generated from the committed read contract, imported."""
    name = f"generated_read_{uuid.uuid4().hex[:8]}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(ROOT / "schemas" / "openapi.read.v1.json"),
            "--meta",
            "none",
            "--output-path",
            str(tmp_path / name),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        # The generator formats its output with ruff when ruff is on PATH (the venv's is).
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
    )
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


async def test_a_client_generated_from_the_committed_contract_searches_the_live_api(
    searchable: tuple[str, str], tmp_path: Path
) -> None:
    url, tenant = searchable
    package = _generate(tmp_path)
    search = importlib.import_module(f"{package.__name__}.api.default.search")
    models = importlib.import_module(f"{package.__name__}.models")
    client = package.AuthenticatedClient(base_url=url, token=TOKEN)
    body = models.SearchRequest(
        tenant=tenant,
        purpose="support",
        query=f"failover {GENERATED_SECRET}",
        subject=models.SubjectInput(principals=["group:eng"]),
    )
    async with client as session:
        found = await search.asyncio_detailed(client=session, body=body)
        assert found.status_code == 200
        assert isinstance(found.parsed, models.SearchResponse)
        (hit, *_) = found.parsed.hits
        assert hit.anchor.doc_id == "runbooks/failover.md" and GENERATED_SECRET in hit.text
        # The same generated client gets the contract's refusal model for a bad request.
        body.limit = 0
        refused = await search.asyncio_detailed(client=session, body=body)
        assert refused.status_code == 400 and isinstance(refused.parsed, models.ApiError)
        assert refused.parsed.field == "limit"
