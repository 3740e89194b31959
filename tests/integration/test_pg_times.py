"""Times read from PostgreSQL are in UTC whatever the session's TimeZone: on the pool's
connections (the chunk store's contract runs from +05:30 too) and on the short
synchronous one `govindex status` opens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from govindex.adapters.postgres.pool import read_in_utc

pytestmark = pytest.mark.integration

INSTANT = datetime(2026, 3, 1, 4, 0, tzinfo=UTC)


def _in_kolkata(dsn: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + "options=-c%20TimeZone%3DAsia%2FKolkata"


@pytest.mark.parametrize("binary", [False, True])
def test_a_session_in_another_zone_reads_times_in_utc(stack: dict[str, str], binary: bool) -> None:
    with psycopg.connect(_in_kolkata(stack["pg_dsn"])) as conn:
        query = "SELECT %s::timestamptz, ARRAY[%s::timestamptz]"
        plain = conn.cursor(binary=binary).execute(query, (INSTANT, INSTANT)).fetchone()
        assert plain is not None and plain[0].utcoffset() == timedelta(hours=5, minutes=30)
        read_in_utc(conn)
        got = conn.cursor(binary=binary).execute(query, (INSTANT, INSTANT)).fetchone()
    assert got is not None
    assert got[0] == INSTANT and got[0].utcoffset() == timedelta(0)
    assert got[1] == [INSTANT] and got[1][0].utcoffset() == timedelta(0)
