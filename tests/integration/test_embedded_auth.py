"""The embedded servers are not open to other local users: PostgreSQL and Redis ask for the
passwords only stack.json (owner-only) holds, and a cluster made before passwords gets one."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
import redis

from govindex.core.settings import redact
from govindex.devstack.embedded import PG_PASSWORD_FILE, EmbeddedStack

pytestmark = pytest.mark.integration


def test_postgres_refuses_a_connection_without_the_password(stack: dict[str, str]) -> None:
    url = urlsplit(stack["pg_dsn"])
    assert url.password, "the DSN carries the generated password"
    for dsn in (
        f"postgresql://postgres@127.0.0.1:{url.port}/postgres",  # trust: no password at all
        f"postgresql://postgres:wrong@127.0.0.1:{url.port}/postgres",
    ):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(dsn, connect_timeout=5).close()
    with psycopg.connect(stack["pg_dsn"], connect_timeout=5) as conn:
        method = conn.execute("SELECT auth_method FROM pg_hba_file_rules").fetchall()
    assert {m for (m,) in method} == {"scram-sha-256"}, method


def test_redis_refuses_a_client_without_the_password(stack: dict[str, str]) -> None:
    url = urlsplit(stack["redis_url"])
    assert url.password
    anonymous = redis.Redis(host="127.0.0.1", port=url.port, protocol=2)
    with pytest.raises(redis.AuthenticationError):
        anonymous.set("k", "v")
    anonymous.close()
    client = redis.Redis.from_url(stack["redis_url"])
    assert client.ping()
    client.close()


def test_the_passwords_are_kept_owner_only_and_never_printed(tmp_path: Path) -> None:
    embedded = EmbeddedStack(tmp_path / "state", durable=False)
    addresses = embedded.start()
    try:
        path = embedded.write_stack_file({"read_token": "t"})
        for secret_file in (path, tmp_path / "state" / PG_PASSWORD_FILE):
            assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600, secret_file
        config = tmp_path / "state" / "redis.conf"
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        redis_pid = embedded.processes["redis"].pid
        argv = Path(f"/proc/{redis_pid}/cmdline").read_bytes().decode()
        assert urlsplit(addresses["redis_url"]).password not in argv  # not in `ps` output
        shown = redact(addresses["pg_dsn"])
        assert urlsplit(addresses["pg_dsn"]).password not in shown and ":***@" in shown
    finally:
        embedded.stop()


def test_a_cluster_made_before_passwords_gets_one_and_keeps_its_data(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = EmbeddedStack(state, durable=False)
    (state / "logs").mkdir(parents=True)
    first.durable = True  # keep the data across the stop
    first._start_postgres()
    try:
        with psycopg.connect(first.addresses["pg_dsn"], autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (x int)")
        # Make it a cluster of before: trust everywhere, no password file.
        assert first._pg_data is not None
        (first._pg_data / "pg_hba.conf").write_text(
            "local all all trust\nhost all all 127.0.0.1/32 trust\n"
        )
    finally:
        first.stop()
    (state / PG_PASSWORD_FILE).unlink()
    again = EmbeddedStack(state, durable=False)
    again._start_postgres()
    try:
        dsn = again.addresses["pg_dsn"]
        port = urlsplit(dsn).port
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres").close()
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM kept").fetchone() == (0,)
    finally:
        again.stop()
        if again._pg_data is not None and os.geteuid() == 0:
            shutil.rmtree(again._pg_data.parent, ignore_errors=True)
