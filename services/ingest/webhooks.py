"""GitHub and GitLab push webhooks: name the repository, verify the sender, read the push (pure).

GitHub signs the raw body with HMAC SHA-256 (`X-Hub-Signature-256: sha256=<hex>`) and names
the delivery in `X-GitHub-Delivery`; GitLab sends the shared secret in `X-Gitlab-Token` and
names the delivery in `X-Gitlab-Event-UUID`. Only pushes are indexed; a GitHub `ping` is
answered with whether its secret is right; other events are acknowledged and ignored.

The order is the contract: `repository_of` reads only the repository's name (the one field
that selects the secret), `signed_with` checks the signature, and only then does `parse_push`
interpret the payload. Nothing a sender without the secret can send reaches a field's type.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

from govindex.core.inputs import quote

Provider = Literal["github", "gitlab"]

SIGNATURE_HEADER: dict[Provider, str] = {
    "github": "X-Hub-Signature-256",
    "gitlab": "X-Gitlab-Token",
}
DELIVERY_HEADER: dict[Provider, str] = {
    "github": "X-GitHub-Delivery",
    "gitlab": "X-Gitlab-Event-UUID",
}
EVENT_HEADER: dict[Provider, str] = {"github": "X-GitHub-Event", "gitlab": "X-Gitlab-Event"}
PUSH_EVENT: dict[Provider, str] = {"github": "push", "gitlab": "Push Hook"}
REPOSITORY_FIELD: dict[Provider, str] = {
    "github": "repository.full_name",
    "gitlab": "project.path_with_namespace",
}

# Providers send UUIDs; the id is a primary key in Postgres, so it stays short and printable.
_DELIVERY_ID = re.compile(r"^[\x21-\x7e]{1,128}$")


class WebhookRefused(Exception):
    """The request is not from the configured sender (401) or not readable (400, 413)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def refusal(provider: Provider) -> WebhookRefused:
    """The one answer to every delivery that does not verify, whatever the repository.

    Unsigned, badly signed, for an unknown repository or for a source with no secret set:
    all the same status and body, so the answer never tells which repositories are indexed.
    The reason goes to the log only.
    """
    what = "signature" if provider == "github" else "token"
    return WebhookRefused(
        401,
        f"{what} ({SIGNATURE_HEADER[provider]}) is missing or not made with the webhook "
        "secret registered for this repository",
    )


@dataclass(frozen=True)
class Push:
    provider: Provider
    delivery_id: str
    repository: str
    branch: str | None  # None for a tag or another ref
    before: str
    after: str


def header(headers: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lowered), None)


def event_kind(provider: Provider, headers: Mapping[str, str]) -> str:
    return (header(headers, EVENT_HEADER[provider]) or "").strip()


def is_push(provider: Provider, headers: Mapping[str, str]) -> bool:
    return event_kind(provider, headers) == PUSH_EVENT[provider]


def is_ping(provider: Provider, headers: Mapping[str, str]) -> bool:
    """GitHub's "is the hook set up right" delivery (sent on creation and on request)."""
    return provider == "github" and event_kind(provider, headers) == "ping"


# Before verification: the repository's name only, as a string or nothing (a name of
# another type is no name). Every other field is left unread, whatever its type.
class _GitHubRepository(BaseModel):
    model_config = ConfigDict(extra="ignore")
    full_name: StrictStr


class _GitHubIdentity(BaseModel):
    model_config = ConfigDict(extra="ignore")
    repository: _GitHubRepository | None = None


class _GitLabProject(BaseModel):
    model_config = ConfigDict(extra="ignore")
    path_with_namespace: StrictStr


class _GitLabIdentity(BaseModel):
    model_config = ConfigDict(extra="ignore")
    project: _GitLabProject | None = None


_IDENTITY_FIELD = {"github": "repository", "gitlab": "project"}


def repository_of(provider: Provider, body: bytes) -> str | None:
    """The repository a delivery claims to be for, read before anything is verified.

    400 when the body is not a JSON object at all (that answer depends on the body alone,
    never on what is registered); None when it names no repository as a string.
    """
    model = _GitHubIdentity if provider == "github" else _GitLabIdentity
    try:
        identity = model.model_validate_json(body)
    except ValidationError as exc:
        kinds = {(err["type"], err["loc"][:1]) for err in exc.errors(include_input=False)}
        if any(kind == "json_invalid" for kind, _ in kinds):
            raise WebhookRefused(
                400,
                "body is not JSON (set the webhook's content type to application/json): "
                + exc.errors(include_input=False)[0]["msg"],
            ) from exc
        if any(loc != (_IDENTITY_FIELD[provider],) for _, loc in kinds):
            raise WebhookRefused(400, "body is not a JSON object") from exc
        return None
    if isinstance(identity, _GitHubIdentity):
        return identity.repository.full_name if identity.repository else None
    return identity.project.path_with_namespace if identity.project else None


def signed_with(provider: Provider, secret: str, body: bytes, headers: Mapping[str, str]) -> bool:
    """Whether the delivery's signature (GitHub) or token (GitLab) is made with `secret`."""
    given = (header(headers, SIGNATURE_HEADER[provider]) or "").encode()
    if provider == "github":
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(given, f"sha256={digest}".encode())
    return hmac.compare_digest(given, secret.encode())


# After verification: the fields a push is read by, each of the type the provider documents.
# Providers add fields at will, so unknown ones are ignored rather than forbidden.
class _PushFields(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    ref: StrictStr
    before: StrictStr
    after: StrictStr


class GitHubPush(_PushFields):
    repository: _GitHubRepository


class GitLabPush(_PushFields):
    project: _GitLabProject


def parse_push(provider: Provider, body: bytes, headers: Mapping[str, str]) -> Push:
    """Read a verified push payload as the provider documents it; 400 naming the field."""
    model = GitHubPush if provider == "github" else GitLabPush
    try:
        fields = model.model_validate_json(body)
    except ValidationError as exc:
        raise WebhookRefused(400, f"not a {provider} push payload: {_problems(exc)}") from exc
    repository = (
        fields.repository.full_name
        if isinstance(fields, GitHubPush)
        else fields.project.path_with_namespace
    )
    delivery = header(headers, DELIVERY_HEADER[provider])
    if not delivery:
        raise WebhookRefused(400, f"no delivery id: the {DELIVERY_HEADER[provider]} header")
    if not _DELIVERY_ID.match(delivery):
        raise WebhookRefused(
            400,
            f"{DELIVERY_HEADER[provider]} {quote(delivery)} is not a delivery id "
            "(1 to 128 printable characters, no spaces)",
        )
    ref = fields.ref
    branch = ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None
    return Push(provider, delivery, repository, branch, fields.before, fields.after)


def _problems(exc: ValidationError, shown: int = 3) -> str:
    """The first few field errors, each naming its field and quoting what was sent."""
    errors = exc.errors()
    parts = []
    for err in errors[:shown]:
        field = ".".join(str(p) for p in err["loc"]) or "(payload)"
        got = "" if err["type"] == "missing" else f" (got {_shown(err.get('input'))})"
        parts.append(f"field '{field}': {err['msg']}{got}")
    more = f"; and {len(errors) - shown} more" if len(errors) > shown else ""
    return "; ".join(parts) + more


def _shown(value: object) -> str:
    """A sent value in a message: scalars quoted, containers by their size only."""
    if isinstance(value, dict):
        return f"an object of {len(value)} fields"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    return quote(value)
