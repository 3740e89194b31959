"""A real git repository standing in for a provider's, and its push payloads, signed."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from govindex.core.hashing import sha256_hex
from ingest import sources
from tests.support.pipeline import git


class Remote:
    """A real git repository standing in for the provider's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, when: str = "2025-01-01T00:00:00Z") -> str:
        return git(self.path, *args, when=when)

    def commit(self, when: str, files: dict[str, str | bytes | None]) -> str:
        for name, content in files.items():
            target = self.path / name
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", f"change at {when}", when=when)
        return self.git("rev-parse", "HEAD")

    def tree(self) -> dict[str, str]:
        """doc_id -> content hash of the indexable files at HEAD."""
        names = self.git("ls-files").splitlines()
        out = {}
        for name in names:
            data = (self.path / name).read_bytes()
            text = sources.decode_text(data, name)
            if name.endswith(".md") and isinstance(text, str):
                out[name] = sha256_hex(text)
        return out


def github_push(repo: str, before: str, after: str, ref: str = "refs/heads/main") -> dict[str, Any]:
    return {
        "ref": ref,
        "before": before,
        "after": after,
        "forced": False,
        "repository": {"full_name": repo, "name": repo.split("/")[1]},
        "commits": [],
        "head_commit": None,
    }


def post_github_push(url: str, body: dict[str, Any], secret: str, timeout: float = 120) -> int:
    """Deliver a signed GitHub push synchronously; the HTTP status."""
    raw = json.dumps(body).encode()
    request = urllib.request.Request(
        f"{url}/webhooks/github",
        data=raw,
        headers={
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": "sha256="
            + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest(),
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return int(response.status)
