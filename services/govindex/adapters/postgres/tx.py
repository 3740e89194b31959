"""One transaction helper and one error translation for every Postgres adapter.

Driver errors that mean "the server is unavailable or the transaction lost a race" become
`TransientError` here, once, so callers retry them and never dead-letter them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, LiteralString, TypeAlias, TypeVar

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from govindex.core.errors import RejectedByStore, TransientError
from govindex.core.ports import OutboxMessage

Query: TypeAlias = LiteralString | sql.Composed
Params: TypeAlias = Sequence[Any]
R = TypeVar("R")

_TRANSIENT = (psycopg.OperationalError, psycopg.errors.SerializationFailure)
# What the data itself makes Postgres refuse: retrying cannot help (NUL bytes in text, a
# value out of range, a broken constraint).
_REJECTED = (psycopg.DataError, psycopg.IntegrityError)


def unavailable(exc: Exception) -> TransientError:
    if isinstance(exc, psycopg.errors.TransactionRollback):  # a deadlock or serialization
        return TransientError(f"PostgreSQL rolled the transaction back, run it again: {exc}")
    return TransientError(f"PostgreSQL is unavailable: {exc}")


@asynccontextmanager
async def transaction(pool: AsyncConnectionPool) -> AsyncIterator[AsyncConnection[Any]]:
    """A transaction whose driver connection errors surface as TransientError."""
    try:
        async with pool.connection() as conn, conn.transaction():
            yield conn
    except _TRANSIENT as exc:
        raise unavailable(exc) from exc
    except _REJECTED as exc:
        raise RejectedByStore(f"PostgreSQL refused the rows: {exc}") from exc


@asynccontextmanager
async def connection(pool: AsyncConnectionPool) -> AsyncIterator[AsyncConnection[Any]]:
    """An autocommit read: the same error translation, no transaction block."""
    try:
        async with pool.connection() as conn:
            yield conn
    except _TRANSIENT as exc:
        raise unavailable(exc) from exc


async def claim_event(conn: AsyncConnection[Any], consumer: str, event_id: str) -> bool:
    """Record that `consumer` processed `event_id`; False if it already had.

    Written in the same transaction as the effect, this is the idempotent consumer.
    """
    cur = await conn.execute(
        "INSERT INTO processed_events (consumer, event_id) VALUES (%s, %s) "
        "ON CONFLICT DO NOTHING RETURNING 1",
        (consumer, event_id),
    )
    return await cur.fetchone() is not None


async def enqueue(conn: AsyncConnection[Any], messages: Sequence[OutboxMessage]) -> None:
    """Add messages to the outbox in the caller's transaction; the relay publishes them."""
    if not messages:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO outbox (topic, key, value, headers, event_id, awaits, tenant_id, "
            " source_id, content_hash, sequence) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    m.topic,
                    (m.record.key or b"").decode(),
                    m.record.value,
                    Jsonb([[name, value.decode()] for name, value in m.record.headers]),
                    m.event_id,
                    m.awaits,
                    m.tenant_id,
                    m.source_id,
                    m.content_hash,
                    m.sequence,
                )
                for m in messages
            ],
        )


class PostgresAdapter:
    """Base of the adapters that hold a pool: one-statement helpers, each its own
    transaction, with the error translation above."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def _rows(self, query: Query, params: Params = ()) -> list[tuple[Any, ...]]:
        async with transaction(self._pool) as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall()

    async def _typed(self, row: type[R], query: Query, params: Params = ()) -> list[R]:
        """Rows as instances of `row` (a dataclass whose fields are the selected columns)."""
        async with connection(self._pool) as conn:
            cur = conn.cursor(row_factory=class_row(row))
            await cur.execute(query, params)
            return await cur.fetchall()

    async def _row(self, query: Query, params: Params = ()) -> tuple[Any, ...] | None:
        rows = await self._rows(query, params)
        return rows[0] if rows else None

    async def _count(self, query: Query, params: Params = ()) -> int:
        row = await self._row(query, params)
        return int(row[0]) if row else 0

    async def _execute(self, query: Query, params: Params = ()) -> int:
        """Run one statement; return the rows it touched."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(query, params)
            return cur.rowcount

    async def _execute_many(self, query: Query, params: Sequence[Params]) -> None:
        """One statement for many parameter sets, in one transaction."""
        if not params:
            return
        async with transaction(self._pool) as conn, conn.cursor() as cur:
            await cur.executemany(query, params)
