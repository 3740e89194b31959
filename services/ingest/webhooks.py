"""GitHub and GitLab push webhooks: verify the sender, read the push (pure, no I/O).

GitHub signs the raw body with HMAC SHA-256 (`X-Hub-Signature-256: sha256=<hex>`) and names
the delivery in `X-GitHub-Delivery`; GitLab sends the shared secret in `X-Gitlab-Token` and
names the delivery in `X-Gitlab-Event-UUID`. Only pushes are indexed; other events are
acknowledged and ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Provider = Literal["github", "gitlab"]


class WebhookRefused(Exception):
    """The request is not from the configured sender (401) or not readable (400)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


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


def verify(provider: Provider, secret: str, body: bytes, headers: Mapping[str, str]) -> None:
    """Refuse (401) a request whose signature or token does not match the secret."""
    if provider == "github":
        signature = header(headers, "X-Hub-Signature-256") or ""
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            raise WebhookRefused(401, "missing or wrong X-Hub-Signature-256")
    else:
        token = header(headers, "X-Gitlab-Token") or ""
        if not hmac.compare_digest(token.encode(), secret.encode()):
            raise WebhookRefused(401, "missing or wrong X-Gitlab-Token")


def event_kind(provider: Provider, headers: Mapping[str, str]) -> str:
    name = "X-GitHub-Event" if provider == "github" else "X-Gitlab-Event"
    return (header(headers, name) or "").strip()


def is_push(provider: Provider, headers: Mapping[str, str]) -> bool:
    kind = event_kind(provider, headers)
    return kind == "push" if provider == "github" else kind == "Push Hook"


def parse_push(provider: Provider, body: bytes, headers: Mapping[str, str]) -> Push:
    """Read a push payload as the provider documents it; 400 when it is not one."""
    try:
        payload: Any = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested thousands deep
        raise WebhookRefused(400, f"body is not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise WebhookRefused(400, "body is not a JSON object")
    delivery = header(
        headers, "X-GitHub-Delivery" if provider == "github" else "X-Gitlab-Event-UUID"
    )
    try:
        if provider == "github":
            repository = payload["repository"]["full_name"]
        else:
            repository = payload["project"]["path_with_namespace"]
        ref, before, after = payload["ref"], payload["before"], payload["after"]
    except (KeyError, TypeError) as exc:
        raise WebhookRefused(400, f"not a {provider} push payload: missing {exc}") from exc
    if not delivery:
        raise WebhookRefused(400, f"no delivery id header from {provider}")
    branch = ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None
    return Push(provider, delivery, str(repository), branch, str(before), str(after))
