"""`govindex up` as a real process group: start it, wait until ready, kill all of it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from opensearchpy import OpenSearch

READY = "Press Ctrl-C to stop"


def govindex(cwd: Path, *args: str, check: bool = True, timeout: float = 180) -> Any:
    """Run one CLI command as a user would, with no GOVINDEX_* settings (the stack.json)."""
    done = subprocess.run(
        [sys.executable, "-m", "govindex.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
    )
    if check and done.returncode != 0:
        raise AssertionError(f"govindex {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


class UpProcess:
    """`govindex up` in its own session (process group): every server it starts is in it."""

    def __init__(self, cwd: Path, state_dir: Path, *args: str) -> None:
        self.cwd, self.state_dir = cwd, state_dir
        self.log = state_dir.parent / f"up-{int(time.time() * 1000)}.log"
        state_dir.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "govindex.cli.main", "up", "--state-dir", str(state_dir), *args],
            cwd=cwd,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if READY in self.output():
                return dict(json.loads((self.state_dir / "stack.json").read_text()))
            if self.proc.poll() is not None:
                raise AssertionError(f"govindex up exited:\n{self.output()}")
            time.sleep(0.2)
        raise AssertionError(f"govindex up not ready in {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill_all(self) -> None:
        """SIGKILL to every process of the stack at once: a power cut, an OOM kill."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        _wait_gone(self.proc.pid)

    def stop(self) -> str:
        """Ctrl-C, as a person stops it; returns its output."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=90)
        return self.output()


def remove_stack_data(state_dir: Path) -> None:
    """Delete a test stack's PostgreSQL data kept outside the state dir (as root)."""
    location = state_dir / "postgres.location"
    if location.exists():
        shutil.rmtree(Path(location.read_text().strip()).parent, ignore_errors=True)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")}


def _wait_gone(pgid: int, timeout: float = 30) -> None:
    """Until no process of the group is left (a killed server may take a moment to die)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def index_state(stack: dict[str, Any], source: str) -> dict[str, Any]:
    """What Postgres and OpenSearch hold for the source, and what is left of deletions."""
    with psycopg.connect(stack["pg_dsn"], connect_timeout=5) as conn:
        active = dict(
            conn.execute(
                "SELECT doc_id, content_hash FROM documents WHERE source_id = %s "
                "AND state = 'active'",
                (source,),
            ).fetchall()
        )
        deleted = [
            r[0]
            for r in conn.execute(
                "SELECT doc_id FROM documents WHERE source_id = %s AND state = 'deleted'",
                (source,),
            ).fetchall()
        ]
        leftovers = conn.execute(
            "SELECT (SELECT count(*) FROM chunks c JOIN documents d USING "
            "  (tenant_id, source_id, doc_id) WHERE d.state = 'deleted'), "
            " (SELECT count(*) FROM document_versions v JOIN documents d USING "
            "  (tenant_id, source_id, doc_id) WHERE d.state = 'deleted' "
            "  AND v.content IS NOT NULL), "
            " (SELECT count(*) FROM documents d WHERE d.state = 'deleted' AND NOT EXISTS ("
            "  SELECT 1 FROM purge_receipts r WHERE r.doc_id = d.doc_id "
            "  AND r.sequence = d.last_sequence)), "
            " (SELECT count(*) FROM outbox WHERE awaits IS NOT NULL AND settled_at IS NULL)"
        ).fetchone()
    search = OpenSearch(hosts=[stack["opensearch_url"]])
    try:
        search.indices.refresh(index=f"{stack['namespace']}-chunks-g*")
        found = search.search(
            index=f"{stack['namespace']}-chunks-g*",
            body={
                "size": 0,
                "query": {"terms": {"doc_id": deleted or ["-"]}},
            },
        )
        os_deleted = found["hits"]["total"]["value"]
    finally:
        search.close()
    assert leftovers is not None
    return {
        "active": active,
        "deleted": set(deleted),
        "pg_chunks_of_deleted": leftovers[0],
        "pg_content_of_deleted": leftovers[1],
        "deleted_without_receipt": leftovers[2],
        "pending_events": leftovers[3],
        "os_chunks_of_deleted": os_deleted,
    }


def blobs_of(stack: dict[str, Any], hashes: set[str]) -> int:
    with psycopg.connect(stack["pg_dsn"], connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT count(*) FROM blobs WHERE content_hash = ANY(%s)", (sorted(hashes),)
        ).fetchone()
    return int(row[0]) if row else 0


def converged(
    stack: dict[str, Any], source: str, want: dict[str, str], timeout: float = 240
) -> dict[str, Any]:
    """Until the source's active documents are exactly `want` (doc id -> content hash), every
    deleted one is gone from Postgres and OpenSearch with a receipt, and nothing is pending."""
    deadline = time.monotonic() + timeout
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            state = index_state(stack, source)
        except (psycopg.Error, OSError):
            time.sleep(0.5)
            continue
        if (
            state["active"] == want
            and state["pg_chunks_of_deleted"] == 0
            and state["pg_content_of_deleted"] == 0
            and state["deleted_without_receipt"] == 0
            and state["os_chunks_of_deleted"] == 0
            and state["pending_events"] == 0
        ):
            return state
        time.sleep(1.0)
    missing = {k for k in want if state.get("active", {}).get(k) != want[k]}
    extra = set(state.get("active", {})) - set(want)
    raise AssertionError(
        f"not converged in {timeout}s: {len(missing)} missing or stale, {len(extra)} deleted "
        f"but active, state { ({k: v for k, v in state.items() if k != 'active'}) }"
    )


def parent_modes(path: Path) -> list[tuple[str, int]]:
    return [(str(p), p.stat().st_mode) for p in (path, *path.parents)]
