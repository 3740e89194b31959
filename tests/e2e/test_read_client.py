"""The client distribution (`govindex_client`) against the real read API on the embedded
servers: the sync and async clients search, pack, verify, open an anchor and register
lineage as the subject their credential proves; each refusal is the error of its status
(403 naming the principal, 401, 400, 404, 413); a 503 is retried, a bounded number of times,
and nothing else is."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from pydantic import TypeAdapter, ValidationError

from govindex.control.workers import Workers
from govindex.core import inputs, records
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from govindex.runtime.listener import Listener
from govindex_client import (
    AsyncGovindexClient,
    BadRequest,
    Forbidden,
    GovindexClient,
    NotFound,
    TooLarge,
    Unauthorized,
    Unavailable,
    _types,
)
from govindex_client.models import SearchRequest, SearchResponse, Subject
from reader.app import ReadServer, read_service
from reader.credentials import JwtConfig, JwtVerifier
from reader.http import build_read_app
from tests.support.jwt import AUDIENCE, ISSUER, IdentityProvider, rsa_key
from tests.support.pipeline import Pipeline
from tests.support.proxy import CuttableProxy

pytestmark = pytest.mark.e2e

BOUND = "bound-client-token-0123456789"
SECRET = "ZEBRAQUARTZ7731"  # only in the HR-only document
ENG_DOC = "runbooks/orders-db.md"
HR_DOC = "hr/payroll.md"
QUERY = "payroll orders-db failover replica"
RUNBOOK = """# Orders DB failover

Promote the replica when the primary of orders-db stops answering: check replication lag on
orders-db, then promote the replica with `pg_ctl promote`.
"""
HR_ONLY = f"""# Payroll failover

The payroll batch key is {SECRET}; never share it. Restart the replica after failover.
"""


@pytest.fixture(scope="module")
async def corpus(module_runtime: tuple[Runtime, Workers]) -> AsyncIterator[Pipeline]:
    """One tenant: a runbook group:eng may read and an HR-only document, both on failover."""
    rt, workers = module_runtime
    p = Pipeline(rt, tenant=f"tenant-{uuid.uuid4().hex[:8]}")
    await p.register()
    p.workers = workers
    ids = p.publish(p.change(ENG_DOC, 1, RUNBOOK), p.change(HR_DOC, 1, HR_ONLY, acl=["group:hr"]))
    await p.wait_processed(ids)
    await rt.index.refresh()
    yield p
    p.workers = None
    p.close()


def _tokens(tenant: str) -> dict[str, Any]:
    """GOVINDEX_READ_TOKENS: one token bound to the tenant, `group:eng*` and `support`."""
    binding = {"name": "rag-app", "tenants": [tenant], "principals": ["group:eng*"]}
    binding["purposes"] = ["support"]
    return dict(Settings(read_tokens={BOUND: binding}).read_tokens)


@pytest.fixture(scope="module")
async def api(corpus: Pipeline) -> AsyncIterator[str]:
    server = ReadServer(corpus.rt, _tokens(corpus.tenant))
    url = await server.start()
    yield url
    await server.stop()


def _docs(found: SearchResponse) -> set[str]:
    return {h.anchor.doc_id for h in found.hits}


async def _eventually(probe: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


# --- calls -------------------------------------------------------------------------------


async def test_the_sync_client_searches_packs_verifies_and_opens_an_anchor_as_group_eng(
    corpus: Pipeline, api: str
) -> None:
    def calls() -> tuple[Any, ...]:
        with GovindexClient(
            api, BOUND, tenant=corpus.tenant, purpose="support", principals=["group:eng"]
        ) as client:
            found = client.search(QUERY, cache="bypass")
            pack = client.pack(QUERY)
            verdict = client.verify(pack.manifest)
            again = client.verify(pack)  # a pack is verified by its manifest
            item = pack.items[0]
            opened = client.chunk(item.anchor.chunk_id)
            return found, pack, verdict, again, opened, client.ready()

    # The read API serves on this event loop: a blocking client runs in a thread.
    found, pack, verdict, again, opened, ready = await asyncio.to_thread(calls)

    assert ENG_DOC in _docs(found) and HR_DOC not in _docs(found)
    assert SECRET not in found.model_dump_json()
    # The request the client sent is the one it was given: the same hits as in process.
    asked = SearchRequest(
        tenant=corpus.tenant,
        subject=Subject(principals=["group:eng"]),
        purpose="support",
        query=QUERY,
        cache="bypass",
    )
    assert found.hits == (await read_service(corpus.rt).search(asked)).hits
    assert pack.items and {i.anchor.doc_id for i in pack.items} == {ENG_DOC}
    assert pack.manifest.subject == Subject(principals=["group:eng"], scopes=[])
    assert verdict.status == "valid" and again.status == "valid"
    assert opened.anchor == pack.items[0].anchor and opened.text == pack.items[0].text
    assert ready.ok and ready.down == {}


async def test_the_async_client_does_the_same_and_a_call_overrides_the_clients_defaults(
    corpus: Pipeline, api: str
) -> None:
    # No principals on the client: the credential's own, and a service token has none.
    async with AsyncGovindexClient(api, BOUND, tenant=corpus.tenant, purpose="support") as client:
        with pytest.raises(BadRequest) as unnamed:
            await client.search(QUERY)
        assert unnamed.value.status == 400 and unnamed.value.field == "subject.principals"
        assert "carries no subject" in unnamed.value.reason

        found = await client.search(QUERY, principals=["group:eng"], limit=5)
        pack = await client.pack(QUERY, principals=["group:eng"], budget={"max_items": 2})
        verdict = await client.verify(pack.manifest)
        opened = await client.chunk(pack.items[0].anchor.chunk_id, principals=["group:eng"])
        registered = await client.register_lineage(
            kind="summary",
            id="s-1",
            built_from=[f"{corpus.tenant}/{corpus.source}/{ENG_DOC}"],
            location="s3://summaries/s-1",
            text="A summary.",
        )

    assert ENG_DOC in _docs(found) and HR_DOC not in _docs(found) and len(found.hits) <= 5
    assert 1 <= len(pack.items) <= 2 and verdict.status == "valid"
    assert opened.anchor == pack.items[0].anchor
    assert registered.registered == "summary/s-1"
    stored = await corpus.rt.lineage.get(corpus.tenant, "summary", "s-1")
    assert stored is not None and stored["text"] == "A summary."


# --- refusals ----------------------------------------------------------------------------


async def test_a_principal_or_purpose_beyond_the_token_is_forbidden_naming_it(
    corpus: Pipeline, api: str
) -> None:
    async with AsyncGovindexClient(
        api, BOUND, tenant=corpus.tenant, purpose="support", principals=["group:hr"]
    ) as client:
        for call in (client.search(QUERY), client.pack(QUERY)):
            with pytest.raises(Forbidden) as refused:
                await call
            assert refused.value.status == 403 and refused.value.error == "forbidden"
            assert refused.value.field == "subject.principals"
            assert "'group:hr'" in refused.value.reason and "'rag-app'" in refused.value.reason
            assert SECRET not in str(refused.value)
        with pytest.raises(Forbidden) as opening:
            await client.chunk("0123")
        assert opening.value.field == "principal" and "'group:hr'" in opening.value.reason
        with pytest.raises(Forbidden) as purpose:
            await client.search(QUERY, principals=["group:eng"], purpose="audit")
        assert purpose.value.field == "purpose" and "'audit'" in purpose.value.reason

    def sync() -> None:
        with (
            GovindexClient(api, BOUND, tenant=corpus.tenant, purpose="support") as client,
            pytest.raises(Forbidden) as both,
        ):
            # Alongside a principal it may assert, still refused: never narrowed.
            client.search(QUERY, principals=["group:eng", "group:hr"])
        assert "'group:hr'" in both.value.reason

    await asyncio.to_thread(sync)


async def test_a_credential_that_proves_nothing_is_unauthorized(corpus: Pipeline, api: str) -> None:
    async with AsyncGovindexClient(
        api, "not-the-token-at-all", tenant=corpus.tenant, purpose="support"
    ) as client:
        with pytest.raises(Unauthorized) as refused:
            await client.search(QUERY, principals=["group:eng"])
    assert refused.value.status == 401 and refused.value.error == "unauthorized"

    def sync() -> None:
        with (
            GovindexClient(api, "", tenant=corpus.tenant, purpose="support") as client,
            pytest.raises(Unauthorized) as bare,
        ):
            client.pack(QUERY, principals=["group:eng"])
        assert bare.value.reason == "send Authorization: Bearer <token>"

    await asyncio.to_thread(sync)


async def test_an_anchor_the_subject_may_not_read_is_not_found_like_an_unknown_one(
    corpus: Pipeline, api: str
) -> None:
    hr_chunk = (await corpus.pg_chunks(HR_DOC))[0]["chunk_id"]
    async with AsyncGovindexClient(
        api, BOUND, tenant=corpus.tenant, purpose="support", principals=["group:eng"]
    ) as client:
        for chunk_id in (hr_chunk, "0" * 32):
            with pytest.raises(NotFound) as refused:
                await client.chunk(chunk_id)
            assert refused.value.status == 404
            assert refused.value.reason == "no such chunk for this subject at as_of"


async def test_a_body_past_the_routes_size_is_too_large(corpus: Pipeline, api: str) -> None:
    # 10,000 keys of ~900 characters: valid for the model, 9 MB for a route taking 8 MiB.
    keys = [f"{corpus.tenant}/{corpus.source}/{'d' * 880}-{i}" for i in range(10_000)]
    async with AsyncGovindexClient(api, BOUND, tenant=corpus.tenant) as client:
        with pytest.raises(TooLarge) as refused:
            await client.register_lineage(
                kind="summary", id="big", built_from=keys, location="s3://summaries/big"
            )
    assert refused.value.status == 413 and "larger than this route takes" in refused.value.reason


# --- retries -----------------------------------------------------------------------------


@pytest.fixture
async def keyless(
    corpus: Pipeline, tmp_path: Path
) -> AsyncIterator[tuple[str, IdentityProvider, JwtVerifier]]:
    """A read API whose JWKS file does not exist yet: a JWT is answered 503 (the identity
    provider's keys cannot be read) until the provider publishes its keys."""
    idp = IdentityProvider(tmp_path / "jwks.json", corpus.tenant)
    config = JwtConfig(
        jwks=str(idp.jwks), issuer=ISSUER, audience=AUDIENCE, refresh_interval_s=0.01
    )
    verifier = JwtVerifier(config)
    app = build_read_app(
        read_service(corpus.rt), corpus.rt.lineage, _tokens(corpus.tenant), jwt_verifier=verifier
    )
    listener = Listener("read_api", "127.0.0.1", 0)
    url = await listener.start(app)
    yield url, idp, verifier
    await listener.stop()


async def test_a_503_is_retried_until_the_read_api_answers(
    corpus: Pipeline, keyless: tuple[str, IdentityProvider, JwtVerifier]
) -> None:
    url, idp, verifier = keyless
    key = rsa_key()
    token = idp.token("rsa-1", key=key)  # signed with a key not published yet
    async with AsyncGovindexClient(
        url, token, tenant=corpus.tenant, purpose="support", retries=50, backoff=0.05
    ) as client:
        search = asyncio.create_task(client.search(QUERY))
        await _eventually(lambda: verifier.reads >= 1, "the first attempt")
        assert not search.done()  # answered 503, waiting to retry

        idp.publish("rsa-1", key)
        found = await search

    assert verifier.reads >= 2  # sent again after the 503
    assert ENG_DOC in _docs(found) and HR_DOC not in _docs(found)  # the JWT's group:eng


async def test_a_503_is_retried_a_bounded_number_of_times_then_raised(
    corpus: Pipeline, keyless: tuple[str, IdentityProvider, JwtVerifier]
) -> None:
    url, idp, verifier = keyless
    token = idp.token("rsa-1", key=rsa_key())

    def search() -> None:
        with GovindexClient(
            url, token, tenant=corpus.tenant, purpose="support", retries=2, backoff=0.05
        ) as client:
            client.search(QUERY)

    with pytest.raises(Unavailable) as refused:
        await asyncio.to_thread(search)

    assert refused.value.status == 503 and refused.value.attempts == 3
    assert verifier.reads == 3  # each attempt reached the read API, and no more did
    assert "identity provider" in refused.value.reason


async def test_ready_says_what_is_down_without_raising_or_retrying(corpus: Pipeline) -> None:
    dsn = urlparse(corpus.settings.pg_dsn or "")
    assert dsn.hostname and dsn.port
    proxy = CuttableProxy(dsn.hostname, dsn.port)
    await proxy.start()
    proxied = dsn._replace(netloc=f"{dsn.username}:{dsn.password}@127.0.0.1:{proxy.port}")
    settings = corpus.settings.model_copy(update={"pg_dsn": proxied.geturl()})
    try:
        async with Runtime(settings, pool_size=2) as rt:
            server = ReadServer(rt, _tokens(corpus.tenant))
            url = await server.start()
            try:
                async with AsyncGovindexClient(url, BOUND, retries=5, backoff=5.0) as client:
                    assert (await client.ready()).ok
                    await proxy.cut()
                    started = time.monotonic()
                    down = await client.ready()
                    assert time.monotonic() - started < 5.0  # answered once, not retried
            finally:
                await server.stop()
    finally:
        await proxy.cut()
    assert not down.ok and list(down.down) == ["postgres"]


def test_only_a_503_is_retried_and_never_a_4xx() -> None:
    """The retry policy, counted on httpx's own test transport (no server of ours is
    replaced: the real read API's 503s are above)."""
    empty: dict[str, Any] = {"as_of": "2026-01-01T00:00:00Z", "known_at": None, "hits": []}

    def scripted(*statuses: int) -> tuple[list[httpx.Request], httpx.MockTransport]:
        sent: list[httpx.Request] = []
        answers = iter(statuses)

        def answer(request: httpx.Request) -> httpx.Response:
            sent.append(request)
            status = next(answers)
            if status == 200:
                return httpx.Response(200, json=empty)
            body = {"error": "refused", "field": "query", "reason": f"status {status}"}
            return httpx.Response(status, json=body)

        return sent, httpx.MockTransport(answer)

    def client(transport: httpx.MockTransport, retries: int = 3) -> GovindexClient:
        return GovindexClient(
            "http://read.test",
            BOUND,
            tenant="acme",
            purpose="support",
            principals=["group:eng"],
            retries=retries,
            backoff=0.0,
            transport=transport,
        )

    sent, transport = scripted(503, 503, 200)
    assert client(transport).search("q").hits == []
    assert len(sent) == 3
    assert json.loads(sent[0].content) == json.loads(sent[2].content)  # the same request

    sent, transport = scripted(503, 503, 503, 503)
    with pytest.raises(Unavailable) as exhausted:
        client(transport, retries=2).search("q")
    assert len(sent) == 3 and exhausted.value.attempts == 3

    for status, error in ((400, BadRequest), (401, Unauthorized), (403, Forbidden)):
        sent, transport = scripted(status, 200)
        with pytest.raises(error) as refused:
            client(transport).search("q")
        assert len(sent) == 1 and refused.value.field == "query"
    sent, transport = scripted(404, 200)
    with pytest.raises(NotFound):
        client(transport).chunk("c1")
    assert len(sent) == 1
    assert sent[0].headers["Authorization"] == f"Bearer {BOUND}"
    assert sent[0].url.params.multi_items() == [
        ("tenant", "acme"),
        ("purpose", "support"),
        ("principal", "group:eng"),
    ]


def test_the_clients_value_rules_are_the_servers() -> None:
    """The client distribution imports nothing of the server's, so the rules it copies
    (identifiers, principals, chunk kinds, control characters) must say what the server's
    do; the read API itself validates with the client's."""
    assert [k.value for k in _types.ChunkKind] == [k.value for k in records.ChunkKind]
    for rule, copy, values in (
        (records.Slug, _types.Slug, ["acme", "a.b-c_d", "-acme", "a/b", "x" * 129, "é"]),
        (
            records.Principal,
            _types.Principal,
            ["group:eng", "user:a b", "a,b", "x\x00", "x\x85", "ok:é", "", "p" * 257],
        ),
    ):
        server, client = TypeAdapter[str](rule), TypeAdapter[str](copy)
        for value in values:
            assert _accepts(server, value) == _accepts(client, value), value
    for code in [*range(0x00, 0xA1), 0x2028, 0x2029]:
        text = f"a{chr(code)}b"
        for single_line in (True, False):
            assert _types.has_control(text, single_line=single_line) == inputs.has_control(
                text, single_line=single_line
            ), (hex(code), single_line)
    for shown in ("short", "x" * 500, list(range(200))):
        assert _types.quote(shown) == inputs.quote(shown)


def _accepts(adapter: TypeAdapter[str], value: str) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True
