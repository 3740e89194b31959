"""Consumer-group offsets against a running `govindex up`: shown, a reset refused while the
indexer runs, paused workers that stop consuming, a reset to the earliest offset that the
resumed indexer re-reads from."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.operator import poison, stack_of
from tests.support.pipeline import read_topic
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e


def positions(root: Path) -> dict[int, dict[str, int | None]]:
    out = govindex(root, "offsets", "show", "--group", "indexer", "--topic", "documents").stdout
    rows: dict[int, dict[str, int | None]] = {}
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0].isdigit():
            committed = None if cells[1] == "-" else int(cells[1])
            rows[int(cells[0])] = {
                "committed": committed,
                "first": int(cells[2]),
                "end": int(cells[3]),
            }
    return rows


def caught_up(root: Path, timeout: float = 90) -> dict[int, dict[str, int | None]]:
    deadline = time.monotonic() + timeout
    while True:
        rows = positions(root)
        if all(r["committed"] == r["end"] for r in rows.values() if r["end"]):
            return rows
        assert time.monotonic() < deadline, f"the indexer did not catch up: {rows}"
        time.sleep(1)


def dead_letters(stack: dict[str, Any]) -> int:
    return len(read_topic(stack["kafka_bootstrap"], f"{stack['namespace']}.dead-letters"))


def test_offsets_are_reset_only_while_the_indexer_is_paused(running: Path) -> None:
    root, stack = running, stack_of(running)
    poison(stack, "nobody", range(12))
    before = caught_up(root)
    assert sum(int(r["end"] or 0) for r in before.values()) == 12
    assert dead_letters(stack) == 12

    args = ["offsets", "reset", "--group", "indexer", "--topic", "documents", "--to-earliest"]
    refused = govindex(root, *args, "--execute", check=False)
    assert refused.returncode == 1
    assert "runs the indexer worker unpaused" in refused.stderr
    assert "govindex worker pause indexer" in refused.stderr
    dry = govindex(root, *args)
    assert "dry run" in dry.stdout and "12 records replayed" in dry.stdout, dry.stdout
    assert "--execute would be refused now" in dry.stderr
    assert positions(root) == before  # neither moved anything

    paused = govindex(root, "worker", "pause", "indexer").stdout
    assert paused.startswith("indexer paused (") and ":" in paused
    poison(stack, "nobody", range(100, 103))  # arrives while paused: not consumed
    time.sleep(4)
    held = positions(root)
    assert sum(int(r["end"] or 0) - int(r["committed"] or 0) for r in held.values()) == 3
    done = govindex(root, *args, "--execute").stdout
    assert "succeeded" in done and "12 records replayed" in done, done  # 3 never read
    job_id = re.search(r"^job (\d+) ", done, re.M)
    assert job_id is not None, done
    job = json.loads(govindex(root, "jobs", "show", job_id.group(1)).stdout)
    assert job["kind"] == "offsets-reset" and job["dry_run"] is False
    assert all(r["committed"] == r["first"] for r in positions(root).values())

    resumed = govindex(root, "worker", "resume", "indexer").stdout
    assert resumed.startswith("indexer resumed (")
    caught_up(root)
    # Re-read from the start: the first twelve are dead-lettered a second time.
    deadline = time.monotonic() + 60
    while dead_letters(stack) < 12 + 15:
        assert time.monotonic() < deadline, dead_letters(stack)
        time.sleep(1)
    assert dead_letters(stack) == 27
