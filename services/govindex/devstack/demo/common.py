"""What the demo's walkthroughs share: its reader, its git repositories built from the
bundled corpus, and waiting on the pipeline's real state rather than on a sleep."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import TypeVar

from govindex.runtime.composition import Runtime
from reader.app import read_service
from reader.models import Filters, Hit, SearchRequest, Subject

T = TypeVar("T")
DEMO_USER = ("user:dana", "group:eng")
# (corpus folder, commit time, message): each folder is the whole tree at that commit.
Commit = tuple[str, str, str]


def copy_corpus(dest: Path, *parts: str) -> None:
    """Copy a folder of the bundled corpus (shipped as package data) into `dest`."""
    folder = resources.files("govindex.devstack.demo").joinpath("corpus", *parts)
    with resources.as_file(folder) as source:
        shutil.copytree(source, dest, dirs_exist_ok=True)


def build_repo(repo: Path, commits: Sequence[Commit], *under: str) -> list[str]:
    """A git repository whose history is `commits`, dated as they say (author and
    committer), so valid time follows the story and not the moment the demo runs."""
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Demo",
        "GIT_AUTHOR_EMAIL": "demo@example.com",
        "GIT_COMMITTER_NAME": "Demo",
        "GIT_COMMITTER_EMAIL": "demo@example.com",
    }

    def git(*args: str, when: str | None = None) -> str:
        extra = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if when else {}
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            check=True,
            capture_output=True,
            text=True,
            env={**env, **extra},
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    shas = []
    for folder, when, message in commits:
        for path in repo.iterdir():
            if path.name != ".git":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        copy_corpus(repo, *under, folder)
        git("add", "-A")
        git("commit", "-q", "-m", message, when=when)
        shas.append(git("rev-parse", "HEAD"))
    return shas


async def search(
    rt: Runtime,
    tenant: str,
    text: str,
    who: Sequence[str],
    as_of: datetime,
    *,
    purpose: str = "support",
    filters: Filters | None = None,
) -> list[Hit]:
    """The governed read service (all channels fused, every gate), as a pack builder sees it."""
    request = SearchRequest(
        tenant=tenant,
        subject=Subject(principals=list(who)),
        purpose=purpose,
        as_of=as_of,
        query=text,
        filters=filters or Filters(),
        limit=3,
        cache="bypass",
    )
    return (await read_service(rt).search(request)).hits


async def until(probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = 60) -> T:
    """Poll until `probe` gives a truthy value; the demo waits on real pipeline state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := await probe():
            return value
        await asyncio.sleep(0.2)
    raise TimeoutError(f"gave up after {timeout:.0f}s waiting for {what}")


async def caught_up(rt: Runtime, source_id: str) -> bool:
    return await rt.ingest_state.behind(source_id) == 0
