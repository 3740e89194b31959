"""The subject is proven (invariant 8), through the read API on the real embedded servers: a
read answers only for the principals, tenants and purposes its credential proves (a bound
service token, or a JWT verified against a JWKS file with real signatures); anything more is
a 403 naming it, never a silent narrowing. And the read API's probes."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from govindex.cli.common import Failure
from govindex.cli.stack import _start_read_api
from govindex.control.workers import Workers
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from reader.app import ReadServer, jwt_config, read_service
from reader.credentials import JwksUnavailable, JwtConfig, JwtVerifier, TokenSettingsError
from reader.http import build_read_app
from reader.models import SearchRequest
from tests.support.jwt import AUDIENCE, ISSUER, IdentityProvider, rsa_key
from tests.support.pipeline import Pipeline
from tests.support.proxy import CuttableProxy

pytestmark = pytest.mark.e2e

BOUND = "bound-read-token-0123456789"
SECRET = "ZEBRAQUARTZ7731"  # only in the HR-only document
ENG_DOC = "runbooks/orders-db.md"
HR_DOC = "hr/payroll.md"
RUNBOOK = """# Orders DB failover

Promote the replica when the primary of orders-db stops answering: check replication lag on
orders-db, then promote the replica with `pg_ctl promote`.
"""
HR_ONLY = f"""# Payroll failover

The payroll batch key is {SECRET}; never share it. Restart the replica after failover.
"""


@pytest.fixture(scope="module")
async def corpus(module_runtime: tuple[Runtime, Workers]) -> AsyncIterator[Pipeline]:
    """One tenant for the module: a runbook group:eng may read (the source's default ACL)
    and an HR-only document, both about failover."""
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
    """GOVINDEX_READ_TOKENS as the setting takes it: one bound token."""
    binding = {"name": "rag-app", "tenants": [tenant], "principals": ["group:eng*"]}
    binding["purposes"] = ["support"]
    return dict(Settings(read_tokens={BOUND: binding}).read_tokens)


@pytest.fixture
def idp(tmp_path: Path, corpus: Pipeline) -> IdentityProvider:
    provider = IdentityProvider(tmp_path / "jwks.json", corpus.tenant)
    provider.publish("rsa-1")
    return provider


@pytest.fixture
async def api(corpus: Pipeline, idp: IdentityProvider) -> AsyncIterator[str]:
    settings = Settings(read_jwks=str(idp.jwks), read_jwt_issuer=ISSUER, read_jwt_audience=AUDIENCE)
    server = ReadServer(corpus.rt, _tokens(corpus.tenant), jwt=jwt_config(settings))
    url = await server.start()
    yield url
    await server.stop()


async def _send(
    url: str,
    path: str,
    credential: str | None,
    body: Any = None,
    params: list[tuple[str, str]] | None = None,
) -> tuple[int, Any, str | None]:
    """The status, the JSON answer and the WWW-Authenticate header; POST with a body, else
    GET (a probe, without a credential)."""
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    method = "GET" if body is None else "POST"
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url + path, json=body, params=params, headers=headers) as resp,
    ):
        return resp.status, json.loads(await resp.read()), resp.headers.get("WWW-Authenticate")


def _search(tenant: str, subject: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "tenant": tenant,
        "purpose": "support",
        "query": "payroll orders-db failover replica",
        "cache": "bypass",
        **fields,
    }
    if subject is not None:
        body["subject"] = subject
    return body


def _docs(answer: dict[str, Any]) -> set[str]:
    return {hit["anchor"]["doc_id"] for hit in answer["hits"]}


# --- bound service tokens --------------------------------------------------------------


async def test_a_bound_token_asserting_group_hr_is_403_naming_it_and_the_token(
    corpus: Pipeline, api: str
) -> None:
    hr = {"principals": ["group:hr"]}
    for path in ("/v1/search", "/v1/packs"):
        status, refused, _ = await _send(api, path, BOUND, _search(corpus.tenant, hr))
        assert status == 403 and refused["error"] == "forbidden", refused
        assert refused["field"] == "subject.principals"
        assert "'group:hr'" in refused["reason"] and "'rag-app'" in refused["reason"]
        assert "['group:eng*']" in refused["reason"]  # what it may assert instead
        assert SECRET not in json.dumps(refused)
    # Alongside a principal it may assert, still refused: never narrowed to group:eng.
    both = {"principals": ["group:eng", "group:hr"]}
    status, refused, _ = await _send(api, "/v1/search", BOUND, _search(corpus.tenant, both))
    assert status == 403 and "'group:hr'" in refused["reason"], refused
    query = [("tenant", corpus.tenant), ("principal", "group:hr"), ("purpose", "support")]
    status, refused, _ = await _send(api, "/v1/chunks/0123", BOUND, params=query)
    assert status == 403 and refused["field"] == "principal", refused
    assert "'group:hr'" in refused["reason"] and "'rag-app'" in refused["reason"]


async def test_a_bound_token_asserting_group_eng_reads_exactly_what_group_eng_may_see(
    corpus: Pipeline, api: str
) -> None:
    eng = {"principals": ["group:eng"]}
    status, found, _ = await _send(api, "/v1/search", BOUND, _search(corpus.tenant, eng))
    assert status == 200, found
    assert ENG_DOC in _docs(found) and HR_DOC not in _docs(found)
    assert SECRET not in json.dumps(found)
    # The very answer the service gives group:eng in process: nothing narrowed or added.
    in_process = await read_service(corpus.rt).search(
        SearchRequest.model_validate(_search(corpus.tenant, eng))
    )
    assert found["hits"] == in_process.model_dump(mode="json")["hits"]
    # A pack's manifest names the subject that was admitted.
    status, pack, _ = await _send(api, "/v1/packs", BOUND, _search(corpus.tenant, eng))
    assert status == 200 and pack["items"], pack
    assert pack["manifest"]["subject"] == {"principals": ["group:eng"], "scopes": []}
    status, verdict, _ = await _send(api, "/v1/packs/verify", BOUND, {"manifest": pack["manifest"]})
    assert status == 200 and verdict["status"] == "valid", verdict
    item = pack["items"][0]["anchor"]
    query = [("tenant", corpus.tenant), ("principal", "group:eng"), ("purpose", "support")]
    status, opened, _ = await _send(api, f"/v1/chunks/{item['chunk_id']}", BOUND, params=query)
    assert status == 200 and opened["anchor"] == item, opened


async def test_a_bound_token_must_name_the_principals_it_reads_for(
    corpus: Pipeline, api: str
) -> None:
    for subject in (None, {}, {"scopes": []}):
        status, refused, _ = await _send(api, "/v1/search", BOUND, _search(corpus.tenant, subject))
        assert status == 400 and refused["field"] == "subject.principals", refused
        assert "carries no subject" in refused["reason"] and "'rag-app'" in refused["reason"]
    query = [("tenant", corpus.tenant), ("purpose", "support")]
    status, refused, _ = await _send(api, "/v1/chunks/0123", BOUND, params=query)
    assert status == 400 and refused["field"] == "principal", refused


async def test_purposes_and_tenants_outside_the_credential_are_403(
    corpus: Pipeline, api: str
) -> None:
    eng = {"principals": ["group:eng"]}
    body = _search(corpus.tenant, eng, purpose="audit")
    status, refused, _ = await _send(api, "/v1/search", BOUND, body)
    assert status == 403 and refused["field"] == "purpose", refused
    assert "'audit'" in refused["reason"] and "'rag-app'" in refused["reason"]
    assert "['support']" in refused["reason"]
    query = [("tenant", corpus.tenant), ("principal", "group:eng"), ("purpose", "audit")]
    status, refused, _ = await _send(api, "/v1/chunks/0123", BOUND, params=query)
    assert status == 403 and refused["field"] == "purpose", refused
    status, refused, _ = await _send(api, "/v1/search", BOUND, _search("someone-else", eng))
    assert status == 403 and refused["field"] == "tenant", refused
    assert "'someone-else'" in refused["reason"] and "'rag-app'" in refused["reason"]


# --- verified JWTs ---------------------------------------------------------------------


@pytest.mark.parametrize(("groups", "sees_hr"), [(["hr"], True), (["eng"], False)])
async def test_a_jwt_sees_the_hr_only_document_only_when_it_carries_group_hr(
    corpus: Pipeline, api: str, idp: IdentityProvider, groups: list[str], sees_hr: bool
) -> None:
    token = idp.token(groups=groups)

    status, found, _ = await _send(api, "/v1/search", token, _search(corpus.tenant))

    assert status == 200, found
    assert (HR_DOC in _docs(found)) is sees_hr
    assert (SECRET in json.dumps(found)) is sees_hr
    assert (ENG_DOC in _docs(found)) is not sees_hr  # the runbook is group:eng's


async def test_a_jwt_with_the_subject_omitted_reads_as_the_tokens_principals_and_scopes(
    corpus: Pipeline, api: str, idp: IdentityProvider
) -> None:
    token = idp.token(groups=["eng", "oncall"], scope="docs.read docs.write")
    own = {"principals": ["group:eng", "group:oncall", "user:alice"]}
    for subject in (None, {}, {"principals": None, "scopes": None}):
        status, pack, _ = await _send(api, "/v1/packs", token, _search(corpus.tenant, subject))
        assert status == 200 and pack["items"], pack
        assert pack["manifest"]["subject"] == {**own, "scopes": ["docs.read", "docs.write"]}
    # A subset the token carries is admitted as asked; `scopes: []` means none.
    subset = {"principals": ["group:eng"], "scopes": []}
    status, pack, _ = await _send(api, "/v1/packs", token, _search(corpus.tenant, subset))
    assert status == 200 and pack["manifest"]["subject"] == subset, pack
    # Opening an anchor without naming principals: the token's own.
    anchor = pack["items"][0]["anchor"]
    query = [("tenant", corpus.tenant), ("purpose", "support")]
    status, opened, _ = await _send(api, f"/v1/chunks/{anchor['chunk_id']}", token, params=query)
    assert status == 200 and opened["anchor"] == anchor, opened


@pytest.mark.parametrize(
    ("subject", "field", "named"),
    [
        ({"principals": ["user:alice", "group:hr"]}, "subject.principals", "principal 'group:hr'"),
        ({"principals": ["user:bob"]}, "subject.principals", "principal 'user:bob'"),
        ({"scopes": ["docs.read", "admin"]}, "subject.scopes", "scope 'admin'"),
    ],
)
async def test_a_jwt_asserting_more_than_it_carries_is_403_naming_it(
    corpus: Pipeline,
    api: str,
    idp: IdentityProvider,
    subject: dict[str, Any],
    field: str,
    named: str,
) -> None:
    token = idp.token(groups=["eng"])

    status, refused, _ = await _send(api, "/v1/search", token, _search(corpus.tenant, subject))

    assert status == 403 and refused["field"] == field, refused
    assert named in refused["reason"] and f"'jwt:{ISSUER}' (sub 'alice')" in refused["reason"]


async def test_forged_stale_and_misdirected_jwts_are_401(
    corpus: Pipeline, api: str, idp: IdentityProvider
) -> None:
    now = int(time.time())
    forged = rsa_key()
    cases = {
        "wrong signature": (idp.token(key=forged), "its signature does not verify"),
        "expired": (idp.token(iat=now - 7200, exp=now - 3600), "it has expired"),
        "not yet valid": (idp.token(nbf=now + 3600), "it is not valid yet"),
        "wrong aud": (idp.token(aud="another-app"), "it is for another audience"),
        "wrong iss": (idp.token(iss="https://evil.example.test"), "it is from another issuer"),
        "alg none": (idp.unsigned(), "algorithm 'none' is not accepted"),
        "HS256 keyed with the public key": (
            idp.hs256_with_public_key(),
            "algorithm 'HS256' is not accepted",
        ),
        "unknown kid": (idp.token("not-published", key=forged), "its signing key (kid) is unknown"),
    }
    body = _search(corpus.tenant)
    for case, (token, said) in cases.items():
        status, refused, challenge = await _send(api, "/v1/search", token, body)
        assert status == 401 and refused["error"] == "unauthorized", (case, refused)
        assert refused["reason"] == f"the token is not valid: {said}", (case, refused)
        assert challenge == 'Bearer error="invalid_token"', case
        assert token not in json.dumps(refused)
    status, refused, challenge = await _send(api, "/v1/search", None, body)
    assert status == 401 and challenge == "Bearer", refused
    assert refused["reason"] == "send Authorization: Bearer <token>"
    assert (await _send(api, "/v1/search", idp.token(), body))[0] == 200  # the control


async def test_a_jwt_for_one_tenant_acting_for_another_is_403(
    corpus: Pipeline, api: str, idp: IdentityProvider
) -> None:
    token = idp.token()
    status, refused, _ = await _send(api, "/v1/search", token, _search("someone-else"))
    assert status == 403 and refused["field"] == "tenant", refused
    assert "tenant 'someone-else'" in refused["reason"] and "(sub 'alice')" in refused["reason"]
    status, pack, _ = await _send(api, "/v1/packs", token, _search(corpus.tenant))
    assert status == 200, pack
    foreign = {**pack["manifest"], "tenant": "someone-else"}
    status, refused, _ = await _send(api, "/v1/packs/verify", token, {"manifest": foreign})
    assert status == 403 and refused["field"] == "manifest.tenant", refused
    artifact = {
        "tenant_id": "someone-else",
        "kind": "summary",
        "id": "s-1",
        "built_from": ["someone-else/src/doc.md"],
        "location": "s3://summaries/s-1",
    }
    status, refused, _ = await _send(api, "/v1/lineage", token, artifact)
    assert status == 403 and refused["field"] == "tenant_id", refused


async def test_a_key_rotated_into_the_jwks_file_verifies_without_restarting_the_read_api(
    corpus: Pipeline, api: str, idp: IdentityProvider
) -> None:
    body = _search(corpus.tenant)
    assert (await _send(api, "/v1/search", idp.token(), body))[0] == 200

    idp.publish("rsa-2")

    status, found, _ = await _send(api, "/v1/search", idp.token("rsa-2", sub="bob"), body)
    assert status == 200 and ENG_DOC in _docs(found), found
    assert (await _send(api, "/v1/search", idp.token("rsa-1"), body))[0] == 200


async def test_an_unreadable_jwks_is_503_for_a_jwt_and_tokens_still_read(
    corpus: Pipeline, tmp_path: Path, idp: IdentityProvider
) -> None:
    config = JwtConfig(jwks=str(tmp_path / "absent.json"), issuer=ISSUER, audience=AUDIENCE)
    app = build_read_app(
        read_service(corpus.rt),
        corpus.rt.lineage,
        _tokens(corpus.tenant),
        jwt_verifier=JwtVerifier(config),
    )
    async with TestClient(TestServer(app)) as client:
        resp = await client.post(
            "/v1/search",
            json=_search(corpus.tenant),
            headers={"Authorization": f"Bearer {idp.token()}"},
        )
        assert resp.status == 503
        refused = await resp.json()
        assert refused["error"] == "unavailable" and "identity provider" in refused["reason"]
        assert "absent.json" not in refused["reason"]  # where the keys live stays in the log
        resp = await client.post(
            "/v1/search",
            json=_search(corpus.tenant, {"principals": ["group:eng"]}),
            headers={"Authorization": f"Bearer {BOUND}"},
        )
        assert resp.status == 200


# --- starting ----------------------------------------------------------------------------


async def test_the_read_api_refuses_to_start_with_a_clear_message(
    corpus: Pipeline, tmp_path: Path, idp: IdentityProvider
) -> None:
    with pytest.raises(ValueError, match="GOVINDEX_READ_JWT_ISSUER and GOVINDEX_READ_JWT_AUDIENCE"):
        jwt_config(Settings(read_jwks=str(idp.jwks)))
    with pytest.raises(ValueError, match="GOVINDEX_READ_JWT_AUDIENCE is not"):
        jwt_config(Settings(read_jwks=str(idp.jwks), read_jwt_issuer=ISSUER))
    with pytest.raises(ValueError, match="without GOVINDEX_READ_JWKS"):
        jwt_config(Settings(read_jwt_issuer=ISSUER))
    plain = Settings(
        read_jwks="http://idp.example.test/jwks", read_jwt_issuer=ISSUER, read_jwt_audience=AUDIENCE
    )
    with pytest.raises(ValueError, match=r"GOVINDEX_READ_JWKS is refused: .*must be https"):
        jwt_config(plain)

    short = "too-short-token"
    with pytest.raises(TokenSettingsError, match="too short") as caught:
        await ReadServer(corpus.rt, {short: [corpus.tenant]}).start()
    assert short not in str(caught.value)
    missing = JwtConfig(jwks=str(tmp_path / "absent.json"), issuer=ISSUER, audience=AUDIENCE)
    with pytest.raises(JwksUnavailable, match="cannot read the JWKS file"):
        await ReadServer(corpus.rt, _tokens(corpus.tenant), jwt=missing).start()

    no_issuer = corpus.settings.model_copy(update={"read_jwks": str(idp.jwks)})
    with pytest.raises(Failure, match="the read API cannot start: GOVINDEX_READ_JWKS is set"):
        await _start_read_api(corpus.rt, no_issuer, False, {})
    with pytest.raises(Failure, match="cannot start: no credential to accept"):
        await _start_read_api(corpus.rt, corpus.settings, False, {})


async def test_govindex_ups_laptop_token_says_it_binds_tenants_only(corpus: Pipeline) -> None:
    extra: dict[str, str] = {}
    server = await _start_read_api(corpus.rt, corpus.settings, True, extra)
    try:
        assert extra["read_token_binds"] == (
            "tenants only: any principal and purpose (a laptop token; use bound tokens or "
            "JWTs in production)"
        )
        url, token = extra["read_url"], extra["read_token"]
        # What the laptop token's holder asserts is what it reads as: it says so above.
        hr = _search(corpus.tenant, {"principals": ["group:hr"]})
        status, found, _ = await _send(url, "/v1/search", token, hr)
        assert status == 200 and HR_DOC in _docs(found), found
        status, refused, _ = await _send(url, "/v1/search", token, _search(corpus.tenant))
        assert status == 400 and refused["field"] == "subject.principals", refused
    finally:
        await server.stop()


# --- probes ------------------------------------------------------------------------------


async def test_readyz_names_postgres_while_it_is_unreachable_and_livez_stays_200(
    corpus: Pipeline,
) -> None:
    assert corpus.settings.pg_dsn
    dsn = urlparse(corpus.settings.pg_dsn)
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
                for path in ("/livez", "/readyz", "/healthz"):  # no credential needed
                    assert (await _send(url, path, None))[:2] == (200, {"ok": True}), path

                await proxy.cut()
                for path in ("/readyz", "/healthz"):
                    status, answer = (await _send(url, path, None))[:2]
                    assert status == 503 and answer["ok"] is False, (path, answer)
                    assert list(answer["down"]) == ["postgres"] and answer["down"]["postgres"]
                assert (await _send(url, "/livez", None))[:2] == (200, {"ok": True})

                await proxy.start()
                deadline = asyncio.get_running_loop().time() + 60
                while (await _send(url, "/readyz", None))[0] != 200:
                    assert asyncio.get_running_loop().time() < deadline, "still not ready"
                    await asyncio.sleep(0.5)
                assert (await _send(url, "/readyz", None))[:2] == (200, {"ok": True})
                eng = _search(corpus.tenant, {"principals": ["group:eng"]})
                assert (await _send(url, "/v1/search", BOUND, eng))[0] == 200
            finally:
                await server.stop()
    finally:
        await proxy.cut()
