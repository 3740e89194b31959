"""A local mirror of each git source: fetched on every push, diffed by us, never trusted
from a payload (providers truncate file lists for large pushes)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ingest.sources import SourceReadError


class GitMirror:
    def __init__(self, root: Path, source_id: str, remote_url: str) -> None:
        self.path = root / f"{re.sub(r'[^A-Za-z0-9._-]', '_', source_id)}.git"
        self.remote_url = remote_url

    def _git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(
                ["git", "-C", str(self.path), *args], capture_output=True, check=check
            )
        except subprocess.CalledProcessError as exc:
            raise SourceReadError(
                f"git {' '.join(args[:2])} failed for mirror {self.path.name}: "
                f"{exc.stderr.decode(errors='replace').strip()}"
            ) from exc

    def fetch(self) -> None:
        """Create the mirror on first use, then bring every branch up to date (forced)."""
        if not (self.path / "HEAD").exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                ["git", "clone", "--quiet", "--bare", self.remote_url, str(self.path)],
                capture_output=True,
                check=False,
            )
            if done.returncode:
                raise SourceReadError(
                    f"cannot clone {self.remote_url}: {done.stderr.decode(errors='replace')}"
                )
        self._git(
            "fetch", "--quiet", "--prune", "--force", self.remote_url, "+refs/heads/*:refs/heads/*"
        )

    def head(self, branch: str) -> str | None:
        done = self._git("rev-parse", "--verify", f"refs/heads/{branch}", check=False)
        return done.stdout.decode().strip() if done.returncode == 0 else None
