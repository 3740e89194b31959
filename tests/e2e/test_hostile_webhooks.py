"""Webhook deliveries from someone without the secret, or with it and a malformed payload,
posted over HTTP to the real receiver on the embedded stack."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog

from ingest import receiver
from ingest.app import WebhookServer
from tests.support.pipeline import Pipeline
from tests.support.webhooks import Remote, github_push

pytestmark = pytest.mark.e2e

SECRET = "s3cret-for-hostile-tests"
ZERO = "0" * 40
NO_SIGNATURE = object()


@dataclass
class Hooks:
    url: str
    repo: str  # registered, with SECRET
    unset: str  # registered, its secret's variable not set
    unknown: str  # never registered
    source: str


@pytest.fixture
async def hooks(
    shared_pipeline: Pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Hooks]:
    p = shared_pipeline
    monkeypatch.setenv("GOVINDEX_HOSTILE_HOOK_SECRET", SECRET)
    monkeypatch.delenv("GOVINDEX_HOSTILE_UNSET_SECRET", raising=False)
    remote = Remote(tmp_path / "remote")
    remote.commit("2025-01-01T00:00:00Z", {"a.md": "# A\n"})
    hooks = Hooks(
        url="",
        repo=f"acme/{p.tenant}",
        unset=f"acme/{p.tenant}-unset",
        unknown=f"acme/{p.tenant}-unknown",
        source=f"gh-{p.tenant}",
    )
    for source, repo, env in (
        (hooks.source, hooks.repo, "GOVINDEX_HOSTILE_HOOK_SECRET"),
        (f"{hooks.source}-unset", hooks.unset, "GOVINDEX_HOSTILE_UNSET_SECRET"),
    ):
        await p.register(
            source_id=source,
            git={
                "repository": repo,
                "remote_url": str(remote.path),
                "branch": "main",
                "webhook_secret_env": env,
            },
        )
    server = WebhookServer(p.rt)
    hooks.url = await server.start()
    yield hooks
    await server.stop()


def push_body(repo: str, **fields: Any) -> dict[str, Any]:
    return github_push(repo, ZERO, "1" * 40) | fields


def gitlab_body(repo: str, **fields: Any) -> dict[str, Any]:
    return {
        "object_kind": "push",
        "ref": "refs/heads/main",
        "before": ZERO,
        "after": "1" * 40,
        "project": {"path_with_namespace": repo},
    } | fields


async def post(
    url: str,
    provider: str,
    body: dict[str, Any] | bytes,
    *,
    secret: object = SECRET,
    event: str | None = None,
    delivery: str | None = None,
) -> tuple[int, dict[str, Any]]:
    """POST one delivery; `secret=NO_SIGNATURE` sends no signature (or token) header."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    delivery = delivery or str(uuid.uuid4())
    if provider == "github":
        headers = {"X-GitHub-Event": event or "push", "X-GitHub-Delivery": delivery}
        if isinstance(secret, str):
            digest = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
            headers["X-Hub-Signature-256"] = f"sha256={digest}"
    else:
        headers = {"X-Gitlab-Event": event or "Push Hook", "X-Gitlab-Event-UUID": delivery}
        if isinstance(secret, str):
            headers["X-Gitlab-Token"] = secret
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{url}/webhooks/{provider}",
            data=raw,
            headers={**headers, "Content-Type": "application/json"},
        ) as response,
    ):
        assert response.content_type == "application/json", await response.text()
        return response.status, await response.json()


async def test_an_unsigned_push_whose_ref_is_a_number_is_refused_not_a_server_error(
    hooks: Hooks,
) -> None:
    for provider, body in (
        ("github", push_body(hooks.repo, ref=123)),
        ("gitlab", gitlab_body(hooks.repo, ref=123)),
    ):
        status, answer = await post(hooks.url, provider, body, secret=NO_SIGNATURE)
        assert status == 401, (provider, answer)
        assert "ref" not in answer["error"]


async def test_a_signed_push_whose_fields_have_the_wrong_type_is_refused_naming_the_field(
    hooks: Hooks,
) -> None:
    status, answer = await post(hooks.url, "github", push_body(hooks.repo, ref=123))
    assert status == 400
    assert "field 'ref'" in answer["error"] and "123" in answer["error"]
    status, answer = await post(hooks.url, "gitlab", gitlab_body(hooks.repo, before=None))
    assert status == 400 and "field 'before'" in answer["error"]
    nested = push_body(hooks.repo, after={"sha": list(range(10_000))})
    status, answer = await post(hooks.url, "github", nested)
    assert status == 400 and "field 'after'" in answer["error"]
    assert len(answer["error"]) < 300  # the object sent is described, never echoed


async def test_deliveries_that_do_not_verify_get_one_answer_whatever_the_repository(
    hooks: Hooks,
) -> None:
    for provider, body in (("github", push_body), ("gitlab", gitlab_body)):
        answers = set()
        with structlog.testing.capture_logs() as logs:
            for repo in (hooks.repo, hooks.unset, hooks.unknown):
                for secret in (NO_SIGNATURE, "not-the-secret", ""):
                    status, answer = await post(hooks.url, provider, body(repo), secret=secret)
                    answers.add((status, json.dumps(answer, sort_keys=True)))
        assert len(answers) == 1, answers
        ((status, _),) = answers
        assert status == 401
        reasons = {e["reason"] for e in logs if e["event"] == "webhook.refused"}
        assert reasons == {"unknown repository", "signature does not match"}
        assert any(e["event"] == "webhook.no_secret" for e in logs)


async def test_a_repository_name_postgres_cannot_hold_is_answered_as_an_unknown_one(
    hooks: Hooks,
) -> None:
    _, expected = await post(hooks.url, "github", push_body(hooks.unknown), secret="x")
    for name in ("acme/\x00nul", "acme/" + "n" * 100_000):
        assert await post(hooks.url, "github", push_body(name), secret="x") == (401, expected)


async def test_a_ping_with_a_wrong_secret_is_refused(hooks: Hooks) -> None:
    ping = {"zen": "Keep it logically awesome.", "hook_id": 1, "repository": {"full_name": ""}}
    for repo in (hooks.repo, hooks.unknown):
        ping["repository"] = {"full_name": repo}
        for secret in ("not-the-secret", NO_SIGNATURE):
            status, answer = await post(hooks.url, "github", ping, secret=secret, event="ping")
            assert status == 401, answer


async def test_a_ping_with_the_right_secret_says_the_secret_is_ok_for_the_repository(
    hooks: Hooks,
) -> None:
    ping = {"zen": "Design for failure.", "hook_id": 1, "repository": {"full_name": hooks.repo}}
    status, answer = await post(hooks.url, "github", ping, event="ping")
    assert status == 200
    assert answer["ok"] == f"secret OK for repository {hooks.repo!r}"
    assert answer["sources"] == [hooks.source]


async def test_a_payload_that_names_no_repository_is_refused_whatever_its_other_fields(
    hooks: Hooks,
) -> None:
    for body in (
        {"ref": 123},
        {"repository": {"full_name": 123}, "ref": "refs/heads/main"},
        {"repository": "acme/x"},
    ):
        status, answer = await post(hooks.url, "github", body, secret=NO_SIGNATURE)
        assert status == 400 and "repository.full_name" in answer["error"], answer
    status, answer = await post(hooks.url, "github", b"[1, 2]", secret=NO_SIGNATURE)
    assert (status, answer["error"]) == (400, "body is not a JSON object")


async def test_values_sent_are_quoted_short_in_answers(hooks: Hooks) -> None:
    long_branch = push_body(hooks.repo, ref="refs/heads/" + "b" * 100_000)
    status, answer = await post(hooks.url, "github", long_branch)
    assert status == 202 and "indexed branch" in answer["ignored"]
    assert len(answer["ignored"]) < 300
    status, answer = await post(
        hooks.url, "github", {"repository": {"full_name": hooks.repo}}, event="x" * 4000
    )
    assert status == 202 and len(answer["ignored"]) < 300


async def test_a_delivery_id_that_is_not_one_is_refused_before_anything_is_synced(
    hooks: Hooks,
) -> None:
    status, answer = await post(hooks.url, "github", push_body(hooks.repo), delivery="d" * 5000)
    assert status == 400 and "X-GitHub-Delivery" in answer["error"]
    assert len(answer["error"]) < 300


async def test_a_body_over_the_size_cap_is_refused_with_413(hooks: Hooks) -> None:
    body = b'{"pad": "' + b"x" * receiver.MAX_BODY_BYTES + b'"}'
    status, answer = await post(hooks.url, "github", body, secret=NO_SIGNATURE)
    assert status == 413 and "limit" in answer["error"]
