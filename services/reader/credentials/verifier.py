"""Access tokens (JWTs) of one identity provider, verified against its JWKS: what each proves."""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import jwt
import structlog
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from govindex.core.inputs import SINGLE_LINE, quote
from govindex.core.records import Principal, Slug
from reader.credentials.errors import NOT_VALID, JwksUnavailable, Unauthenticated
from reader.credentials.jwks import ASYMMETRIC, Jwk, read_jwks
from reader.credentials.subject import Proven

log = structlog.get_logger(__name__)

ConfigLine = Annotated[str, Field(min_length=1, max_length=2048), SINGLE_LINE]


class JwtConfig(BaseModel):
    """How access tokens from one identity provider are verified.

    `jwks` is a file path or an https URL. `leeway_s` is the clock skew allowed on `exp`,
    `nbf` and `iat`. The key set is re-read for an unknown `kid` at most once per
    `refresh_interval_s`, and on use once it is older than `max_age_s`; an https read gives
    up after `timeout_s`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    jwks: ConfigLine
    issuer: ConfigLine
    audience: ConfigLine
    tenant_claim: ConfigLine = "tenant"
    groups_claim: ConfigLine = "groups"
    leeway_s: float = Field(default=30.0, ge=0, le=600)
    algorithms: tuple[str, ...] = Field(default=ASYMMETRIC, min_length=1)
    refresh_interval_s: float = Field(default=30.0, gt=0)
    max_age_s: float = Field(default=300.0, gt=0)
    timeout_s: float = Field(default=5.0, gt=0, le=60)

    @field_validator("jwks")
    @classmethod
    def _https_or_path(cls, value: str) -> str:
        if "://" in value:
            parts = urllib.parse.urlsplit(value)
            if parts.scheme.lower() != "https" or not parts.netloc:
                raise ValueError(
                    f"the JWKS URL must be https://<host>/…, not {quote(value)}: keys read over "
                    "anything else could be swapped on the way; or give a file path"
                )
        return value

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for alg in value:
            if alg not in ASYMMETRIC:
                raise ValueError(
                    f"algorithm {quote(alg)} is not accepted: only asymmetric ones verify an "
                    f"identity provider's tokens ({', '.join(ASYMMETRIC)}); never none or HS*"
                )
        return value

    @property
    def jwks_is_url(self) -> bool:
        return "://" in self.jwks


_PRINCIPAL: TypeAdapter[str] = TypeAdapter(Principal)
_SLUG: TypeAdapter[str] = TypeAdapter(Slug)


class JwtVerifier:
    """Verifies access tokens from one identity provider and says what each proves.

    A token passes only with: `alg` in `config.algorithms` (checked before any key is
    looked up) and matching its key's type; a `kid` found in the JWKS; a good signature;
    `iss` and `aud` as configured; `exp` present and not past; `nbf`/`iat` not ahead (each
    within `leeway_s`); a `sub`, a tenant claim holding a tenant id, and a groups claim (if
    present) that is a list of strings. It proves `user:<sub>` and `group:<g>` for each
    group, the tenant, and the scopes of `scope` (space-separated) and `scp` (a list, or a
    string as some providers send it).

    The key set is read on first use, re-read when a token names an unknown `kid` (at most
    once per `refresh_interval_s` whatever the kid, so made-up kids cost one read per
    interval) and when it is older than `max_age_s` (a key the provider withdrew stops
    verifying). A failed re-read keeps the keys held and is logged. Thread-safe; `verify`
    may block on a read for up to `timeout_s`, so async code calls it in a thread.
    """

    def __init__(self, config: JwtConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, Jwk] | None = None
        self._loaded_at = 0.0
        self._refreshed_at: float | None = None
        self._reads = 0

    @property
    def name(self) -> str:
        return f"jwt:{self.config.issuer}"

    @property
    def reads(self) -> int:
        """How many times the key set was read (file or URL), successful or not."""
        return self._reads

    def verify(self, token: str) -> Proven:
        """What `token` proves; raises `Unauthenticated` with the reason, or `JwksUnavailable`
        when no key set could ever be read."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthenticated(
                "malformed", NOT_VALID + "it is not a well-formed JWT", f"header: {exc}"
            ) from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.config.algorithms:
            raise Unauthenticated(
                "algorithm_refused",
                NOT_VALID + f"algorithm {quote(alg)} is not accepted",
                f"alg {quote(alg)} is not one of {', '.join(self.config.algorithms)}",
            )
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise Unauthenticated("no_kid", NOT_VALID + "it names no signing key (kid)")
        key = self._key(kid).key_for(alg)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=self.config.leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            reason, said = _jwt_refusal(exc)
            raise Unauthenticated(reason, NOT_VALID + said, f"kid {quote(kid)}: {exc}") from None
        return self._proven(claims)

    def load(self) -> int:
        """Read the key set now (e.g. at start, to fail early); the number of usable keys.
        Raises `JwksUnavailable`."""
        with self._lock:
            self._keys = self._read()
            self._loaded_at = self._clock()
            return len(self._keys)

    def _key(self, kid: str) -> Jwk:
        now = self._clock()
        keys = self._keys
        if keys is None or now - self._loaded_at >= self.config.max_age_s or kid not in keys:
            keys = self._refresh(kid, now)
        found = keys.get(kid)
        if found is None:
            raise Unauthenticated(
                "unknown_key",
                NOT_VALID + "its signing key (kid) is unknown",
                f"kid {quote(kid)} is not in the JWKS at {quote(self.config.jwks)}",
            )
        return found

    def _refresh(self, kid: str, now: float) -> dict[str, Jwk]:
        """The key set, re-read if `kid` is unknown or the set is stale and the last re-read
        is at least `refresh_interval_s` old. The first read does not count: a key rotated in
        right after start is still found."""
        with self._lock:
            keys = self._keys
            if keys is not None and kid in keys and now - self._loaded_at < self.config.max_age_s:
                return keys  # another thread re-read it meanwhile
            last = self._refreshed_at
            if last is not None and now - last < self.config.refresh_interval_s:
                if keys is None:
                    raise JwksUnavailable(
                        f"the JWKS at {quote(self.config.jwks)} could not be read; it is tried "
                        f"again {self.config.refresh_interval_s:g} s after the last attempt"
                    )
                return keys
            try:
                fresh = self._read()
            except JwksUnavailable as exc:
                self._refreshed_at = now
                if keys is None:
                    raise
                log.warning("jwks.refresh_failed", jwks=self.config.jwks, error=str(exc))
                return keys
            if keys is not None:
                self._refreshed_at = now
            self._keys, self._loaded_at = fresh, now
            return fresh

    def _read(self) -> dict[str, Jwk]:
        self._reads += 1
        where = self.config.jwks
        keys = read_jwks(where, is_url=self.config.jwks_is_url, timeout_s=self.config.timeout_s)
        log.info("jwks.loaded", jwks=where, keys=len(keys))
        return keys

    def _proven(self, claims: Mapping[str, Any]) -> Proven:
        # PyJWT checks `iss`; one release (2.10.0, CVE-2024-53861) matched it as a substring,
        # so equality is checked here too.
        if claims.get("iss") != self.config.issuer:
            raise Unauthenticated(
                "wrong_issuer",
                NOT_VALID + "it is from another issuer",
                f"iss {quote(claims.get('iss'))} is not {quote(self.config.issuer)}",
            )
        sub = claims.get("sub")
        if not isinstance(sub, str):
            raise _bad_claim("sub", "is not a string", sub)
        principals = {self._principal("user:", sub, "sub")}
        tenant = claims.get(self.config.tenant_claim)
        if tenant is None:
            raise _bad_claim(self.config.tenant_claim, "is missing", None)
        if not isinstance(tenant, str) or not _valid(_SLUG, tenant):
            raise _bad_claim(self.config.tenant_claim, "is not a tenant id", tenant)
        groups = claims.get(self.config.groups_claim, [])
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise _bad_claim(self.config.groups_claim, "is not a list of strings", groups)
        principals |= {self._principal("group:", g, self.config.groups_claim) for g in groups}
        return Proven(
            kind="jwt",
            name=self.name,
            subject=sub,
            tenants=frozenset({tenant}),
            principals=frozenset(principals),
            scopes=frozenset(_scopes(claims)),
            purposes=None,
        )

    @staticmethod
    def _principal(prefix: str, value: str, claim: str) -> str:
        principal = prefix + value
        if not value or not _valid(_PRINCIPAL, principal):
            raise _bad_claim(claim, "is not a usable principal", value)
        return principal


def _valid(adapter: TypeAdapter[str], value: str) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True


def _bad_claim(claim: str, what: str, value: object) -> Unauthenticated:
    return Unauthenticated(
        "bad_claim",
        NOT_VALID + f"its {quote(claim)} claim {what}",
        f"claim {quote(claim)} {what}: {quote(value)}",
    )


def _scopes(claims: Mapping[str, Any]) -> set[str]:
    found: set[str] = set()
    for claim in ("scope", "scp"):
        value = claims.get(claim)
        if value is None:
            continue
        if isinstance(value, str):
            items: list[object] = list(value.split())
        elif isinstance(value, list):
            items = list(value)
        else:
            raise _bad_claim(claim, "is neither a space-separated string nor a list", value)
        for item in items:
            if not isinstance(item, str) or not _valid(_PRINCIPAL, item):
                raise _bad_claim(claim, "holds a value that is not a scope", item)
            found.add(item)
    return found


def _jwt_refusal(exc: jwt.PyJWTError) -> tuple[str, str]:
    """A short code for the log and the words for the client, for PyJWT's refusal."""
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "expired", "it has expired"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "not_yet_valid", "it is not valid yet"
    if isinstance(exc, jwt.InvalidAudienceError):
        return "wrong_audience", "it is for another audience"
    if isinstance(exc, jwt.InvalidIssuerError):
        return "wrong_issuer", "it is from another issuer"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return "missing_claim", f"it has no {quote(exc.claim)} claim"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "bad_signature", "its signature does not verify"
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return "algorithm_refused", "its algorithm is not accepted"
    if isinstance(exc, jwt.DecodeError):
        return "malformed", "it is not a well-formed JWT"
    return "invalid", "it was refused"
