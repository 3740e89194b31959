"""An identity provider's published keys (a JWK set): read from a file or an https URL,
bounded in size and time, and each key matched to the algorithms it may verify."""

from __future__ import annotations

import dataclasses
import http.client
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

import jwt
import structlog
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from govindex.core.inputs import quote
from reader.credentials.errors import NOT_VALID, JwksUnavailable, Unauthenticated

log = structlog.get_logger(__name__)

JWKS_MAX_BYTES = 1024**2
MIN_RSA_BITS = 2048

# Asymmetric only: an identity provider signs with a private key and publishes the public
# one. `none` proves nothing, and HS* would verify with a secret this service would share.
ASYMMETRIC: tuple[str, ...] = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip
# The JWK a token's `alg` may be verified with: key type, and the curves allowed.
KEY_TYPES: dict[str, tuple[str, frozenset[str] | None]] = {
    **{alg: ("RSA", None) for alg in ASYMMETRIC if alg[:2] in ("RS", "PS")},
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "ES512": ("EC", frozenset({"P-521"})),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
}


@dataclass
class Jwk:
    """One published key; the verifying key is built once per algorithm it serves."""

    kid: str
    data: dict[str, Any]
    built: dict[str, Any] = dataclasses.field(default_factory=dict)

    def key_for(self, alg: str) -> Any:
        """The public key to verify an `alg` token with; refused if the key is of another
        type or curve, or declares another `alg` (no HMAC with a public key, no RSA key for
        an EC token)."""
        kty, curves = KEY_TYPES[alg]
        declared = self.data.get("alg")
        if (
            self.data.get("kty") != kty
            or (curves is not None and self.data.get("crv") not in curves)
            or (declared is not None and declared != alg)
        ):
            raise Unauthenticated(
                "key_mismatch",
                NOT_VALID + "its algorithm does not match its signing key",
                f"the token says {quote(alg)}; key {quote(self.kid)} is kty "
                f"{quote(self.data.get('kty'))} crv {quote(self.data.get('crv'))} alg "
                f"{quote(declared)}",
            )
        if alg not in self.built:
            try:
                key = jwt.PyJWK(self.data, algorithm=alg).key
            except jwt.PyJWTError as exc:
                raise Unauthenticated(
                    "unusable_key",
                    NOT_VALID + "its signing key is unusable",
                    f"key {quote(self.kid)} of the JWKS does not load: {quote(str(exc))}",
                ) from None
            if isinstance(key, RSAPublicKey) and key.key_size < MIN_RSA_BITS:
                raise Unauthenticated(
                    "unusable_key",
                    NOT_VALID + "its signing key is unusable",
                    f"key {quote(self.kid)} has {key.key_size} bits, under {MIN_RSA_BITS}",
                )
            self.built[alg] = key
        return self.built[alg]


def read_jwks(where: str, *, is_url: bool, timeout_s: float) -> dict[str, Jwk]:
    """The usable signing keys by `kid` of the JWK set at `where` (an https URL when
    `is_url`, else a file path). Raises `JwksUnavailable` naming what to check."""
    if is_url:
        raw = _fetch_https(where, timeout_s, JWKS_MAX_BYTES)
    else:
        try:
            with open(where, "rb") as file:
                raw = file.read(JWKS_MAX_BYTES + 1)
        except OSError as exc:
            raise JwksUnavailable(
                f"cannot read the JWKS file {quote(where)}: {exc.strerror}; check the path "
                "and its permissions"
            ) from exc
        if len(raw) > JWKS_MAX_BYTES:
            raise JwksUnavailable(
                f"the JWKS file {quote(where)} is larger than {JWKS_MAX_BYTES} bytes; a key "
                "set is a few KiB: check the path"
            )
    return parse_jwks(raw, where)


def parse_jwks(raw: bytes, where: str) -> dict[str, Jwk]:
    """The usable signing keys of a JWK set by `kid`: asymmetric, `use` absent or `sig`;
    others are skipped and logged. Raises `JwksUnavailable` for a document that is not one."""
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        raise JwksUnavailable(f"the JWKS at {quote(where)} is not JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksUnavailable(f'the JWKS at {quote(where)} is not a JWK set ({{"keys": [...]}})')
    keys: dict[str, Jwk] = {}
    for at, entry in enumerate(document["keys"]):
        skipped = _unusable(entry, keys)
        if skipped is not None:
            log.warning("jwks.key_skipped", jwks=where, index=at, reason=skipped)
            continue
        keys[entry["kid"]] = Jwk(entry["kid"], entry)
    return keys


def _unusable(entry: Any, held: Mapping[str, Jwk]) -> str | None:
    """Why a JWK set entry is not a signing key to hold, or None."""
    if not isinstance(entry, dict):
        return "not an object"
    kid = entry.get("kid")
    if not isinstance(kid, str) or not kid:
        return "no kid"
    if entry.get("kty") not in ("RSA", "EC", "OKP"):
        return f"kty {quote(entry.get('kty'))} is not an asymmetric key type"
    if entry.get("use", "sig") != "sig":
        return f"use {quote(entry.get('use'))} is not sig"
    if kid in held:
        return f"kid {quote(kid)} appears twice; the first is kept"
    return None


class _HttpsRedirectsOnly(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to another https URL."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme.lower() != "https":
            raise urllib.error.HTTPError(
                req.full_url, code, f"refused a redirect to {quote(newurl)}", headers, fp
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _fetch_https(url: str, timeout: float, limit: int) -> bytes:
    """The body at an https `url`, at most `limit` bytes, within about `timeout` seconds."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=ssl.create_default_context()), _HttpsRedirectsOnly()
    )
    # https only: JwtConfig refuses any other scheme, and so does every redirect followed.
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
    deadline = time.monotonic() + timeout
    body = bytearray()
    try:
        with opener.open(request, timeout=timeout) as response:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > limit:
                raise JwksUnavailable(f"the JWKS at {quote(url)} is larger than {limit} bytes")
            # One recv per read1, each bounded by the socket timeout; a trickle stops here.
            while chunk := response.read1(64 * 1024):
                body += chunk
                if len(body) > limit:
                    raise JwksUnavailable(f"the JWKS at {quote(url)} is larger than {limit} bytes")
                if time.monotonic() > deadline:
                    raise JwksUnavailable(f"the JWKS at {quote(url)} took over {timeout:g} s")
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise JwksUnavailable(
            f"cannot fetch the JWKS at {quote(url)}: {quote(str(exc))}; check the URL and that "
            "the identity provider is reachable"
        ) from exc
    return bytes(body)
