"""The one client and alias every part of the OpenSearch adapter shares; driver errors
translated at the boundary."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

import orjson
from opensearchpy import AsyncHttpConnection, AsyncOpenSearch, JSONSerializer
from opensearchpy import exceptions as os_exc

from govindex.core.errors import GovindexError, PermanentError, TransientError

if TYPE_CHECKING:
    from govindex.core.settings import Settings


class MissingAwsExtra(GovindexError):
    """SigV4 asked for without botocore installed."""


@dataclass(frozen=True)
class OpenSearchSecurity:
    """How the client proves itself and checks the server (GOVINDEX_OPENSEARCH_*): basic
    auth (replacing a URL's user and password), a CA bundle, a client certificate,
    certificate verification, or AWS SigV4 (signed with botocore's credentials)."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    verify_certs: bool = True
    aws_sigv4: bool = False
    aws_region: str | None = None
    aws_service: Literal["es", "aoss"] = "es"

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenSearchSecurity:
        s = settings
        return cls(
            username=s.opensearch_username,
            password=(
                None if s.opensearch_password is None else s.opensearch_password.get_secret_value()
            ),
            ca_file=s.opensearch_ca_file,
            client_cert=s.opensearch_client_cert,
            client_key=s.opensearch_client_key,
            verify_certs=s.opensearch_verify_certs,
            aws_sigv4=s.opensearch_aws_sigv4,
            aws_region=s.opensearch_aws_region,
            aws_service=s.opensearch_aws_service,
        )


NO_SECURITY: Final = OpenSearchSecurity()


def sigv4_auth(region: str, service: str) -> Any:
    """opensearch-py's async SigV4 signer over botocore's credential chain."""
    try:  # the optional extra `aws`; imported by name, as it may be absent
        session = importlib.import_module("botocore.session")
    except ImportError:
        raise MissingAwsExtra(
            "GOVINDEX_OPENSEARCH_AWS_SIGV4 needs botocore: pip install 'govindex[aws]'"
        ) from None
    from opensearchpy import AWSV4SignerAsyncAuth

    credentials = session.Session().get_credentials()
    if credentials is None:
        raise MissingAwsExtra(
            "GOVINDEX_OPENSEARCH_AWS_SIGV4: botocore found no AWS credentials (environment, "
            "profile, web identity or instance role)"
        )
    return AWSV4SignerAsyncAuth(credentials, region, service)


def client_options(url: str, security: OpenSearchSecurity) -> tuple[str, dict[str, Any]]:
    """The host URL and keyword arguments `AsyncOpenSearch` is built with. A URL's own
    user and password are dropped when basic auth or SigV4 comes from settings (opensearch-py
    would let the URL's win)."""
    options: dict[str, Any] = {"verify_certs": security.verify_certs}
    if not security.verify_certs:
        options["ssl_show_warn"] = False  # the operator's choice, said in the settings
    if security.ca_file is not None:
        options["ca_certs"] = str(security.ca_file)
    if security.client_cert is not None:
        options["client_cert"] = str(security.client_cert)
    if security.client_key is not None:
        options["client_key"] = str(security.client_key)
    if security.aws_sigv4:
        assert security.aws_region  # Settings refuse SigV4 without a region
        options["http_auth"] = sigv4_auth(security.aws_region, security.aws_service)
        # The default connection (AIOHttpConnection) takes any http_auth for a Basic
        # user:password and fails on the first request; this one signs every request.
        options["connection_class"] = AsyncHttpConnection
    elif security.username is not None:
        options["http_auth"] = (security.username, security.password or "")
    if "http_auth" in options:
        parts = urlsplit(url)
        if parts.username is not None:
            host = parts.netloc.rpartition("@")[2]
            url = urlunsplit(parts._replace(netloc=host))
    return url, options


def new_client(url: str, security: OpenSearchSecurity = NO_SECURITY) -> AsyncOpenSearch:
    """Every OpenSearch client of govindex is built here."""
    host, options = client_options(url, security)
    return AsyncOpenSearch(
        hosts=[host], timeout=30, max_retries=0, serializer=FastLoads(), **options
    )


class FastLoads(JSONSerializer):
    """opensearch-py's JSON serializer, reading answers with orjson: a bulk's answer holds
    an item per chunk, and the standard library's decoder of them was a twentieth of the
    indexer's CPU. What it writes is unchanged; an answer orjson refuses (a bare NaN, say)
    is read by the standard library as before. orjson reads integers exactly up to 64 bits
    (a chunk's SimHash is a signed 64-bit one) and larger ones as floats; no field
    govindex stores or asks for is larger."""

    def loads(self, s: str) -> Any:
        try:
            return orjson.loads(s)
        except orjson.JSONDecodeError:
            return super().loads(s)


def translate(exc: Exception, what: str) -> Exception:
    """A driver error as ours: unreachable, 429 and 5xx are transient, the rest permanent."""
    if isinstance(exc, os_exc.ConnectionError | os_exc.ConnectionTimeout):
        return TransientError(f"OpenSearch is unreachable during {what}: {exc}")
    if isinstance(exc, os_exc.TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        if status == 429 or status >= 500:
            return TransientError(f"OpenSearch is busy during {what} ({status}): {exc}")
        return PermanentError(f"OpenSearch refused {what} ({status}): {exc}")
    return exc


class Connection:
    """A client for one alias and its generations, `{alias}-gNNNN`, live or retired."""

    def __init__(self, url: str, alias: str, *, security: OpenSearchSecurity = NO_SECURITY) -> None:
        self._client = new_client(url, security)
        self.alias = alias

    @property
    def pattern(self) -> str:
        """Every generation of this alias, live or not: what a purge must sweep."""
        return f"{self.alias}-g*"

    def index_name(self, generation: int) -> str:
        return f"{self.alias}-g{generation:04d}"

    async def close(self) -> None:
        await self._client.close()

    async def generations(self) -> list[str]:
        """Every index of this alias's generations, live or retired."""
        try:
            found = await self._client.indices.get(index=self.pattern)
        except os_exc.NotFoundError:
            return []
        except Exception as exc:
            raise translate(exc, "generation lookup") from exc
        return sorted(found)

    async def refresh(self) -> None:
        try:
            await self._client.indices.refresh(index=self.pattern)
        except os_exc.NotFoundError:
            return
        except Exception as exc:
            raise translate(exc, "refresh") from exc

    async def count(self) -> int:
        try:
            result = await self._client.count(index=self.alias)
        except os_exc.NotFoundError:
            return 0
        except Exception as exc:
            raise translate(exc, "count") from exc
        return int(result["count"])
