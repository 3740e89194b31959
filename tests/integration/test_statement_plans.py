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


async def test_every_foreign_key_is_led_by_an_index_of_its_referencing_table(
    migrated: dict[str, str],
) -> None:
    """A delete of a referenced row (and an ON DELETE CASCADE) looks up the referencing
    rows by the key's columns: without an index leading with them, it scans the table."""
    with psycopg.connect(migrated["pg_dsn"]) as conn:
        keys = conn.execute(
            "SELECT c.conrelid::regclass::text, c.conname FROM pg_constraint c "
            "WHERE c.contype = 'f' AND NOT EXISTS (SELECT 1 FROM pg_index i "
            " WHERE i.indrelid = c.conrelid AND i.indpred IS NULL "
            " AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey "
            " AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] <@ c.conkey) "
            "ORDER BY 1, 2"
        ).fetchall()
        found = conn.execute("SELECT count(*) FROM pg_constraint WHERE contype = 'f'").fetchone()
    assert found is not None and found[0] >= 5  # the migrations' foreign keys were seen
    assert keys == [], f"foreign keys no index leads with: {keys}"
