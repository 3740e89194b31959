"""Fixtures of the end-to-end tests that drive the CLI against a running `govindex up`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stack import remove_stack_data


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Path]:
    """`govindex up` in tmp_path with the default state dir; stopped with Ctrl-C (SIGINT)."""
    up = subprocess.Popen(
        [sys.executable, "-m", "govindex.cli.main", "up"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")},
    )
    lines: list[str] = []
    ready = threading.Event()

    def drain() -> None:
        # Read every line for as long as it runs: an undrained pipe fills up (64 KiB) and
        # the stack blocks on its next log line, workers, relay and all.
        assert up.stdout is not None
        for line in up.stdout:
            lines.append(line)
            if "Press Ctrl-C to stop" in line:
                ready.set()
        ready.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        ready.wait(timeout=120)
        if up.poll() is not None or not any("Press Ctrl-C to stop" in x for x in lines):
            raise AssertionError("govindex up did not start:\n" + "".join(lines))
        assert (tmp_path / ".govindex" / "stack.json").exists()
        yield tmp_path
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=60)
        reader.join(timeout=10)
    out = "".join(lines)
    remove_stack_data(tmp_path / ".govindex")
    assert up.returncode == 0, out
    assert "stack stopped" in out
    assert not (tmp_path / ".govindex" / "stack.json").exists()
