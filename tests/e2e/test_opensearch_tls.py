"""OpenSearch over real TLS: a loopback TLS listener in front of the embedded
OpenSearch-compatible server; the real adapter verifies it against a CA made here, sends
basic auth from settings (seen in the request's first bytes: a byte proxy cannot check a
password, so the header is checked as sent), and presents a client certificate where the
listener asks for one. Without the CA it fails with a certificate error."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from govindex.adapters.opensearch import OpenSearchIndex, OpenSearchSecurity
from govindex.core.errors import TransientError
from tests.support.tls import Pki, TlsProxy, make_pki

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("opensearch-tls"))


@pytest.fixture
def upstream(stack: dict[str, str]) -> int:
    port = urlsplit(stack["opensearch_url"]).port
    assert port is not None
    return port


@pytest.fixture
def proxy(pki: Pki, upstream: int) -> Iterator[TlsProxy]:
    p = TlsProxy(pki, upstream).start()
    yield p
    p.stop()


@pytest.fixture
def mtls(pki: Pki, upstream: int) -> Iterator[TlsProxy]:
    p = TlsProxy(pki, upstream, require_client_cert=True).start()
    yield p
    p.stop()


def alias() -> str:
    return f"tls{uuid.uuid4().hex[:10]}"


async def test_ca_and_basic_auth(proxy: TlsProxy, pki: Pki) -> None:
    security = OpenSearchSecurity(username="indexer", password="s3cret", ca_file=pki.ca)
    # The URL's own credentials are replaced by the settings'.
    index = OpenSearchIndex(f"https://old:creds@127.0.0.1:{proxy.port}", alias(), security=security)
    try:
        await index.ensure_template()
        assert await index.count() == 0
    finally:
        await index.close()
    assert not proxy.handshake_errors
    expected = b"authorization: basic " + base64.b64encode(b"indexer:s3cret").lower()
    assert proxy.first_bytes
    assert all(expected in first.lower() for first in proxy.first_bytes)
    assert not any(base64.b64encode(b"old:creds") in first for first in proxy.first_bytes)


async def test_without_the_ca_a_certificate_error(proxy: TlsProxy, pki: Pki) -> None:
    index = OpenSearchIndex(
        f"https://127.0.0.1:{proxy.port}",
        alias(),
        security=OpenSearchSecurity(ca_file=pki.other_ca),
    )
    try:
        with pytest.raises(TransientError) as raised:
            await index.ensure_template()
    finally:
        await index.close()
    assert "CERTIFICATE_VERIFY_FAILED" in str(raised.value) or "certificate" in str(raised.value)
    assert not proxy.first_bytes  # nothing was sent over an unverified connection


async def test_client_certificate(mtls: TlsProxy, pki: Pki) -> None:
    with_cert = OpenSearchSecurity(
        ca_file=pki.ca, client_cert=pki.client_cert, client_key=pki.client_key
    )
    index = OpenSearchIndex(f"https://127.0.0.1:{mtls.port}", alias(), security=with_cert)
    try:
        await index.ensure_template()
        assert await index.count() == 0
    finally:
        await index.close()
    assert not mtls.handshake_errors

    without = OpenSearchIndex(
        f"https://127.0.0.1:{mtls.port}", alias(), security=OpenSearchSecurity(ca_file=pki.ca)
    )
    try:
        with pytest.raises(TransientError):
            await without.ensure_template()
    finally:
        await without.close()


def test_pki_files_exist(pki: Pki) -> None:
    assert all(Path(p).is_file() for p in vars(pki).values())
