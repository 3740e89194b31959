"""A local mirror of each git source: fetched on every push, diffed by us, never trusted
from a payload (providers truncate file lists for large pushes)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from govindex.core.inputs import quote
from ingest.sources import SourceReadError

# The transports a manifest's remote_url may use (see `GitSettings.remote_url`), enforced by
# git itself too: a manifest registered before that check, or a redirect, cannot reach
# another transport (`ext::` runs commands). Local paths count as `file`.
ALLOWED_PROTOCOLS = "https:ssh:git:file"


def git_environment() -> dict[str, str]:
    """The environment of every git command run against a remote."""
    return {
        **os.environ,
        "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS,
        # A worker has no one to answer a credential prompt: fail instead of hanging.
        "GIT_TERMINAL_PROMPT": "0",
    }


def clone_args(remote_url: str, path: Path) -> list[str]:
    """`git clone` of a bare mirror; the URL after `--`, so it is never read as an option."""
    return ["git", "clone", "--quiet", "--bare", "--", remote_url, str(path)]


def fetch_args(mirror: Path, remote_url: str) -> list[str]:
    """`git fetch` of every branch, forced; the URL after `--`, so it is never an option.

    `--git-dir` rather than `-C`: the fetch runs from the same directory as the clone did, so
    a relative remote_url names the same repository in both.
    """
    return [
        "git",
        f"--git-dir={mirror}",
        "fetch",
        "--quiet",
        "--prune",
        "--force",
        "--",
        remote_url,
        "+refs/heads/*:refs/heads/*",
    ]


class GitMirror:
    def __init__(self, root: Path, source_id: str, remote_url: str) -> None:
        self.path = root / f"{re.sub(r'[^A-Za-z0-9._-]', '_', source_id)}.git"
        self.remote_url = remote_url

    def _run(self, argv: list[str], what: str) -> None:
        done = subprocess.run(argv, capture_output=True, check=False, env=git_environment())
        if done.returncode:
            raise SourceReadError(
                f"cannot {what} {quote(self.remote_url)} into mirror {self.path.name}: "
                f"{done.stderr.decode(errors='replace').strip()}"
            )

    def fetch(self) -> None:
        """Create the mirror on first use, then bring every branch up to date (forced)."""
        if not (self.path / "HEAD").exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._run(clone_args(self.remote_url, self.path), "clone")
        self._run(fetch_args(self.path, self.remote_url), "fetch")

    def head(self, branch: str) -> str | None:
        done = subprocess.run(
            ["git", f"--git-dir={self.path}", "rev-parse", "--verify", f"refs/heads/{branch}"],
            capture_output=True,
            check=False,
        )
        return done.stdout.decode().strip() if done.returncode == 0 else None
