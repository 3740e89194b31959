"""The read API serves its contract on the real embedded servers: GET /openapi.json (the
committed document) and GET /docs answer without a credential; /v1 still needs one."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from govindex.control.workers import Workers
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from reader.app import ReadServer

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


async def test_docs_says_where_the_contract_is_and_v1_still_needs_a_credential(api: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(api + "/docs") as resp:
            assert resp.status == 200 and resp.content_type == "text/html"
            assert 'href="/openapi.json"' in await resp.text()
        async with session.post(api + "/v1/search", json={}) as resp:
            assert resp.status == 401
