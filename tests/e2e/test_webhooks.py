"""Git push webhooks (GitHub and GitLab) against a real local repository and the pipeline."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ingest import sources
from ingest.app import WebhookServer
from tests.support.pipeline import Pipeline, query, until
from tests.support.webhooks import Remote, github_push

pytestmark = pytest.mark.e2e

SECRET = "s3cret-for-tests"
ZERO = "0" * 40


@pytest.fixture
async def hooks(
    pipeline: Pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Pipeline, Remote, str]]:
    monkeypatch.setenv("GOVINDEX_TEST_HOOK_SECRET", SECRET)
    monkeypatch.setattr(sources, "MAX_FILE_BYTES", 4096)
    remote = Remote(tmp_path / "remote")
    await pipeline.register(
        source_id=f"gh-{pipeline.tenant}",
        git={
            "repository": f"acme/{pipeline.tenant}",
            "remote_url": str(remote.path),
            "branch": "main",
            "include": ["*.md"],
            "webhook_secret_env": "GOVINDEX_TEST_HOOK_SECRET",
        },
    )
    server = WebhookServer(pipeline.rt)
    url = await server.start()
    yield pipeline, remote, url
    await server.stop()


async def deliver(
    url: str,
    provider: str,
    body: dict[str, Any] | bytes,
    *,
    delivery: str | None = None,
    secret: str = SECRET,
    event: str | None = None,
) -> tuple[int, dict[str, Any]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    delivery = delivery or str(uuid.uuid4())
    if provider == "github":
        headers = {
            "X-GitHub-Event": event or "push",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": "sha256="
            + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest(),
        }
    else:
        headers = {
            "X-Gitlab-Event": event or "Push Hook",
            "X-Gitlab-Token": secret,
            "X-Gitlab-Event-UUID": delivery,
        }
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{url}/webhooks/{provider}",
            data=raw,
            headers={**headers, "Content-Type": "application/json"},
        ) as response,
    ):
        return response.status, await response.json()


def gitlab_push(repo: str, before: str, after: str) -> dict[str, Any]:
    return {
        "object_kind": "push",
        "event_name": "push",
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "checkout_sha": after,
        "project": {"path_with_namespace": repo},
        "commits": [],
        "total_commits_count": 0,
    }


# Long: one repository history (add, edit, rename, delete, force push, branch gone).
async def test_pushes_keep_the_index_equal_to_the_branch_head(
    hooks: tuple[Pipeline, Remote, str],
) -> None:
    p, remote, url = hooks
    source, repo = f"gh-{p.tenant}", f"acme/{p.tenant}"

    a = remote.commit(
        "2025-01-01T00:00:00Z",
        {
            "a.md": "# A\nalpha one\n",
            "docs/b.md": "# B\nbravo\n",
            "logo.md": b"\x89PNG\x00\x00binary",
            "big.md": "# Big\n" + "x " * 3000,
            "notes.txt": "not included\n",
        },
    )
    status, body = await deliver(url, "github", github_push(repo, ZERO, a), delivery="d-1")
    assert status == 200
    assert body["sources"][source]["created"] == 2
    assert {s["doc_id"] for s in body["sources"][source]["skipped"]} == {"logo.md", "big.md"}
    await p.wait_caught_up(source)
    assert await p.active_documents(source) == {
        k: v for k, v in remote.tree().items() if k in ("a.md", "docs/b.md")
    }

    # Redelivery of the same delivery id emits nothing.
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT sum(last_sequence) FROM ingest_documents WHERE source_id = %s", (source,)
        )
        before_sequences = await cur.fetchone()
    assert await deliver(url, "github", github_push(repo, ZERO, a), delivery="d-1") == (
        200,
        {"duplicate": "d-1"},
    )
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT sum(last_sequence) FROM ingest_documents WHERE source_id = %s", (source,)
        )
        assert await cur.fetchone() == before_sequences

    # Edit a.md and rename docs/b.md -> docs/c.md, delivered by GitLab.
    b = remote.commit(
        "2025-02-01T00:00:00Z",
        {"a.md": "# A\nalpha two\n", "docs/b.md": None, "docs/c.md": "# B\nbravo\n"},
    )
    status, body = await deliver(url, "gitlab", gitlab_push(repo, a, b))
    assert status == 200 and body["sources"][source] | {"skipped": []} == {
        "created": 1,
        "updated": 1,
        "deleted": 1,
        "unchanged": 0,
        "skipped": [],
    }

    # Delete a.md, then force-push the branch back to b plus a new commit.
    c = remote.commit("2025-03-01T00:00:00Z", {"a.md": None})
    assert (await deliver(url, "github", github_push(repo, b, c)))[0] == 200
    remote.git("reset", "-q", "--hard", b)
    d = remote.commit("2025-04-01T00:00:00Z", {"docs/c.md": "# B\nbravo, edited\n"})
    assert (await deliver(url, "github", github_push(repo, c, d)))[0] == 200
    await p.wait_caught_up(source)
    assert await p.active_documents(source) == remote.tree()

    # as_of an older commit's time returns that commit's content.
    in_march = datetime(2025, 3, 15, tzinfo=UTC)
    assert await query(p, "bravo", as_of=in_march) == ["# B\nbravo\n"]
    assert await query(p, "bravo") == ["# B\nbravo, edited\n"]
    assert await query(p, "alpha") == ["# A\nalpha two\n"]
    # a.md was deleted (push c) before it came back: once that deletion is purged, its old
    # versions are gone from history too (tombstone_and_purge), January's included.
    await until(lambda: _purges(p, "a.md"), lambda n: n >= 1, 60, "the purge of a.md")
    in_january = datetime(2025, 1, 15, tzinfo=UTC)
    assert await query(p, "alpha", as_of=in_january) == []

    # The branch is deleted: the source's documents follow the deletion policy.
    remote.git("checkout", "-q", "-b", "elsewhere")
    remote.git("branch", "-q", "-D", "main")
    assert (await deliver(url, "github", github_push(repo, d, ZERO)))[0] == 200
    await p.wait_caught_up(source)
    assert await p.active_documents(source) == {}
    assert await query(p, "alpha bravo") == []


async def _purges(p: Pipeline, doc_id: str) -> int:
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM purge_receipts WHERE tenant_id = %s AND doc_id = %s",
            (p.tenant, doc_id),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def test_bad_signatures_unknown_repositories_and_other_events(
    hooks: tuple[Pipeline, Remote, str],
) -> None:
    p, remote, url = hooks
    repo = f"acme/{p.tenant}"
    head = remote.commit("2025-01-01T00:00:00Z", {"a.md": "# A\n"})
    status, body = await deliver(url, "github", github_push(repo, ZERO, head), secret="wrong")
    assert status == 401 and "signature" in body["error"]
    status, body = await deliver(url, "gitlab", gitlab_push(repo, ZERO, head), secret="")
    assert status == 401
    # An unknown repository is answered as a bad signature is, never named as unregistered.
    status, body = await deliver(url, "github", github_push("acme/elsewhere", ZERO, head))
    assert status == 401 and "signature" in body["error"]
    status, body = await deliver(url, "github", github_push(repo, ZERO, head, "refs/heads/dev"))
    assert status == 202 and "indexed branch" in body["ignored"]
    issue = {"action": "opened", "repository": {"full_name": repo}}
    status, body = await deliver(url, "github", issue, event="issues")
    assert status == 202 and "only pushes" in body["ignored"]
    status, body = await deliver(url, "github", {"ref": "refs/heads/main"})
    assert status == 400
    deep = b'{"ref": ' + b"[" * 5000 + b"]" * 5000 + b"}"  # Python's parser recurses
    status, body = await deliver(url, "github", deep)
    assert status == 400 and "not JSON" in body["error"]
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM ingest_documents WHERE source_id = %s", (f"gh-{p.tenant}",)
        )
        assert await cur.fetchone() == (0,)


async def test_reconcile_repairs_a_missed_webhook_and_a_lost_event(
    hooks: tuple[Pipeline, Remote, str],
) -> None:
    p, remote, url = hooks
    source, repo = f"gh-{p.tenant}", f"acme/{p.tenant}"
    first = remote.commit("2025-01-01T00:00:00Z", {"a.md": "# A\none\n", "b.md": "# B\nturnip\n"})
    assert (await deliver(url, "github", github_push(repo, ZERO, first)))[0] == 200
    await p.wait_caught_up(source)

    # Missed webhook: b.md deleted and c.md added with no delivery at all.
    remote.commit("2025-02-01T00:00:00Z", {"b.md": None, "c.md": "# C\nnew\n"})
    # Lost event: the connector recorded a.md's new version, but the event never arrived.
    remote.commit("2025-03-01T00:00:00Z", {"a.md": "# A\ntwo\n"})
    blob = remote.git("rev-parse", "HEAD:a.md")
    async with p.pool.connection() as conn:
        await conn.execute(
            "UPDATE ingest_documents SET content_hash = %s "
            "WHERE source_id = %s AND doc_id = 'a.md'",
            (f"git-blob:{blob}", source),
        )
    assert await query(p, "turnip") == ["# B\nturnip\n"]
    # Another producer put a document in the index at a high sequence the connector never saw.
    await p.wait_processed(p.publish(p.change("zzz.md", 50, "# Z\nparsnip\n", source=source)))

    from ingest.app import reconcile_source

    _, drift, report = await reconcile_source(p.rt, source)
    assert drift.missing_or_stale == ["a.md", "c.md"]
    assert drift.only_in_index == ["b.md", "zzz.md"]
    assert (len(report.created), len(report.updated), len(report.deleted)) == (1, 1, 2)
    await p.wait_caught_up(source)
    assert await p.active_documents(source) == remote.tree()
    assert await query(p, "turnip") == []
    assert await query(p, "parsnip") == []  # its deletion outranked sequence 50
