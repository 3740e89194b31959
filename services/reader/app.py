"""The read service's wiring: its ports and read audit from a Runtime, its credentials from
settings, and the internal HTTP listener."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

import structlog
from pydantic import ValidationError

from govindex.core.inputs import quote
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from govindex.runtime.listener import Listener
from reader.credentials import JwtConfig, JwtVerifier
from reader.http import build_read_app
from reader.keeping import PackKeeper
from reader.service import ReadPorts, ReadService

log = structlog.get_logger(__name__)

# The setting each JwtConfig field comes from, to name it when it is refused.
_JWT_SETTINGS = {
    "jwks": "GOVINDEX_READ_JWKS",
    "issuer": "GOVINDEX_READ_JWT_ISSUER",
    "audience": "GOVINDEX_READ_JWT_AUDIENCE",
    "tenant_claim": "GOVINDEX_READ_JWT_TENANT_CLAIM",
    "groups_claim": "GOVINDEX_READ_JWT_GROUPS_CLAIM",
    "leeway_s": "GOVINDEX_READ_JWT_LEEWAY_S",
}


def read_service(rt: Runtime) -> ReadService:
    embedder = rt.embedder
    return ReadService(
        ReadPorts(
            store=rt.reads,
            index=rt.index,
            cache=rt.cache,
            embedder=None if embedder is None else f"{embedder.name}/{embedder.version}",
            tokens=rt.tokens,
            graph=rt.settings.graph,
        )
    )


def jwt_config(settings: Settings) -> JwtConfig | None:
    """How the read API verifies JWTs, from the `read_jwks` and `read_jwt_*` settings; None
    when no JWKS is set. Raises `ValueError` naming the setting that is missing or refused."""
    jwks, issuer, audience = (
        settings.read_jwks,
        settings.read_jwt_issuer,
        settings.read_jwt_audience,
    )
    if not jwks:
        given = [_JWT_SETTINGS[k] for k, v in (("issuer", issuer), ("audience", audience)) if v]
        if given:
            raise ValueError(
                f"{' and '.join(given)} set without GOVINDEX_READ_JWKS: set it to the identity "
                "provider's JWKS (a file path or an https URL), or unset them"
            )
        return None
    if not issuer or not audience:
        missing = [
            _JWT_SETTINGS[k] for k, v in (("issuer", issuer), ("audience", audience)) if not v
        ]
        raise ValueError(
            f"GOVINDEX_READ_JWKS is set but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not: a JWT is accepted only from one "
            "issuer (its `iss`) for one audience (its `aud`, this read API); set both"
        )
    try:
        return JwtConfig(
            jwks=jwks,
            issuer=issuer,
            audience=audience,
            tenant_claim=settings.read_jwt_tenant_claim,
            groups_claim=settings.read_jwt_groups_claim,
            leeway_s=settings.read_jwt_leeway_s,
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_context=False)[0]
        where = _JWT_SETTINGS.get(str(first["loc"][0]), "a GOVINDEX_READ_JWT* setting")
        raise ValueError(
            f"{where} is refused: {first['msg']} (got {quote(first['input'])})"
        ) from None


@dataclass
class ReadServer:
    """The internal listener on `host:port` (port 0: any free port, reported in `url`).

    `tokens` is the `GOVINDEX_READ_TOKENS` setting (token -> tenants, or a binding of
    tenants, principal patterns and purposes); `jwt`, how JWTs are verified (`jwt_config`).
    Every answer and refusal is recorded in the Runtime's read audit (`Runtime.audit`).
    `start` refuses (`ValueError`, `TokenSettingsError`) an unusable token entry or no
    credential at all, and reads the JWKS once, so a wrong path or URL stops the start
    (`JwksUnavailable`) instead of every later read.
    """

    rt: Runtime
    tokens: Mapping[str, object]
    host: str = "127.0.0.1"
    port: int = 0
    url: str | None = None
    jwt: JwtConfig | None = None
    _listener: Listener | None = None

    async def start(self) -> str:
        if not self.tokens and self.jwt is None:
            raise ValueError(
                "no credential to accept: set GOVINDEX_READ_TOKENS, e.g. "
                '\'{"<token>": {"name": "rag-app", "tenants": ["<tenant>"], "principals": '
                '["user:*"], "purposes": ["support"]}}\', or GOVINDEX_READ_JWKS with '
                "GOVINDEX_READ_JWT_ISSUER and GOVINDEX_READ_JWT_AUDIENCE"
            )
        verifier = JwtVerifier(self.jwt) if self.jwt is not None else None
        service = read_service(self.rt)
        settings = self.rt.settings
        keeper = PackKeeper(
            service, self.rt.packs, settings.topics.receipts, settings.pack_retention_days
        )
        app = build_read_app(
            service,
            self.rt.lineage,
            self.tokens,
            jwt_verifier=verifier,
            audit=self.rt.audit,
            keeper=keeper,
        )
        if verifier is not None:
            keys = await asyncio.to_thread(verifier.load)  # a file or https read may block
            if keys == 0:
                log.warning(
                    "jwks.no_signing_key",
                    jwks=verifier.config.jwks,
                    hint="no JWT verifies until the key set holds an asymmetric signing key",
                )
        self._listener = Listener("read_api", self.host, self.port)
        self.url = await self._listener.start(app)
        return self.url

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
