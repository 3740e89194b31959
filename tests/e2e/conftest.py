"""Fixtures of the end-to-end tests that drive the CLI against a running `govindex up`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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
    try:
        deadline = time.monotonic() + 120
        assert up.stdout is not None
        lines = []
        while time.monotonic() < deadline:
            line = up.stdout.readline()
            lines.append(line)
            if "Press Ctrl-C to stop" in line:
                break
            if not line and up.poll() is not None:
                raise AssertionError("govindex up exited:\n" + "".join(lines))
        assert (tmp_path / ".govindex" / "stack.json").exists()
        yield tmp_path
    finally:
        up.send_signal(signal.SIGINT)
        out, _ = up.communicate(timeout=60)
    remove_stack_data(tmp_path / ".govindex")
    assert up.returncode == 0, out
    assert "stack stopped" in out
    assert not (tmp_path / ".govindex" / "stack.json").exists()
