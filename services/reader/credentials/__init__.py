"""Credentials that prove a read's subject: bound service tokens and verified JWTs.

`Authenticator.authenticate` turns an `Authorization` header into what its credential
proves (`Proven`); `admit` turns that and what a request asks for into the subject the read
runs as (`Admitted`), or refuses it (`Forbidden`, `Invalid`), never narrowing silently.
See docs/design/read-path.md.
"""

from __future__ import annotations

from reader.credentials.authenticator import MAX_BEARER_CHARS, Authenticator
from reader.credentials.errors import (
    CredentialError,
    Forbidden,
    Invalid,
    JwksUnavailable,
    TokenSettingsError,
    Unauthenticated,
)
from reader.credentials.jwks import ASYMMETRIC, JWKS_MAX_BYTES, MIN_RSA_BITS
from reader.credentials.jwks import _HttpsRedirectsOnly as _HttpsRedirectsOnly
from reader.credentials.subject import Admitted, CredentialKind, Proven, admit, prove_tenant
from reader.credentials.tokens import (
    MAX_GRANTS,
    MAX_TOKEN_CHARS,
    MIN_TOKEN_CHARS,
    SETTING,
    BoundToken,
    ReadTokenValue,
    TokenBinding,
    bound_tokens,
    default_token_name,
)
from reader.credentials.verifier import JwtConfig, JwtVerifier

__all__ = [
    "ASYMMETRIC",
    "JWKS_MAX_BYTES",
    "MAX_BEARER_CHARS",
    "MAX_GRANTS",
    "MAX_TOKEN_CHARS",
    "MIN_RSA_BITS",
    "MIN_TOKEN_CHARS",
    "SETTING",
    "Admitted",
    "Authenticator",
    "BoundToken",
    "CredentialError",
    "CredentialKind",
    "Forbidden",
    "Invalid",
    "JwksUnavailable",
    "JwtConfig",
    "JwtVerifier",
    "Proven",
    "ReadTokenValue",
    "TokenBinding",
    "TokenSettingsError",
    "Unauthenticated",
    "admit",
    "bound_tokens",
    "default_token_name",
    "prove_tenant",
]
