"""Statements on tables that grow find their rows through an index, not a scan."""

from __future__ import annotations

import psycopg
import pytest

pytestmark = pytest.mark.integration


async def test_purges_and_listings_find_chunks_by_version_through_an_index(
    migrated: dict[str, str],
) -> None:
    """`DELETE FROM chunks WHERE version_id = ...` (every purge, every retention step) and
    each listing's chunk count used a sequential scan of the whole chunks table."""
    with psycopg.connect(migrated["pg_dsn"]) as conn:
        conn.execute("SET enable_seqscan = off")  # any usable index wins over a scan
        for statement in (
            "EXPLAIN DELETE FROM chunks WHERE version_id = 'v'",
            "EXPLAIN SELECT count(*) FROM chunks WHERE version_id = 'v'",
        ):
            plan = "\n".join(row[0] for row in conn.execute(statement).fetchall())
            assert "Seq Scan on chunks" not in plan, plan
            assert "chunks_version" in plan, plan
