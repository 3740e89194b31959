"""The bearer credential of a request, authenticated: a known service token or a verified JWT."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from reader.credentials.errors import NOT_VALID, Unauthenticated
from reader.credentials.subject import Proven
from reader.credentials.tokens import JWT_SHAPE, SETTING, BoundToken
from reader.credentials.verifier import JwtVerifier

# aiohttp refuses a header line past 8190 bytes; nothing longer is parsed here either.
MAX_BEARER_CHARS = 8192
_SEND_BEARER = "send Authorization: Bearer <token>"


class Authenticator:
    """Turns an `Authorization` header into what its credential proves.

    A bearer value shaped like a JWT goes to the verifier when one is configured; any other
    value is compared, in constant time, with every known token.
    """

    def __init__(
        self, tokens: Iterable[BoundToken], jwt_verifier: JwtVerifier | None = None
    ) -> None:
        self._known = [(t.token.encode("utf-8", "surrogateescape"), t) for t in tokens]
        self._verifier = jwt_verifier
        if not self._known and jwt_verifier is None:
            raise ValueError(
                f"the read API needs a credential to accept: set {SETTING}, or a JWT verifier "
                "(JWKS, issuer, audience)"
            )

    def authenticate(self, authorization: str | None) -> Proven:
        """What the `Authorization: Bearer <value>` header proves.

        Raises `Unauthenticated` (401) when the header is missing or not a bearer, the value
        is unknown or refused by the verifier; `JwksUnavailable` (503) when a JWT arrives and
        no key set could be read. May block on a JWKS read (see `JwtVerifier`).
        """
        scheme, _, value = (authorization or "").strip().partition(" ")
        value = value.strip()
        if scheme.lower() != "bearer" or not value:
            raise Unauthenticated("no_credential", _SEND_BEARER)
        if len(value) > MAX_BEARER_CHARS:
            raise Unauthenticated("too_long", NOT_VALID + f"over {MAX_BEARER_CHARS} chars")
        if self._verifier is not None and JWT_SHAPE.fullmatch(value):
            return self._verifier.verify(value)
        given = value.encode("utf-8", "surrogateescape")  # header bytes, as they came
        match: BoundToken | None = None
        for secret, bound in self._known:
            # Every token is compared, so the time taken does not say which one matched.
            if hmac.compare_digest(secret, given) and match is None:
                match = bound
        if match is None:
            raise Unauthenticated("unknown_token", NOT_VALID + "unknown token")
        return Proven(
            kind="token",
            name=match.name,
            tenants=match.tenants,
            principal_patterns=match.principals,
            scopes=None,
            purposes=match.purposes,
        )
