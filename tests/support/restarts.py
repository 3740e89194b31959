"""One embedded server killed under load: the load, the read oracle and the status watch.

`govindex up` runs as a real process group; a test SIGKILLs one of its servers (the pid
stack.json's supervisor section names) while a folder ingest and a read loop run, and
checks with no operator action that the supervisor restarted it, that the pipeline healed,
and that no read ever returned what its subject may not see or what was deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from opensearchpy import OpenSearch

from govindex.control.status import collect_status
from govindex.core.settings import Settings
from tests.support.builders import MANIFEST_YAML
from tests.support.stack import UpProcess, govindex

MANIFEST = "source_id: notes\nsource_type: folder\nfolder:\n  path: {path}\n" + MANIFEST_YAML
SECRET = "zebracode"  # only in documents that group:eng may not read
DELETED = "quokkaword"  # only in documents deleted before the fault


def write_docs(folder: Path, names: range, *, generation: int = 1) -> None:
    """Runbooks group:eng may read; every tenth one readable by HR only, with SECRET."""
    for n in names:
        hidden = n % 10 == 0
        head = '---\nacl: ["group:hr"]\n---\n' if hidden else ""
        word = f" {SECRET}" if hidden else ""
        (folder / f"doc-{n:04d}.md").write_text(
            f"{head}# Runbook {n}\n\nRestart the service {n} and check it{word}. "
            f"Revision {generation}; marker m{n:04d}x.\n"
        )


def write_deleted(folder: Path, names: range) -> None:
    for n in names:
        (folder / f"gone-{n:04d}.md").write_text(
            f"# Old runbook {n}\n\nRestart the service the old way {DELETED}.\n"
        )


def ingest(root: Path, state_dir: Path, folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "govindex.cli.main",
            "ingest",
            "path",
            str(folder),
            "--source",
            "notes",
            "--state-dir",
            str(state_dir),
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def post(stack: dict[str, Any], path: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        stack["read_url"] + path,
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {stack['read_token']}",
            "Content-Type": "application/json",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:  # the read API itself unreachable counts as refused
        return 0, str(exc)


def search_body(query: str, **extra: Any) -> dict[str, Any]:
    return {
        "tenant": "acme",
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "query": query,
        "limit": 50,
        **extra,
    }


@dataclass
class ReadOracle:
    """Reads through the read API (search and packs, so the cache is read too) and the CLI,
    until stopped; every answered body is checked for text the subject may not see."""

    root: Path
    state_dir: Path
    stack: dict[str, Any]
    answered: int = 0
    refused: int = 0
    cli_runs: int = 0
    leaks: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for target in (self._api, self._cli):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _check(self, where: str, text: str) -> None:
        """Every string of the answer but the echoed query text is content."""
        try:
            answer = json.loads(text)
        except ValueError:
            self.leaks.append(f"{where}: not JSON: {text[:200]!r}")
            return
        for value in _strings(answer):
            for word in (SECRET, DELETED):
                if word in value:
                    self.leaks.append(f"{where}: {word} in {value[:300]!r}")

    def _api(self) -> None:
        queries = ("restart the service", f"{SECRET} {DELETED} runbook", "old way")
        n = 0
        while not self._stop.is_set():
            query = queries[n % len(queries)]
            path, body = (
                ("/v1/packs", search_body(query)) if n % 2 else ("/v1/search", search_body(query))
            )
            status, text = post(self.stack, path, body)
            if status == 200:
                self.answered += 1
                self._check(f"POST {path}", text)
            else:
                self.refused += 1
            n += 1
            time.sleep(0.1)

    def _cli(self) -> None:
        while not self._stop.wait(2.0):
            done = govindex(
                self.root,
                "query",
                f"restart {SECRET} {DELETED}",
                "--tenant",
                "acme",
                "--principal",
                "group:eng",
                "--purpose",
                "support",
                "--json",
                "--state-dir",
                str(self.state_dir),
                check=False,
                timeout=120,
            )
            self.cli_runs += 1
            if done.returncode == 0:  # one JSON object per hit
                for line in done.stdout.splitlines():
                    if line.strip():
                        self._check("govindex query", line)


def _strings(node: Any, key: str = "") -> list[str]:
    if isinstance(node, str):
        return [] if key == "query" else [node]
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in _strings(v, k)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v, key)]
    return []


@dataclass
class StatusWatch:
    """`govindex status`'s verdict on one server, sampled until stopped."""

    state_dir: Path
    server: str
    samples: list[tuple[float, bool]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        env = {k: v for k, v in os.environ.items() if k.startswith("GOVINDEX_")}
        assert not env, f"the status watch must read stack.json only, not {sorted(env)}"
        while not self._stop.is_set():
            self._sample()
            time.sleep(0.05)

    def stop(self, settle_s: float = 90.0) -> None:
        """Stop sampling, then sample until the server is reported ok again (a sample taken
        while the server was away may have finished only now, still saying not ok)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
        deadline = time.monotonic() + settle_s
        while True:
            ok = self._sample()
            if ok or time.monotonic() > deadline:
                return
            time.sleep(0.5)

    def _sample(self) -> bool:
        settings = Settings(state_dir=self.state_dir).require_servers()
        report = asyncio.run(collect_status(settings))
        ok = bool(report["servers"][self.server]["ok"])
        self.samples.append((time.monotonic(), ok))
        return ok

    def went_down_and_up(self, since: float) -> bool:
        after = [ok for t, ok in self.samples if t >= since]
        return False in after and after[-1] is True


def kill_server(stack_file: Path, server: str) -> int:
    """SIGKILL one embedded server by the pid the supervisor wrote; returns the pid."""
    pid = int(json.loads(stack_file.read_text())["supervisor"][server]["pid"])
    os.kill(pid, signal.SIGKILL)
    return pid


def wait_restarted(stack_file: Path, server: str, old_pid: int, timeout: float = 60) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        with contextlib.suppress(OSError, ValueError, KeyError):
            entry = json.loads(stack_file.read_text())["supervisor"][server]
            if entry["state"] == "running" and entry["pid"] != old_pid:
                return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"{server} was not restarted within {timeout}s")


def opensearch_docs(stack: dict[str, Any]) -> set[str]:
    """The doc ids the live generation holds chunks of (none while the alias is missing)."""
    search = OpenSearch(hosts=[stack["opensearch_url"]])
    alias = f"{stack['namespace']}-chunks"
    try:
        if not search.indices.exists_alias(name=alias):
            return set()
        search.indices.refresh(index=alias)
        found = search.search(
            index=alias,
            body={"size": 10000, "query": {"match_all": {}}, "_source": ["doc_id"]},
        )
    finally:
        search.close()
    return {hit["_source"]["doc_id"] for hit in found["hits"]["hits"]}


def held_by_opensearch(stack: dict[str, Any], want: set[str], timeout: float = 180) -> float:
    """Until the live generation holds every document of `want`; returns the seconds."""
    start = time.monotonic()
    held: set[str] = set()
    while time.monotonic() - start < timeout:
        with contextlib.suppress(Exception):  # the server may be starting
            held = opensearch_docs(stack)
            if want <= held:
                return time.monotonic() - start
        time.sleep(0.5)
    raise AssertionError(f"{len(want - held)} active documents missing from BM25")


def up(root: Path, state_dir: Path) -> tuple[UpProcess, dict[str, Any]]:
    process = UpProcess(root, state_dir, "--no-reconcile")
    return process, process.wait_ready()


def vectorless_chunks(stack: dict[str, Any], timeout: float = 120) -> int:
    """Current chunks of active documents without a vector, once embedding has caught up."""
    deadline = time.monotonic() + timeout
    while True:
        with psycopg.connect(stack["pg_dsn"], connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT count(*) FROM chunks c JOIN documents d USING (tenant_id, source_id, "
                "doc_id) WHERE d.state = 'active' AND c.superseded_at IS NULL AND NOT EXISTS "
                "(SELECT 1 FROM chunk_vectors v WHERE v.chunk_id = c.chunk_id)"
            ).fetchone()
        missing = int(row[0]) if row else 0
        if missing == 0 or time.monotonic() > deadline:
            return missing
        time.sleep(1.0)


def heal_jobs(stack: dict[str, Any]) -> int:
    """Rebuild jobs the workers started by themselves, succeeded."""
    with psycopg.connect(stack["pg_dsn"], connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT count(*) FROM jobs WHERE kind = 'reindex' AND requested_by = %s "
            "AND state = 'succeeded'",
            ("govindex self-heal",),
        ).fetchone()
    return int(row[0]) if row else 0
