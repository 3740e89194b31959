"""Service tokens bound to the tenants, principal patterns and purposes they may assert:
the `GOVINDEX_READ_TOKENS` setting, refused whole at start if any entry is unusable."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from govindex.core.inputs import has_control, quote
from govindex.core.records import SLUG, Principal, Slug
from reader.credentials.errors import TokenSettingsError

SETTING = "GOVINDEX_READ_TOKENS"
MIN_TOKEN_CHARS = 16
MAX_TOKEN_CHARS = 1024
MAX_GRANTS = 256

# Three base64url parts; the signature may be empty (`alg: none`), which the verifier refuses.
JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_RANDOM_TOKEN = (
    f"use a random one of at least {MIN_TOKEN_CHARS} characters, e.g. "
    "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
)


def _closed_brackets(pattern: str) -> str:
    """Refuse a `[` that fnmatch would silently take as a literal character."""
    at = 0
    while at < len(pattern):
        if pattern[at] == "[":
            start = at + 1
            if pattern[start : start + 1] == "!":
                start += 1
            if pattern[start : start + 1] == "]":
                start += 1
            close = pattern.find("]", start)
            if close < 0:
                raise ValueError(
                    f"the '[' at position {at} is never closed: write a class as [abc], or "
                    "leave brackets out"
                )
            at = close + 1
        else:
            at += 1
    return pattern


# A glob on the whole principal (fnmatch, case-sensitive): `user:*`, `group:eng-*`, `*`.
PrincipalPattern = Annotated[Principal, AfterValidator(_closed_brackets)]
TenantGrant = Annotated[str, Field(pattern=rf"^(?:\*|{SLUG.removeprefix('^').removesuffix('$')})$")]
TenantGrants = Annotated[list[TenantGrant], Field(min_length=1, max_length=MAX_GRANTS)]


class TokenBinding(BaseModel):
    """A `GOVINDEX_READ_TOKENS` value in its bound form: what one service token may assert.

    `tenants` may hold `*` (every tenant); `principals` are globs every asserted principal must
    match; `purposes` omitted means any purpose.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: Slug | None = None
    tenants: TenantGrants
    principals: Annotated[list[PrincipalPattern], Field(min_length=1, max_length=MAX_GRANTS)]
    purposes: Annotated[list[Slug], Field(min_length=1, max_length=MAX_GRANTS)] | None = None


# A setting's value: the list form (tenants only: any principal, any purpose) or the bound form.
ReadTokenValue = TenantGrants | TokenBinding
_TENANT_GRANTS: TypeAdapter[list[str]] = TypeAdapter(TenantGrants)
_FORMS = (
    'a list of tenants (["acme"]; "*" for every tenant) or '
    '{"name": "rag-app", "tenants": ["acme"], "principals": ["user:*"], "purposes": ["support"]}'
)


@dataclass(frozen=True)
class BoundToken:
    """One service token and what it may assert.

    `tenants` None: every tenant. `principals`: globs (fnmatch, case-sensitive, on the whole
    principal). `purposes` None: any purpose. The token itself stays out of `repr`.
    """

    name: str
    tenants: frozenset[str] | None
    principals: tuple[str, ...]
    purposes: frozenset[str] | None
    token: str = dataclasses.field(repr=False)


def default_token_name(token: str) -> str:
    """`token-<first 6 hex of the token's sha256>`: a name for logs that does not reveal it."""
    digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()
    return f"token-{digest[:6]}"


def bound_tokens(raw: Mapping[str, object]) -> tuple[BoundToken, ...]:
    """Every entry of `GOVINDEX_READ_TOKENS` (token -> value) as a `BoundToken`.

    Raises `TokenSettingsError` for an empty token, one under `MIN_TOKEN_CHARS` characters or
    shaped like a JWT, a value of neither form, a bad tenant, pattern or purpose, or two
    entries with one name. Messages name the entry by its name (given, or
    `default_token_name`), never by its token.
    """
    found: list[BoundToken] = []
    seen: set[str] = set()
    for token, value in raw.items():
        bound = _bound_token(token, value)
        if bound.name in seen:
            raise TokenSettingsError(
                f"{SETTING}: two entries are named {quote(bound.name)}: names tell tokens apart "
                'in logs and audit records, so give each its own "name"'
            )
        seen.add(bound.name)
        found.append(bound)
    return tuple(found)


def _entry_name(token: str, value: object) -> str:
    if isinstance(value, Mapping):
        given = value.get("name")
        if isinstance(given, str) and re.fullmatch(SLUG, given) and not (token and token in given):
            return given
    return default_token_name(token)


def _bound_token(token: str, value: object) -> BoundToken:
    name = _entry_name(token, value)
    where = f"{SETTING} entry {quote(name)}"
    if not token:
        raise TokenSettingsError(f"{where} has an empty token: {_RANDOM_TOKEN}")
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenSettingsError(
            f"{where}: its token is {len(token)} characters, too short to resist guessing: "
            f"{_RANDOM_TOKEN}"
        )
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenSettingsError(
            f"{where}: its token is {len(token)} characters, over {MAX_TOKEN_CHARS}: use a "
            "shorter random one"
        )
    if has_control(token) or any(c.isspace() for c in token):
        raise TokenSettingsError(
            f"{where}: its token holds whitespace or a control character, which cannot travel "
            "in an Authorization header: use a random URL-safe one"
        )
    if JWT_SHAPE.fullmatch(token):
        raise TokenSettingsError(
            f"{where}: its token is shaped like a JWT (three base64url parts), and a JWT is "
            "verified, never configured: use a random token without dots"
        )
    if isinstance(value, Mapping) and isinstance(value.get("name"), str) and token in value["name"]:
        raise TokenSettingsError(
            f"{where}: its name contains the token itself, and names go to logs and audit "
            "records: choose another name"
        )
    try:
        if isinstance(value, list):
            tenants = _TENANT_GRANTS.validate_python(value, strict=True)
            return BoundToken(name, _tenants(tenants), ("*",), None, token)
        if isinstance(value, Mapping):
            binding = TokenBinding.model_validate(dict(value))
            return BoundToken(
                name,
                _tenants(binding.tenants),
                tuple(binding.principals),
                None if binding.purposes is None else frozenset(binding.purposes),
                token,
            )
    except ValidationError as exc:
        raise TokenSettingsError(f"{where}: {_problems(exc)}; expected {_FORMS}") from None
    raise TokenSettingsError(f"{where}: the value is {type(value).__name__}; expected {_FORMS}")


def _tenants(granted: Sequence[str]) -> frozenset[str] | None:
    return None if "*" in granted else frozenset(granted)


def _problems(exc: ValidationError, limit: int = 3) -> str:
    said = []
    for error in exc.errors(include_url=False, include_context=False)[:limit]:
        where = ".".join(str(p) for p in error["loc"]) or "value"
        got = f" (got {quote(error['input'])})" if error["type"] != "missing" else ""
        said.append(f"{where}: {error['msg']}{got}")
    more = exc.error_count() - limit
    return "; ".join(said) + (f"; and {more} more" if more > 0 else "")
