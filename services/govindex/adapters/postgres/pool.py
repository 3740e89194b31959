"""Postgres connections and schema migrations (plain SQL files applied in order, once)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import psycopg
import structlog
from psycopg import AsyncConnection, sql
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Loader
from psycopg.postgres import types as builtin_types
from psycopg.pq import Format
from psycopg_pool import AsyncConnectionPool

from govindex.core.errors import GovindexError, TransientError

log = structlog.get_logger(__name__)

# Any session may run migrations; the advisory lock makes concurrent starts take turns.
_MIGRATION_LOCK = 0x60F1DE


class MigrationFailed(GovindexError):
    """A migration the server refused: nothing of it was applied (each runs in a
    transaction); the message says what to fix."""


def _failure(name: str, exc: psycopg.Error) -> str:
    said = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
    if 'extension "vector"' in said or "vector.control" in said:
        return (
            f"migration {name} needs the pgvector extension, and this PostgreSQL server "
            f"refused it ({said}). Install pgvector 0.8 or later on the server (a managed "
            "service: enable its `vector` extension for the database) and run as a role "
            "that may CREATE EXTENSION, or have an administrator run "
            "`CREATE EXTENSION vector;` in the database, then start again"
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return (
            f"migration {name} was refused: {said}. The role in GOVINDEX_PG_DSN must own the "
            "schema (it creates tables and indexes); grant it, then start again"
        )
    return f"migration {name} was refused by PostgreSQL: {said}"


def migration_files() -> list[tuple[str, str]]:
    folder = resources.files("govindex.adapters.postgres") / "sql"
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))
    return [(name, (folder / name).read_text()) for name in names]


async def migrate(dsn: str) -> list[str]:
    """Apply pending migrations; return the names applied. Safe to run concurrently."""
    applied: list[str] = []
    try:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
            try:
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
                )
                cur = await conn.execute("SELECT name FROM schema_migrations")
                done = {row[0] for row in await cur.fetchall()}
                for name, sql_text in migration_files():
                    if name in done:
                        continue
                    try:
                        async with conn.transaction():
                            await conn.execute(sql_text.encode())
                            await conn.execute(
                                "INSERT INTO schema_migrations (name) VALUES (%s)", (name,)
                            )
                    except psycopg.OperationalError:
                        raise
                    except psycopg.Error as exc:
                        raise MigrationFailed(_failure(name, exc)) from exc
                    applied.append(name)
                    log.info("db.migrated", migration=name)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    except psycopg.OperationalError as exc:
        raise TransientError(f"cannot reach PostgreSQL to migrate: {exc}") from exc
    return applied


def open_pool(dsn: str, *, min_size: int = 1, max_size: int = 8) -> AsyncConnectionPool:
    """A pool that is not yet open; callers `await pool.open()` in their start-up. Its
    connections read every `timestamptz` in UTC (`utc_times`)."""
    return AsyncConnectionPool(
        dsn, min_size=min_size, max_size=max_size, open=False, configure=utc_times
    )


_TIMESTAMPTZ = builtin_types["timestamptz"].oid


class _UtcTimestamptz(Loader):
    """The server's own `timestamptz` loader (psycopg's, in C), its datetime then given
    in UTC: whatever the session's TimeZone, a time read back is the one the indexer
    stamped (in UTC) and sent to OpenSearch as it was written."""

    def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        loader = psycopg.adapters.get_loader(_TIMESTAMPTZ, self.format)
        assert loader is not None, "psycopg loads timestamptz"
        self._load = loader(oid, context).load

    def load(self, data: Buffer) -> datetime:
        value: datetime = self._load(data)
        return value.astimezone(UTC)


class _UtcTimestamptzBinary(_UtcTimestamptz):
    format = Format.BINARY


def read_in_utc(conn: psycopg.Connection[Any] | AsyncConnection[Any]) -> None:
    """Teach `conn` to read `timestamptz` in UTC, in both formats (no round trip)."""
    conn.adapters.register_loader(_TIMESTAMPTZ, _UtcTimestamptz)
    conn.adapters.register_loader(_TIMESTAMPTZ, _UtcTimestamptzBinary)


async def utc_times(conn: AsyncConnection[Any]) -> None:
    """The pool's `configure`: `read_in_utc` on each new connection."""
    read_in_utc(conn)


def _connect_when_up(dsn: str, timeout: float) -> psycopg.Connection[Any]:
    """A connection to a local server that may still be starting: a server accepts TCP
    before it accepts sessions ("the database system is starting up"), so retry."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return psycopg.connect(dsn, connect_timeout=2, autocommit=True)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def create_database(port: int, name: str, *, password: str, timeout: float = 30.0) -> str:
    """Wait for a local server on `port` to accept connections, create database `name` if it
    is missing, and return its DSN, password included (the embedded stack's start-up)."""
    user = f"postgres:{password}"
    admin = f"postgresql://{user}@127.0.0.1:{port}/postgres"
    with _connect_when_up(admin, timeout) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"postgresql://{user}@127.0.0.1:{port}/{name}"


def set_superuser_password(port: int, password: str, *, timeout: float = 30.0) -> None:
    """Give a local cluster made before passwords (trust) its superuser's password."""
    admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    with _connect_when_up(admin, timeout) as conn:
        conn.execute(sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(password)))
