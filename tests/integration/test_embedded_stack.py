"""The embedded PostgreSQL starts from any directory, as root too, without opening up the
user's directories, and runs durable unless asked for the fast mode."""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

import psycopg
import pytest

from govindex.devstack.embedded import PG_HOME, PG_SYSTEM_USER, EmbeddedStack
from tests.support.stack import parent_modes

pytestmark = pytest.mark.integration


def _started(state_dir: Path, *, durable: bool) -> tuple[EmbeddedStack, str, str]:
    (state_dir / "logs").mkdir(parents=True)
    stack = EmbeddedStack(state_dir, durable=durable)
    stack._start_postgres()  # PostgreSQL alone: the part that runs as another user
    with psycopg.connect(stack.addresses["pg_dsn"]) as conn:
        fsync = conn.execute("SHOW fsync").fetchone()
        data = conn.execute("SHOW data_directory").fetchone()
    assert fsync is not None and data is not None
    return stack, str(fsync[0]), str(data[0])


def test_postgres_starts_under_a_0700_parent_without_widening_it(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    before = parent_modes(private)
    stack, fsync, data = _started(private / "state", durable=True)
    try:
        assert fsync == "on"
        assert parent_modes(private) == before  # nothing was opened up
        if os.geteuid() == 0:
            # The server's user cannot traverse a 0700 folder: its data lives outside,
            # owned by it, and the state dir says where.
            assert Path(data).is_relative_to(PG_HOME)
            assert Path(data).owner() == PG_SYSTEM_USER
            assert (private / "state" / "postgres.location").read_text().strip() == data
            server_uid = pwd.getpwnam(PG_SYSTEM_USER).pw_uid
            assert Path(data).stat().st_uid == server_uid
        else:
            assert Path(data) == (private / "state" / "postgres").resolve()
    finally:
        stack.stop()
    if os.geteuid() == 0:  # durable data is kept across a stop
        assert Path(data, "PG_VERSION").exists()
        shutil.rmtree(Path(data).parent)


def test_the_fast_mode_is_named_and_leaves_no_data_behind(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    stack, fsync, data = _started(private / "state", durable=False)
    stack.stop()
    assert fsync == "off"
    if os.geteuid() == 0:
        assert not Path(data).exists()


def test_a_durable_stack_discarded_leaves_no_data_behind(tmp_path: Path) -> None:
    """A benchmark's durable stack lives in a temporary state dir it removes after; as root
    its data lives outside that dir, and a plain stop kept it there for good."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    stack, fsync, data = _started(private / "state", durable=True)
    stack.stop(discard=True)
    assert fsync == "on"
    if os.geteuid() == 0:
        assert Path(data).is_relative_to(PG_HOME)
        assert not Path(data).parent.exists()
