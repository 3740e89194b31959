"""A crash of the whole stack loses no acknowledged change, above all no deletion.

`govindex up` runs as a real process group (PostgreSQL with fsync on, the broker and the
index in memory, Redis, the workers); the test kills every process of it with SIGKILL at a
random point of a mixed ingest of creates, updates and deletes, starts it again, and with
no operator action waits until the index equals the folder: every create and update
applied, every deleted document gone from Postgres (chunks, raw content, blobs), from
OpenSearch, with a purge receipt, and no emitted event left pending.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.builders import MANIFEST_YAML
from tests.support.stack import (
    UpProcess,
    blobs_of,
    converged,
    govindex,
    parent_modes,
    remove_stack_data,
)

pytestmark = pytest.mark.e2e

RUNS = 5
MANIFEST = "source_id: notes\nsource_type: folder\nfolder:\n  path: {path}\n" + MANIFEST_YAML
KILL_POINTS = ("during the ingest", "as the ingest reports", "while the workers apply it")


def _text(name: str, generation: int) -> str:
    return f"# {name}\n\nRunbook {name}, revision {generation}: restart the {name} service.\n"


def _mutate(folder: Path, rng: random.Random, run: int) -> dict[str, int]:
    """Create, update and delete files; return what was done."""
    existing = sorted(p.name for p in folder.glob("*.md"))
    deleted = rng.sample(existing, k=min(len(existing) // 5, 25))
    for name in deleted:
        (folder / name).unlink()
    kept = [n for n in existing if n not in deleted]
    updated = rng.sample(kept, k=min(len(kept) // 4, 30))
    for name in updated:
        (folder / name).write_text(_text(name, run))
    created = [f"doc-{run:02d}-{n:03d}.md" for n in range(60 if run else 150)]
    for name in created:
        (folder / name).write_text(_text(name, run))
    return {"created": len(created), "updated": len(updated), "deleted": len(deleted)}


def _folder_state(folder: Path) -> dict[str, str]:
    return {
        p.name: "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.glob("*.md"))
    }


# Long: five crashes of one stack, each with its mutation, kill point and checks.
def test_a_whole_stack_killed_at_random_points_loses_no_change_and_no_deletion(
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("GOVINDEX_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    folder, state_dir = tmp_path / "notes", tmp_path / "state"
    folder.mkdir()
    (tmp_path / "notes.yaml").write_text(MANIFEST.format(path=folder))
    modes = parent_modes(tmp_path)
    up = UpProcess(tmp_path, state_dir)
    report = [f"seed {seed}"]
    try:
        up.wait_ready()
        govindex(tmp_path, "source", "apply", "notes.yaml", "--state-dir", str(state_dir))
        deleted_hashes: set[str] = set()
        for run in range(RUNS):
            before = _folder_state(folder)
            done = _mutate(folder, rng, run)
            deleted_hashes |= {h for name, h in before.items() if not (folder / name).exists()}
            point = (
                KILL_POINTS[run % len(KILL_POINTS)]
                if run < len(KILL_POINTS)
                else (rng.choice(KILL_POINTS))
            )
            ingest = subprocess.Popen(
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
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            if point == "during the ingest":
                time.sleep(rng.uniform(0.3, 1.5))
            else:
                ingest.wait(timeout=180)
                if point == "while the workers apply it":
                    time.sleep(rng.uniform(0.2, 2.0))
            up.kill_all()
            out = ingest.communicate(timeout=180)[0].strip().splitlines()
            # An acknowledged ingest must survive on the outbox alone: no reconcile at start.
            # Killed mid-ingest, part of it was never acknowledged: reconcile finds it.
            acknowledged = ingest.returncode == 0
            up = UpProcess(tmp_path, state_dir, *(["--no-reconcile"] if acknowledged else []))
            stack = up.wait_ready()
            state = converged(stack, "notes", _folder_state(folder))
            blobs_left = blobs_of(stack, deleted_hashes)
            assert blobs_left == 0, f"{blobs_left} blobs of deleted content left"
            report.append(
                f"run {run + 1}: {done}; killed {point}; "
                f"restarted {'without' if acknowledged else 'with'} reconcile; ingest said "
                f"{(out[-1] if out else '(nothing)')[:90]!r}; after restart "
                f"{len(state['active'])} active = folder, {len(state['deleted'])} deleted "
                "with receipts, 0 chunks/content/blobs of them in Postgres, 0 in OpenSearch, "
                "0 events pending"
            )
        # As root the server runs as another user: no parent directory was opened up for it.
        assert parent_modes(tmp_path) == modes
    finally:
        print("\n".join(report))
        print(up.stop()[-3000:])
        remove_stack_data(state_dir)
