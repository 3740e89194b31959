"""Every answered read leaves an audit record, through the read API on the real embedded
servers: one row per search, pack, opened chunk, verify and lineage call, naming the
credential, the subject the read ran as and what it returned; refusals of an accepted
credential are recorded, a 401 is not; an answer whose record cannot be written is a 503;
`govindex audit` lists the rows; and the read path's metrics move with bounded labels only."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.audit import PostgresReadAudit
from govindex.control.workers import Workers
from govindex.core.ports import AuditRow
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from reader.app import ReadServer, jwt_config, read_service
from reader.http import build_read_app
from tests.support.jwt import AUDIENCE, ISSUER, IdentityProvider
from tests.support.pipeline import Pipeline
from tests.support.proxy import CuttableProxy

pytestmark = pytest.mark.e2e

ENG_DOC = "runbooks/orders-db.md"
COPY_DOC = "runbooks/orders-db-copy.md"
HR_DOC = "hr/payroll.md"
RUNBOOK = """# Orders DB failover

Promote the replica when the primary of orders-db stops answering.

## Detect

Check replication lag on orders-db before anything else: the replica must be caught up.

## Promote

Promote the replica with `pg_ctl promote`, then point the orders service at it.

## Afterwards

Rebuild a new replica from the promoted primary and watch replication lag on orders-db.
"""
HR_ONLY = "# Payroll failover\n\nRestart the payroll replica after an orders-db failover.\n"


@pytest.fixture(scope="module")
async def corpus(module_runtime: tuple[Runtime, Workers]) -> AsyncIterator[Pipeline]:
    """One tenant for the module: a runbook of four sections group:eng may read (the
    source's default ACL), a copy of it (folded into a pack's items: dedup), and an HR-only
    document about the same failover."""
    rt, workers = module_runtime
    p = Pipeline(rt, tenant=f"tenant-{uuid.uuid4().hex[:8]}")
    await p.register()
    p.workers = workers
    ids = p.publish(
        p.change(ENG_DOC, 1, RUNBOOK),
        p.change(COPY_DOC, 1, RUNBOOK),
        p.change(HR_DOC, 1, HR_ONLY, acl=["group:hr"]),
    )
    await p.wait_processed(ids)
    await rt.index.refresh()
    yield p
    p.workers = None
    p.close()


@pytest.fixture
def credential() -> tuple[str, str]:
    """A bound token of this test's own, and its name: its rows are this test's alone."""
    return f"audit-token-{uuid.uuid4().hex}", f"rag-{uuid.uuid4().hex[:8]}"


def _tokens(tenant: str, token: str, name: str) -> dict[str, Any]:
    binding = {"name": name, "tenants": [tenant], "principals": ["group:eng*"]}
    binding["purposes"] = ["support"]
    return dict(Settings(read_tokens={token: binding}).read_tokens)


@pytest.fixture
def idp(tmp_path: Path, corpus: Pipeline) -> IdentityProvider:
    provider = IdentityProvider(tmp_path / "jwks.json", corpus.tenant)
    provider.publish("rsa-1")
    return provider


@pytest.fixture
async def api(
    corpus: Pipeline, credential: tuple[str, str], idp: IdentityProvider
) -> AsyncIterator[str]:
    """The read API as `govindex worker reader` builds it from the Runtime: audited."""
    settings = Settings(read_jwks=str(idp.jwks), read_jwt_issuer=ISSUER, read_jwt_audience=AUDIENCE)
    token, name = credential
    server = ReadServer(corpus.rt, _tokens(corpus.tenant, token, name), jwt=jwt_config(settings))
    url = await server.start()
    yield url
    await server.stop()


async def _send(
    url: str,
    path: str,
    credential: str | None,
    body: Any = None,
    params: list[tuple[str, str]] | None = None,
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    method = "GET" if body is None else "POST"
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url + path, json=body, params=params, headers=headers) as resp,
    ):
        return resp.status, json.loads(await resp.read())


def _search(tenant: str, subject: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "tenant": tenant,
        "purpose": "support",
        "query": "orders-db failover replica promote",
        "cache": "bypass",
        **fields,
    }
    if subject is not None:
        body["subject"] = subject
    return body


def _hash(value: object) -> str:
    """The request hash as the docs tell a caller to compute it."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


async def _recorded(rt: Runtime, name: str) -> list[AuditRow]:
    return await rt.audit.entries(credential=name, limit=1000)


async def _one_more(rt: Runtime, name: str, before: int) -> AuditRow:
    """The row the last request left: exactly one more than `before`, newest first."""
    rows = await _recorded(rt, name)
    assert len(rows) == before + 1, rows
    return rows[0]


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value)


ENG = {"principals": ["group:eng"]}


# --- one row per answered read -----------------------------------------------------------


async def test_a_search_a_pack_a_chunk_a_verify_and_a_lineage_call_each_leave_one_row(
    corpus: Pipeline, api: str, credential: tuple[str, str]
) -> None:
    token, name = credential
    rt, tenant = corpus.rt, corpus.tenant
    said = {"credential_kind": "token", "credential_name": name, "subject": None}

    body = _search(tenant, ENG, as_of="2999-01-01T00:00:00Z")
    status, found = await _send(api, "/v1/search", token, body)
    assert status == 200 and found["hits"], found
    row = await _one_more(rt, name, 0)
    assert (row.endpoint, row.status, row.tenant, row.purpose) == ("search", 200, tenant, "support")
    assert {k: getattr(row, k) for k in said} == said
    assert (row.principals, row.scopes) == (("group:eng",), ())
    assert row.request_hash == _hash(body)
    assert row.chunk_ids == tuple(hit["anchor"]["chunk_id"] for hit in found["hits"])
    assert row.as_of == _when("2999-01-01T00:00:00Z") and row.known_at is None
    assert row.pack_hash is None

    body = _search(tenant, ENG)
    status, pack = await _send(api, "/v1/packs", token, body)
    assert status == 200 and pack["items"], pack
    row = await _one_more(rt, name, 1)
    assert (row.endpoint, row.status, row.principals) == ("pack", 200, ("group:eng",))
    assert row.pack_hash == pack["manifest"]["pack_hash"]
    assert row.request_hash == _hash(body)
    assert row.as_of == _when(pack["as_of"])  # a read "as of now" records the moment it ran
    returned: list[str] = []
    for item in pack["items"]:
        returned.append(item["anchor"]["chunk_id"])
        returned.extend(h["anchor"]["chunk_id"] for h in item["hydrated"])
        returned.extend(c["chunk_id"] for c in item["corroboration"])
    assert any(item["hydrated"] for item in pack["items"])  # hydrated chunks are returned too
    assert row.chunk_ids == tuple(returned)

    anchor = pack["items"][0]["anchor"]
    query = [("tenant", tenant), ("principal", "group:eng"), ("purpose", "support")]
    path = f"/v1/chunks/{anchor['chunk_id']}"
    status, opened = await _send(api, path, token, params=query)
    assert status == 200 and opened["anchor"] == anchor, opened
    row = await _one_more(rt, name, 2)
    assert (row.endpoint, row.status, row.chunk_ids) == ("chunk", 200, (anchor["chunk_id"],))
    assert (row.tenant, row.principals, row.purpose) == (tenant, ("group:eng",), "support")
    assert row.request_hash == _hash(
        {
            "path": path,
            "query": {"tenant": [tenant], "principal": ["group:eng"], "purpose": ["support"]},
        }
    )

    status, verdict = await _send(api, "/v1/packs/verify", token, {"manifest": pack["manifest"]})
    assert status == 200 and verdict["status"] == "valid", verdict
    row = await _one_more(rt, name, 3)
    assert (row.endpoint, row.status, row.tenant) == ("verify", 200, tenant)
    assert row.pack_hash == pack["manifest"]["pack_hash"]
    assert row.chunk_ids == tuple(pin["chunk_id"] for pin in verdict["pins"])
    assert row.principals == ()  # a service token proves no subject of its own

    artifact = {
        "tenant_id": tenant,
        "kind": "summary",
        "id": f"s-{uuid.uuid4().hex[:6]}",
        "built_from": [f"{tenant}/{corpus.source}/{ENG_DOC}"],
        "location": "s3://summaries/s-1",
    }
    status, _ = await _send(api, "/v1/lineage", token, artifact)
    assert status == 201
    row = await _one_more(rt, name, 4)
    assert (row.endpoint, row.status, row.tenant, row.chunk_ids) == ("lineage", 201, tenant, ())
    assert row.request_hash == _hash(artifact)


async def test_a_jwt_read_is_recorded_with_its_issuer_subject_and_proven_principals(
    corpus: Pipeline, api: str, idp: IdentityProvider
) -> None:
    since, sub = datetime.now(UTC), f"alice-{uuid.uuid4().hex[:6]}"
    token = idp.token(sub=sub, groups=["eng"])

    status, found = await _send(api, "/v1/search", token, _search(corpus.tenant))
    assert status == 200 and found["hits"], found

    rows = [r for r in await corpus.rt.audit.entries(since=since) if r.subject == sub]
    assert len(rows) == 1, rows
    (row,) = rows
    assert (row.credential_kind, row.credential_name) == ("jwt", f"jwt:{ISSUER}")
    assert row.principals == ("group:eng", f"user:{sub}") and row.scopes == ("docs.read",)
    assert row.chunk_ids == tuple(hit["anchor"]["chunk_id"] for hit in found["hits"])


# --- refusals ----------------------------------------------------------------------------


async def test_refusals_of_an_accepted_credential_are_recorded_and_a_401_is_not(
    corpus: Pipeline, api: str, credential: tuple[str, str]
) -> None:
    token, name = credential
    rt, tenant = corpus.rt, corpus.tenant

    hr = _search(tenant, {"principals": ["group:hr"]})
    status, refused = await _send(api, "/v1/search", token, hr)
    assert status == 403, refused
    row = await _one_more(rt, name, 0)
    assert (row.endpoint, row.status, row.tenant, row.purpose) == ("search", 403, tenant, "support")
    assert (row.principals, row.chunk_ids) == ((), ())  # nothing was admitted, nothing returned
    assert row.request_hash == _hash(hr)

    status, _ = await _send(api, "/v1/packs", token, _search(tenant))  # no principals
    assert status == 400
    row = await _one_more(rt, name, 1)
    assert (row.endpoint, row.status, row.tenant) == ("pack", 400, tenant)

    query = [("tenant", tenant), ("principal", "group:eng"), ("purpose", "support")]
    status, _ = await _send(api, "/v1/chunks/0123456789abcdef", token, params=query)
    assert status == 404
    row = await _one_more(rt, name, 2)
    assert (row.endpoint, row.status, row.chunk_ids) == ("chunk", 404, ())

    status, _ = await _send(api, "/v1/search", token, "not a json object")
    assert status == 400
    row = await _one_more(rt, name, 3)
    assert (row.status, row.tenant) == (400, "")  # what was known: no valid request, no tenant
    assert row.request_hash == _hash("not a json object")

    before = await rt.audit.entries(limit=1000)
    for credential_sent in (None, "not-a-known-token-at-all"):
        status, _ = await _send(api, "/v1/search", credential_sent, _search(tenant, ENG))
        assert status == 401
    assert await rt.audit.entries(limit=1000) == before  # no credential, nothing to name


# --- fail closed -------------------------------------------------------------------------


async def test_an_answer_that_cannot_be_audited_is_503_and_a_refusal_still_answers(
    corpus: Pipeline, credential: tuple[str, str]
) -> None:
    token, name = credential
    dsn = urlparse(corpus.settings.pg_dsn or "")
    assert dsn.hostname and dsn.port
    proxy = CuttableProxy(dsn.hostname, dsn.port)
    await proxy.start()
    proxied = dsn._replace(netloc=f"{dsn.username}:{dsn.password}@127.0.0.1:{proxy.port}")
    # Only the audit goes through the proxy: the reads themselves keep their PostgreSQL.
    pool = AsyncConnectionPool(proxied.geturl(), min_size=1, max_size=2, timeout=2, open=False)
    await pool.open(wait=True, timeout=15)
    app = build_read_app(
        read_service(corpus.rt),
        corpus.rt.lineage,
        _tokens(corpus.tenant, token, name),
        audit=PostgresReadAudit(pool),
    )
    headers = {"Authorization": f"Bearer {token}"}
    eng, hr = _search(corpus.tenant, ENG), _search(corpus.tenant, {"principals": ["group:hr"]})
    try:
        async with TestClient(TestServer(app)) as client:
            resp = await client.post("/v1/search", json=eng, headers=headers)
            assert resp.status == 200 and (await resp.json())["hits"]
            assert len(await _recorded(corpus.rt, name)) == 1

            await proxy.cut()
            resp = await client.post("/v1/search", json=eng, headers=headers)
            answer = await resp.json()
            assert resp.status == 503, answer
            assert answer["error"] == "unavailable" and "audited" in answer["reason"]
            assert "hits" not in answer
            resp = await client.post("/v1/search", json=hr, headers=headers)
            assert resp.status == 403  # a refusal is given whatever its record's fate
            assert len(await _recorded(corpus.rt, name)) == 1

            await proxy.start()
            deadline = asyncio.get_running_loop().time() + 60
            while (await client.post("/v1/search", json=eng, headers=headers)).status != 200:
                assert asyncio.get_running_loop().time() < deadline, "never answered again"
                await asyncio.sleep(0.5)
            assert len(await _recorded(corpus.rt, name)) == 2
    finally:
        await proxy.cut()
        await pool.close()


# --- the command line --------------------------------------------------------------------


def _govindex(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """One CLI command with GOVINDEX_* settings naming the module's servers and database."""
    given = {
        "GOVINDEX_PG_DSN": settings.pg_dsn,
        "GOVINDEX_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "GOVINDEX_OPENSEARCH_URL": settings.opensearch_url,
        "GOVINDEX_REDIS_URL": settings.redis_url,
        "GOVINDEX_NAMESPACE": settings.namespace,
        "GOVINDEX_STATE_DIR": str(settings.state_dir),
    }
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")}
    environ |= {k: v for k, v in given.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-m", "govindex.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=Path(settings.state_dir),
        check=False,
    )


async def test_govindex_audit_json_lists_the_rows_the_reads_left(
    corpus: Pipeline, api: str, credential: tuple[str, str]
) -> None:
    token, name = credential
    assert (await _send(api, "/v1/search", token, _search(corpus.tenant, ENG)))[0] == 200
    assert (await _send(api, "/v1/packs", token, _search(corpus.tenant, ENG)))[0] == 200
    rows = await _recorded(corpus.rt, name)

    listed = await asyncio.to_thread(
        _govindex, corpus.settings, "audit", "--credential", name, "--json"
    )

    assert listed.returncode == 0, listed.stderr
    lines = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [line["endpoint"] for line in lines] == ["pack", "search"]  # newest first
    assert [line["request_hash"] for line in lines] == [r.request_hash for r in rows]
    assert lines[0]["pack_hash"] == rows[0].pack_hash and lines[0]["principals"] == ["group:eng"]
    assert lines[1]["chunk_ids"] == list(rows[1].chunk_ids)


# --- metrics -----------------------------------------------------------------------------


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_the_read_metrics_move_for_requests_channels_cache_and_packs_with_bounded_labels(
    corpus: Pipeline, api: str, credential: tuple[str, str]
) -> None:
    token, tenant = credential[0], corpus.tenant
    watched = {
        "searches": ("govindex_read_requests_total", {"endpoint": "search", "status": "200"}),
        "unauthorized": ("govindex_read_requests_total", {"endpoint": "search", "status": "401"}),
        "timed": ("govindex_read_request_duration_seconds_count", {"endpoint": "pack"}),
        "fulltext": ("govindex_read_channel_duration_seconds_count", {"channel": "fulltext"}),
        "bm25": ("govindex_read_channel_duration_seconds_count", {"channel": "bm25"}),
        "misses": ("govindex_read_cache_total", {"result": "miss"}),
        "hits": ("govindex_read_cache_total", {"result": "hit"}),
        "dedup": ("govindex_read_refusals_total", {"gate": "dedup"}),
        "packs": ("govindex_read_tokens_packed_count", {}),
        "tokens": ("govindex_read_tokens_packed_sum", {}),
    }
    before = {key: _sample(name, **labels) for key, (name, labels) in watched.items()}

    cached = _search(tenant, ENG, cache="use", query=f"orders-db promote {uuid.uuid4().hex}")
    for _ in range(2):  # a miss that is kept, then a hit
        assert (await _send(api, "/v1/search", token, cached))[0] == 200
    assert (await _send(api, "/v1/search", token, _search(tenant, ENG)))[0] == 200
    assert (await _send(api, "/v1/packs", token, _search(tenant, ENG)))[0] == 200
    assert (await _send(api, "/v1/search", None, _search(tenant, ENG)))[0] == 401

    moved = {key: _sample(name, **labels) - before[key] for key, (name, labels) in watched.items()}
    assert moved["searches"] == 3 and moved["unauthorized"] == 1 and moved["timed"] == 1, moved
    assert moved["fulltext"] == 3 and moved["bm25"] == 3, moved  # the hit ran no channel
    assert moved["misses"] == 1 and moved["hits"] == 1, moved
    assert moved["dedup"] >= 1, moved  # the copy of the runbook, folded into an item
    assert moved["packs"] == 1 and moved["tokens"] > 0, moved

    exposed = generate_latest(REGISTRY).decode()
    read = [
        f for f in text_string_to_metric_families(exposed) if f.name.startswith("govindex_read")
    ]
    assert read
    values = {v for family in read for s in family.samples for v in s.labels.values()}
    secret = (tenant, "group:", "user:", credential[1], ENG_DOC, COPY_DOC, HR_DOC)
    assert not [v for v in values if any(word in v for word in secret)], values
