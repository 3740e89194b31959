"""Postgres connections and schema migrations (plain SQL files applied in order, once)."""

from __future__ import annotations

from importlib import resources

import psycopg
import structlog
from psycopg_pool import AsyncConnectionPool

from govindex.core.errors import TransientError

log = structlog.get_logger(__name__)

# Any session may run migrations; the advisory lock makes concurrent starts take turns.
_MIGRATION_LOCK = 0x60F1DE


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
                    async with conn.transaction():
                        await conn.execute(sql_text.encode())
                        await conn.execute(
                            "INSERT INTO schema_migrations (name) VALUES (%s)", (name,)
                        )
                    applied.append(name)
                    log.info("db.migrated", migration=name)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    except psycopg.OperationalError as exc:
        raise TransientError(f"cannot reach PostgreSQL to migrate: {exc}") from exc
    return applied


def open_pool(dsn: str, *, min_size: int = 1, max_size: int = 8) -> AsyncConnectionPool:
    """A pool that is not yet open; callers `await pool.open()` in their start-up."""
    return AsyncConnectionPool(dsn, min_size=min_size, max_size=max_size, open=False)
