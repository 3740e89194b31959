"""`govindex backfill` against a running `govindex up`, racing live updates of the same
documents and killed half-way: resumed from its checkpoint, it leaves every document with
the newest content of its source, never an older copy."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from govindex.core.hashing import sha256_hex
from tests.support.builders import MANIFEST_YAML
from tests.support.operator import job_of, settled, stack_of, wait_job
from tests.support.pipeline import read_topic
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e


def current(dsn: str) -> dict[str, tuple[str, int]]:
    """doc_id -> (content hash, last sequence) of the active documents of source fb."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT doc_id, content_hash, last_sequence FROM documents "
            "WHERE source_id = 'fb' AND state = 'active'"
        ).fetchall()
    return {r[0]: (str(r[1]), int(r[2])) for r in rows}


def test_a_backfill_racing_live_updates_keeps_the_newest(running: Path) -> None:
    root, stack = running, stack_of(running)
    dsn = stack["pg_dsn"]
    (root / "fb.yaml").write_text("source_id: fb\nsource_type: folder\n" + MANIFEST_YAML)
    govindex(root, "source", "apply", "fb.yaml")
    folder = root / "fold"
    folder.mkdir()
    total = 60
    versions: dict[str, int] = {}  # content hash -> which version of its document it is

    def write(n: int, version: int) -> None:
        text = f"# Doc {n}\n\nText {version} of {n}.\n"
        versions[sha256_hex(text)] = version
        staged = folder / f".d{n:02d}.md"  # hidden: never read as a document
        staged.write_text(text)
        staged.replace(folder / f"d{n:02d}.md")  # a reader sees the old or the new, whole

    for n in range(total):
        write(n, 1)
    govindex(root, "ingest", "path", "fold", "--source", "fb")
    settled(dsn)
    first = current(dsn)
    assert len(first) == total

    dry = govindex(root, "backfill", "--source", "fb").stdout
    assert f"{total} updated" in dry and "dry run" in dry, dry
    dry_id = job_of(root, dry)["id"]

    stop, rounds, failures = threading.Event(), [], []
    rng = random.Random(11)

    def live() -> None:  # a connector keeps changing documents the backfill re-reads
        version = 2
        try:
            while not stop.is_set():
                for n in rng.sample(range(total), 4):
                    write(n, version)
                govindex(root, "ingest", "path", "fold", "--source", "fb")
                rounds.append(time.monotonic())
                version += 1
        except BaseException as exc:  # a sync that failed left its writes unemitted
            failures.append(exc)
            raise

    loader = threading.Thread(target=live, daemon=True)
    loader.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")}
    command = [sys.executable, "-m", "govindex.cli.main", "backfill", "--source", "fb"]
    try:
        backfill = subprocess.Popen(
            [*command, "--rate", "6", "--execute"],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            job = wait_job(stack, lambda j: j["id"] > dry_id and j["done"] >= 20, kind="backfill")
            os.kill(backfill.pid, signal.SIGKILL)
            backfill.wait(timeout=30)
        finally:
            if backfill.poll() is None:
                backfill.kill()
        killed = wait_job(stack, lambda j: True, kind="backfill")
        assert killed["state"] == "running" and 20 <= killed["done"] < total, killed
        resumed = govindex(root, "jobs", "resume", str(job["id"])).stdout
        assert "succeeded" in resumed, resumed
        time.sleep(2)
    finally:
        stop.set()
        loader.join(timeout=120)
    assert not loader.is_alive(), "the live loop did not finish its last round"
    assert not failures, f"a live sync racing the backfill failed: {failures[0]}"
    assert len(rounds) >= 3, f"only {len(rounds)} live rounds ran alongside the backfill"
    final = job_of(root, resumed)
    assert final["done"] == total and final["counts"]["updated"] >= total, final

    settled(dsn)
    after = current(dsn)
    newest = {
        f"d{n:02d}.md": sha256_hex((folder / f"d{n:02d}.md").read_text()) for n in range(total)
    }
    assert {d: h for d, (h, _) in after.items()} == newest
    assert all(after[d][1] > first[d][1] for d in first), "a document was not backfilled"
    # What was emitted, in each document's sequence order, never goes back to older content
    # (later live rounds would mend the index; the stream shows a backfill copy that lost).
    emitted: dict[str, list[tuple[int, int]]] = {}
    for record in read_topic(stack["kafka_bootstrap"], f"{stack['namespace']}.documents"):
        data = json.loads(record.value)
        if data.get("source_id") == "fb" and "content_hash" in data:
            emitted.setdefault(data["doc_id"], []).append(
                (data["sequence"], versions[data["content_hash"]])
            )
    assert sum(len(x) for x in emitted.values()) >= total * 2  # the first ingest, the backfill
    for doc_id, seen in emitted.items():
        ordered = [version for _, version in sorted(seen)]
        assert ordered == sorted(ordered), (doc_id, sorted(seen))
