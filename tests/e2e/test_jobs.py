"""Operator jobs against a running `govindex up`, from a second terminal: dead letters
listed, redriven as a job (dry run first), quarantined after three failed redrives, and a
redrive killed half-way resumed from its checkpoint without redriving anything twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from govindex.core.deadletters import JOB_HEADER, REDRIVES_HEADER
from tests.support.operator import job_of, letters, poison, stack_of, wait_job, wait_letters
from tests.support.pipeline import read_topic
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e


def test_a_poison_record_is_redriven_three_times_then_quarantined(running: Path) -> None:
    root, stack = running, stack_of(running)
    poison(stack, "ghost", range(1))
    [letter] = wait_letters(root, 1, "--reason", "unknown_source")
    assert letter["consumer"] == "indexer" and letter["redrives"] == 0
    assert "ghost" in letter["error"] and letter["handled"] == ""
    assert letter["document"] == "acme/ghost/d0.md"  # which document it is about
    table = govindex(root, "dlq", "list").stdout
    assert "acme/ghost/d0.md" in table
    shown = json.loads(govindex(root, "dlq", "show", letter["position"]).stdout)
    assert shown["value"]["source_id"] == "ghost"  # binary mode: the value is the data
    assert shown["headers"]["govindex-dlq-reason"] == "unknown_source"

    for attempt in range(1, 4):
        dry = govindex(root, "dlq", "redrive", "--reason", "unknown_source").stdout
        assert "dry run" in dry and "1 redrive" in dry, dry
        assert len(letters(root)) == attempt  # a dry run publishes nothing
        done = govindex(root, "dlq", "redrive", "--reason", "unknown_source", "--execute")
        job = job_of(root, done.stdout)
        assert job["state"] == "succeeded" and job["dry_run"] is False
        earlier = {"already_handled": attempt - 1} if attempt > 1 else {}
        assert job["counts"] == {"redriven": 1, **earlier}
        # The source is still unknown: the record fails again, one redrive further on.
        found = wait_letters(root, attempt + 1)
        assert [x["redrives"] for x in found] == list(range(attempt + 1))
        assert [x["handled"] for x in found] == ["redrive"] * attempt + [""]

    dry = govindex(root, "dlq", "redrive").stdout
    assert "1 quarantine" in dry and "3 already handled" in dry, dry
    done = govindex(root, "dlq", "redrive", "--execute")
    assert job_of(root, done.stdout)["counts"] == {"quarantined": 1, "already_handled": 3}
    deadline = time.monotonic() + 60
    while not (kept := read_topic(stack["kafka_bootstrap"], f"{stack['namespace']}.quarantine")):
        assert time.monotonic() < deadline, "nothing reached the quarantine topic"
        time.sleep(0.5)
    assert [dict(r.headers)[REDRIVES_HEADER] for r in kept] == [b"3"]
    time.sleep(3)  # no fifth dead letter: the record stopped looping
    assert [x["handled"] for x in letters(root)] == ["redrive"] * 3 + ["quarantine"]
    again = govindex(root, "dlq", "redrive", "--execute").stdout
    assert "4 already handled" in again, again


def test_a_redrive_killed_half_way_resumes_from_its_checkpoint(running: Path) -> None:
    """SIGKILL the command running the job; `jobs resume` finishes it, and every dead letter
    was redriven exactly once across the two processes."""
    root, stack = running, stack_of(running)
    total = 40
    poison(stack, "ghost2", range(total))
    wait_letters(root, total, "--reason", "unknown_source")
    command = [sys.executable, "-m", "govindex.cli.main", "dlq", "redrive", "--execute"]
    redrive = subprocess.Popen(
        [*command, "--reason", "unknown_source", "--rate", "8"],
        cwd=root,
        env={k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        job = wait_job(stack, lambda j: j["done"] >= 12)
        os.kill(redrive.pid, signal.SIGKILL)
        redrive.wait(timeout=30)
    finally:
        if redrive.poll() is None:
            redrive.kill()
    killed = wait_job(stack, lambda j: True)
    assert killed["state"] == "running" and 12 <= killed["done"] < total, killed
    assert govindex(root, "jobs", "list").stdout.count("running") == 1

    resumed = govindex(root, "jobs", "resume", str(job["id"])).stdout
    assert "succeeded" in resumed, resumed
    final = json.loads(govindex(root, "jobs", "show", str(job["id"])).stdout)
    assert final["done"] == total and final["counts"] == {"redriven": total}
    with psycopg.connect(stack["pg_dsn"]) as conn:
        acted = conn.execute(
            'SELECT count(*), count(DISTINCT (partition, "offset")) FROM dead_letter_actions '
            "WHERE job_id = %s",
            (job["id"],),
        ).fetchone()
    assert acted == (total, total)
    deadline = time.monotonic() + 60
    while True:  # the relay publishes each redriven record once
        sent = [
            r
            for r in read_topic(stack["kafka_bootstrap"], f"{stack['namespace']}.documents")
            if dict(r.headers).get(JOB_HEADER) == str(job["id"]).encode()
        ]
        if len(sent) >= total or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    ids = [dict(r.headers)["ce_id"] for r in sent]
    assert len(ids) == total and len(set(ids)) == total
