"""OpenSearch with AWS SigV4, for real and offline: a loopback HTTP proxy in front of the
embedded OpenSearch-compatible server records every request the product sends and forwards
it. The Runtime, built from Settings with GOVINDEX_OPENSEARCH_AWS_SIGV4 on and pointed at the
proxy, signs with opensearch-py's async signer over botocore's credential chain (here the
environment; no profile file, no metadata service). Each recorded request's signature is
recomputed from the wire with botocore's own SigV4 code and must match; the answers come
from the real server."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiohttp
import pytest
from aiohttp import web

from govindex.adapters.opensearch.client import new_client
from govindex.control.bootstrap import prepare
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from tests.support.builders import TEXT, manifest, unique, version_plan
from tests.support.proxy import free_port

pytestmark = pytest.mark.integration

# Not real keys: AWS's documentation example shapes, unique enough to be found in headers.
KEY_ID = "AKIDGOVINDEXSIGV4TEST"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYGOVINDEXKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEGovindexSessionToken//example="
REGION = "eu-west-1"

AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 "
    r"Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)"
    r"/aws4_request, "
    r"SignedHeaders=(?P<signed>[a-z0-9-]+(?:;[a-z0-9-]+)*), "
    r"Signature=(?P<signature>[0-9a-f]{64})"
)


@dataclass(frozen=True)
class Recorded:
    """One request as it reached the proxy: what a SigV4 gateway would verify."""

    method: str
    raw_path: str  # path and query string exactly as on the wire
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def header(self, name: str) -> str | None:
        values = self.all(name)
        assert len(values) <= 1, (name, values)
        return values[0] if values else None


class RecordingProxy:
    """Records every request, then forwards it (its hop-by-hop headers aside) to the real
    server and hands its answer back."""

    def __init__(self, target_url: str) -> None:
        self.target = target_url.rstrip("/")
        self.port = free_port()
        self.requests: list[Recorded] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(
            Recorded(request.method, request.raw_path, tuple(request.headers.items()), body)
        )
        assert self._session is not None
        hop = ("host", "content-length", "transfer-encoding", "connection")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in hop}
        async with self._session.request(
            request.method, self.target + request.raw_path, data=body, headers=headers
        ) as upstream:
            payload = await upstream.read()
            passed = {
                k: v
                for k, v in upstream.headers.items()
                if k.lower() in ("content-type", "content-encoding")
            }
            return web.Response(status=upstream.status, body=payload, headers=passed)


def recompute(
    request: Recorded,
    base_url: str,
    *,
    secret_key: str = SECRET_KEY,
    token: str | None = SESSION_TOKEN,
    region: str = REGION,
    service: str = "es",
) -> tuple[str, str, str]:
    """(scope, signed headers, signature) that botocore's SigV4 computes for the request
    as recorded on the wire: what AWS does on its side to check it.

    The request is rebuilt from the recorded method, the URL the client addressed (the
    proxy's host and port, the raw path and query), the recorded body and the recorded
    values of exactly the headers the request says it signed (SignedHeaders): the HTTP
    client adds headers of its own after signing (Accept-Encoding, Content-Length...), and
    a verifier signs over the listed ones only. Rather than patching the clock botocore's
    `add_auth` reads (its name has moved between botocore versions), the recorded
    X-Amz-Date is put in the request's context as the timestamp and botocore's own
    canonical request, string to sign and signing-key derivation are run on it: the same
    methods `add_auth` calls, with no clock involved.
    """
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    authorization = request.header("authorization")
    assert authorization is not None
    match = AUTHORIZATION.fullmatch(authorization)
    assert match, authorization
    headers: dict[str, str] = {}
    for name in match["signed"].split(";"):
        value = request.header(name)
        assert value is not None, f"{name} is signed but was not sent"
        headers[name] = value
    rebuilt = AWSRequest(
        method=request.method, url=base_url + request.raw_path, data=request.body, headers=headers
    )
    timestamp = request.header("x-amz-date")
    assert timestamp is not None
    rebuilt.context["timestamp"] = timestamp
    signer = SigV4Auth(Credentials(KEY_ID, secret_key, token), service, region)
    canonical = signer.canonical_request(rebuilt)
    signature = signer.signature(signer.string_to_sign(rebuilt, canonical), rebuilt)
    signed = signer.signed_headers(signer.headers_to_sign(rebuilt))
    return str(signer.scope(rebuilt)), str(signed), str(signature)


def check_signed(
    requests: list[Recorded],
    base_url: str,
    *,
    token: str | None,
    service: Literal["es", "aoss"],
) -> None:
    """Every request carries a SigV4 signature that botocore, recomputing it from the wire,
    agrees with; with a wrong secret it would not."""
    assert requests
    for request in requests:
        what = f"{request.method} {request.raw_path}"
        authorization = request.all("authorization")
        assert len(authorization) == 1, (what, authorization)  # no basic auth beside it
        assert not authorization[0].lower().startswith("basic"), what
        match = AUTHORIZATION.fullmatch(authorization[0])
        assert match, (what, authorization[0])
        assert (match["key"], match["region"], match["service"]) == (KEY_ID, REGION, service)

        amz_date = request.header("x-amz-date")
        assert amz_date is not None and re.fullmatch(r"\d{8}T\d{6}Z", amz_date), what
        assert match["date"] == amz_date[:8]
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        assert abs((datetime.now(UTC) - signed_at).total_seconds()) < 600  # AWS's window

        # The payload hash is sent and signed, and is the hash of the body that arrived:
        # the body is bound to the signature.
        content_sha = request.header("x-amz-content-sha256")
        assert content_sha == hashlib.sha256(request.body).hexdigest(), what
        signed = match["signed"].split(";")
        assert {"host", "x-amz-date", "x-amz-content-sha256"} <= set(signed), (what, signed)
        if token is None:
            assert request.header("x-amz-security-token") is None, what
        else:
            assert request.header("x-amz-security-token") == token, what
            assert "x-amz-security-token" in signed, (what, signed)
        assert request.header("host") == base_url.removeprefix("http://"), what

        scope, signed_headers, signature = recompute(
            request, base_url, token=token, service=service
        )
        assert scope == f"{KEY_ID}/{amz_date[:8]}/{REGION}/{service}/aws4_request", what
        assert signed_headers == match["signed"], what
        assert signature == match["signature"], what
        # The check can fail: another secret, region or service signs differently.
        wrong_secret = recompute(
            request, base_url, secret_key=SECRET_KEY + "x", token=token, service=service
        )
        assert wrong_secret[2] != match["signature"], what
        wrong_region = recompute(
            request, base_url, region="us-east-1", token=token, service=service
        )
        assert wrong_region[2] != match["signature"], what


@pytest.fixture
def aws_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's credential chain finds the environment's keys, and nothing else: no
    profile or shared file of this machine, no instance metadata service."""
    pytest.importorskip("botocore", reason="the `aws` extra (botocore) is not installed")
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CREDENTIAL_EXPIRATION",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
async def proxy(stack: dict[str, str]) -> AsyncIterator[RecordingProxy]:
    p = RecordingProxy(stack["opensearch_url"])
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


def signed_settings(
    migrated: dict[str, str],
    namespace: str,
    state_dir: Path,
    proxy: RecordingProxy,
    **security: Any,
) -> Settings:
    """The test's deployment, its OpenSearch behind the proxy, with SigV4 on. The URL carries
    a user and password of its own: with SigV4 they must not be sent."""
    fields: dict[str, Any] = {
        "pg_dsn": migrated["pg_dsn"],
        "kafka_bootstrap": migrated["kafka_bootstrap"],
        "opensearch_url": f"http://leaked:url-creds@127.0.0.1:{proxy.port}",
        "redis_url": migrated["redis_url"],
        "namespace": namespace,
        "state_dir": state_dir,
        "partitions": 2,
        "opensearch_aws_sigv4": True,
        "opensearch_aws_region": REGION,
        **security,
    }
    return Settings(**fields)


async def test_the_runtime_signs_every_request_and_the_real_server_answers(
    aws_env: None,
    monkeypatch: pytest.MonkeyPatch,
    proxy: RecordingProxy,
    migrated: dict[str, str],
    namespace: str,
    tmp_path: Path,
    stack: dict[str, str],
) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    settings = signed_settings(migrated, namespace, tmp_path, proxy)
    assert settings.opensearch_aws_service == "es"  # the default: OpenSearch Service domains

    # Start-up as the product does it: template, first generation and alias, all signed.
    await prepare(settings)
    source = manifest(unique("s"), unique("t"))
    chunks = version_plan(source, "signed.md", 1, TEXT).chunks
    async with Runtime(settings, pool_size=2) as rt:
        written = await rt.index.project(chunks)  # a _bulk with an NDJSON body
        assert (written.taken, dict(written.rejected)) == (len(chunks), {})
        await rt.index.refresh()
        counted = await rt.index.count()
        hits = await rt.index.search(  # a search with a JSON body
            text="replica",
            tenant_id=source.tenant,
            principals=["group:eng"],
            purpose="support",
            as_of=datetime.now(UTC),
            size=10,
        )

    # The answers are the real server's: asked directly, unsigned, it holds the same.
    direct = new_client(stack["opensearch_url"])
    try:
        held = await direct.count(index=settings.index_alias)
        found = await direct.search(
            index=settings.index_alias, body={"query": {"match": {"text": "replica"}}}
        )
    finally:
        await direct.close()
    assert counted == len(chunks) == held["count"]
    assert hits
    replica = {h["_id"] for h in found["hits"]["hits"]}
    assert {h["chunk_id"] for h in hits} == replica
    assert all("replica" in h["text"].lower() for h in hits)

    requests = proxy.requests
    bulks = [r for r in requests if r.method in ("POST", "PUT") and r.raw_path.endswith("/_bulk")]
    searches = [r for r in requests if r.raw_path.split("?")[0].endswith("/_search")]
    assert bulks and all(b.body for b in bulks)
    assert any(c.chunk_id.encode() in b.body for b in bulks for c in chunks)
    assert searches and all(b"replica" in s.body for s in searches)
    check_signed(requests, proxy.url, token=SESSION_TOKEN, service="es")
    # The URL's own user and password were dropped, not sent as basic auth.
    basic = base64.b64encode(b"leaked:url-creds").decode()
    sent = [value for r in requests for _, value in r.headers]
    assert not any("leaked" in value or basic in value for value in sent)


async def test_serverless_signs_for_aoss_without_a_session_token(
    aws_env: None,
    proxy: RecordingProxy,
    migrated: dict[str, str],
    namespace: str,
    tmp_path: Path,
    stack: dict[str, str],
) -> None:
    settings = signed_settings(migrated, namespace, tmp_path, proxy, opensearch_aws_service="aoss")
    async with Runtime(settings, pool_size=2) as rt:
        await rt.index.ensure_template()  # a PUT with a JSON body
        assert await rt.index.live_generation() is None  # a HEAD, answered 404

    direct = new_client(stack["opensearch_url"])
    try:
        template = await direct.indices.get_index_template(name=settings.index_alias)
    finally:
        await direct.close()
    (held,) = template["index_templates"]
    assert held["index_template"]["index_patterns"] == [f"{settings.index_alias}-g*"]

    puts = [r for r in proxy.requests if r.method == "PUT"]
    assert puts and all(p.body for p in puts)
    check_signed(proxy.requests, proxy.url, token=None, service="aoss")
