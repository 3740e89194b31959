"""A test identity provider: RSA keys generated in the test, their public halves published in
a JWKS file, access tokens signed with them (real signatures), and the forgeries a verifier
must refuse (`alg: none`, HS256 keyed with the public key)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

ISSUER = "https://idp.example.test/realms/acme"
AUDIENCE = "govindex-read"
DROP = object()  # a claim left out of the token


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class IdentityProvider:
    """Signs access tokens for one tenant and publishes its keys in `jwks` (a file)."""

    def __init__(self, jwks: Path, tenant: str, *, issuer: str = ISSUER) -> None:
        self.jwks, self.tenant, self.issuer = jwks, tenant, issuer
        self.keys: dict[str, rsa.RSAPrivateKey] = {}

    def publish(self, kid: str, key: rsa.RSAPrivateKey | None = None) -> rsa.RSAPrivateKey:
        """Add a signing key under `kid` (a new one unless given) and rewrite the JWKS file
        with every key held, as a provider rotating keys does."""
        self.keys[kid] = key or rsa_key()
        published = []
        for name, private in self.keys.items():
            data: dict[str, Any] = RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
            published.append({**data, "kid": name, "use": "sig", "alg": "RS256"})
        self.jwks.write_text(json.dumps({"keys": published}))
        return self.keys[kid]

    def claims(self, **overrides: object) -> dict[str, Any]:
        now = int(time.time())
        base: dict[str, object] = {
            "iss": self.issuer,
            "aud": AUDIENCE,
            "sub": "alice",
            "tenant": self.tenant,
            "groups": ["eng"],
            "scope": "docs.read",
            "iat": now,
            "exp": now + 300,
        }
        return {k: v for k, v in {**base, **overrides}.items() if v is not DROP}

    def token(
        self, kid: str = "rsa-1", *, key: rsa.RSAPrivateKey | None = None, **overrides: object
    ) -> str:
        """A JWT signed RS256 with the key published as `kid` (or with `key`, a forgery)."""
        signer = key or self.keys[kid]
        return jwt.encode(self.claims(**overrides), signer, algorithm="RS256", headers={"kid": kid})

    def unsigned(self, kid: str = "rsa-1") -> str:
        """`alg: none`: the claims with an empty signature."""
        return self._crafted({"alg": "none", "typ": "JWT", "kid": kid}, None)

    def hs256_with_public_key(self, kid: str = "rsa-1") -> str:
        """HMAC-SHA256 keyed with the published public key's PEM: the key-confusion forgery."""
        pem = (
            self.keys[kid]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return self._crafted({"alg": "HS256", "typ": "JWT", "kid": kid}, pem)

    def _crafted(self, header: dict[str, Any], hmac_key: bytes | None) -> str:
        payload = json.dumps(self.claims()).encode()
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(payload)}"
        signature = b""
        if hmac_key is not None:
            signature = hmac.new(hmac_key, signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{b64url(signature)}"
