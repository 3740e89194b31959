"""The embedded PostgreSQL's buffer cache: a quarter of the memory the machine, or its
container, has, never below the server's default nor above 1 GB (the e2e dense tests
check that the server runs with it)."""

from __future__ import annotations

from pathlib import Path

from govindex.devstack.embedded import shared_buffers_mb


def test_the_buffer_cache_is_a_quarter_of_the_containers_limit_between_128_mb_and_1_gb(
    tmp_path: Path,
) -> None:
    unlimited = shared_buffers_mb(tmp_path / "none")  # no cgroup files: the machine's memory
    assert 128 <= unlimited <= 1024
    (tmp_path / "memory.max").write_text("max\n")  # cgroup v2 without a limit
    assert shared_buffers_mb(tmp_path) == unlimited
    (tmp_path / "memory.max").write_text(f"{2 * 2**30}\n")  # a 2 GiB container
    assert shared_buffers_mb(tmp_path) == min(512, unlimited)
    (tmp_path / "memory.max").unlink()
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(f"{256 * 2**20}\n")  # v1
    assert shared_buffers_mb(tmp_path) == 128  # never below the server's default
