"""`govindex reindex` as a job against a running `govindex up`, while a connector keeps
updating, adding and deleting documents: the new generation ends equal to Postgres, chunk
by chunk; `--verify` finds and repairs a generation that drifted."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opensearchpy import OpenSearch

from tests.support.operator import apply_source, job_of, settled, stack_of
from tests.support.pipeline import git
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e

Digests = dict[str, tuple[int, str]]


def stored(dsn: str) -> Digests:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT chunk_id, sequence, content_hash FROM chunks").fetchall()
    return {r[0]: (int(r[1]), str(r[2])) for r in rows}


def held(url: str, index: str) -> Digests:
    client = OpenSearch(hosts=[url])
    client.indices.refresh(index=index)
    found = client.search(
        index=index,
        body={"size": 10000, "_source": ["sequence", "content_hash"], "query": {"match_all": {}}},
    )
    client.close()
    hits = found["hits"]["hits"]
    return {h["_id"]: (int(h["_source"]["sequence"]), h["_source"]["content_hash"]) for h in hits}


def live_index(url: str, alias: str = "govindex-chunks") -> str:
    client = OpenSearch(hosts=[url])
    (name,) = client.indices.get_alias(name=alias)
    client.close()
    return str(name)


def write(repo: Path, n: int, version: int) -> None:
    (repo / f"doc{n:03d}.md").write_text(
        f"# Runbook {n}\n\n## Check\n\nVersion {version} of the check for {n}.\n\n"
        f"## Fix\n\nVersion {version} of the fix for {n}.\n"
    )


def test_a_reindex_under_updates_and_deletes_ends_equal_to_postgres(running: Path) -> None:
    root, stack = running, stack_of(running)
    dsn, url = stack["pg_dsn"], stack["opensearch_url"]
    apply_source(root, "hb")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    alive = set(range(60))
    for n in alive:
        write(repo, n, 1)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    govindex(root, "ingest", "git", "repo", "--source", "hb")
    settled(dsn)
    before = live_index(url)

    stop, rounds, failures = threading.Event(), [], []
    rng = random.Random(7)

    def load() -> None:
        try:
            rounds_of_load()
        except BaseException as exc:  # a failed sync would leave the load short, unseen
            failures.append(exc)
            raise

    def rounds_of_load() -> None:
        version, fresh = 2, 1000
        while not stop.is_set():
            for n in rng.sample(sorted(alive), 6):
                write(repo, n, version)
            for n in rng.sample(sorted(alive), 2):
                (repo / f"doc{n:03d}.md").unlink()
                alive.discard(n)
            for _ in range(2):
                write(repo, fresh, version)
                alive.add(fresh)
                fresh += 1
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", f"round {version}")
            govindex(root, "ingest", "git", "repo", "--source", "hb")
            rounds.append(time.monotonic())
            version += 1

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        time.sleep(2)
        started = time.monotonic()
        reindex = subprocess.run(
            [sys.executable, "-m", "govindex.cli.main", "reindex", "--rate", "40", "--execute"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
            env={k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")},
        )
        ended = time.monotonic()
        time.sleep(3)  # and a little after the switch
    finally:
        stop.set()
        loader.join(timeout=120)
    assert not loader.is_alive(), "the load did not finish its last round"
    assert not failures, f"a sync of the load failed: {failures[0]}"
    assert reindex.returncode == 0, reindex.stdout + reindex.stderr
    job: dict[str, Any] = job_of(root, reindex.stdout)
    during = [t for t in rounds if started <= t <= ended]
    assert len(during) >= 2, f"only {len(during)} load rounds ran during the rebuild"
    assert job["state"] == "succeeded" and job["counts"]["switched"] == 1, job
    generation = job["checkpoint"]["generation"]
    after = live_index(url)
    assert after != before and after.endswith(f"-g{generation:04d}")

    settled(dsn)
    want, got = stored(dsn), held(url, after)
    assert len(want) > 120
    assert got == want, {
        "missing": sorted(set(want) - set(got))[:5],
        "extra": sorted(set(got) - set(want))[:5],
        "differ": [c for c in want if c in got and got[c] != want[c]][:5],
    }

    # A generation that drifted (a chunk lost, one that Postgres never held): found by a dry
    # run, repaired by an execute, clean afterwards. (The loss leaves its version at the
    # chunk's sequence, as a restore or a versioned delete does; a delete without a version
    # leaves one above it, which OpenSearch forgets after index.gc_deletes.)
    client = OpenSearch(hosts=[url])
    lost = sorted(want)[0]
    client.delete(
        index=after, id=lost, version=want[lost][0], version_type="external_gte", refresh=True
    )
    client.index(
        index=after,
        id="f" * 32,
        body={"chunk_id": "f" * 32, "sequence": 1, "content_hash": "sha256:00"},
        refresh=True,
    )
    client.close()
    dry = job_of(root, govindex(root, "reindex", "--verify").stdout)
    assert dry["counts"]["missing_or_stale"] == 1 and dry["counts"]["extra"] == 1, dry["counts"]
    fixed = job_of(root, govindex(root, "reindex", "--verify", "--execute").stdout)
    assert fixed["counts"]["repaired"] == 1 and fixed["counts"]["removed"] == 1, fixed
    clean = job_of(root, govindex(root, "reindex", "--verify").stdout)
    assert clean["counts"]["differences"] == 0, clean
    assert held(url, after) == stored(dsn)
