"""The graph walk's statement timeout, on the real PostgreSQL: in effect for the walk's
statements only, put back for the rest of the snapshot, and a walk that passes it raises
GraphWalkStopped with the snapshot still usable (issue 23)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from govindex.adapters.postgres.reads import PostgresReadSnapshot
from govindex.core.graph_templates import BUILTIN, GraphWalkStopped
from govindex.core.ports import ReadAccess, ReadFilters

pytestmark = pytest.mark.integration

ACCESS = ReadAccess(
    tenant_id="acme",
    principals=("group:eng",),
    scopes=(),
    purpose="support",
    as_of=datetime.now(UTC),
)
ROUTES = BUILTIN.routes([], [], 2)


Opened = tuple[psycopg.AsyncConnection[Any], PostgresReadSnapshot]


@pytest.fixture
async def opened(migrated: dict[str, str]) -> AsyncIterator[Opened]:
    """A snapshot as the read store opens one, on a connection whose own statement timeout
    is 5 s; one entity to seed the walk from."""
    async with await psycopg.AsyncConnection.connect(migrated["pg_dsn"], autocommit=True) as c:
        await c.execute(
            "INSERT INTO graph_entities (tenant_id, entity_id, kind) "
            "VALUES ('acme', 'service:ledger', 'service')"
        )
    async with await psycopg.AsyncConnection.connect(migrated["pg_dsn"]) as conn:
        await conn.execute("SET statement_timeout = '5s'")
        await conn.commit()
        async with conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn, PostgresReadSnapshot(conn, None)


async def _timeout(conn: psycopg.AsyncConnection[Any]) -> str:
    cur = await conn.execute("SHOW statement_timeout")
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


async def test_the_walk_runs_under_its_timeout_and_the_snapshot_gets_its_own_back(
    opened: Opened,
) -> None:
    conn, snapshot = opened
    assert await _timeout(conn) == "5s"
    walked = await snapshot.graph(
        ACCESS, ReadFilters(), ["service:ledger"], ROUTES, 10, statement_timeout_ms=1234
    )
    assert walked == []  # the entity has no edges
    assert await _timeout(conn) == "5s"


async def test_a_walk_past_its_timeout_is_stopped_and_the_snapshot_still_reads(
    opened: Opened, migrated: dict[str, str]
) -> None:
    """Another transaction holds graph_edges: the walk waits on its lock until its 100 ms
    timeout (the connection's own 5 s never comes into it)."""
    conn, snapshot = opened
    async with await psycopg.AsyncConnection.connect(migrated["pg_dsn"]) as holder:
        await holder.execute("LOCK TABLE graph_edges IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(GraphWalkStopped, match=r"statement timeout \(100 ms\)"):
            await asyncio.wait_for(
                snapshot.graph(
                    ACCESS, ReadFilters(), ["service:ledger"], ROUTES, 10, statement_timeout_ms=100
                ),
                timeout=4,
            )
        await holder.rollback()
    assert await _timeout(conn) == "5s"
    assert await snapshot.generation() is None  # the snapshot's transaction is not aborted
