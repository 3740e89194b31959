"""Array parameters in their text form arrive in PostgreSQL as the lists they were made
from: any text (quotes, backslashes, braces, commas, the word NULL, the empty string,
whitespace, non-ASCII), None as NULL, times at their instants whatever the offset and
the session's TimeZone, and 64-bit integers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest

from govindex.adapters.postgres.arrays import int_array, text_array, time_array

pytestmark = pytest.mark.integration

HOSTILE = [
    'say "hi"',
    "back\\slash",
    "\\",
    '"',
    "{a,b}",
    "a,b",
    "NULL",
    "null",
    "",
    " padded ",
    "tab\tand\nnewline",
    "ünïcødé ✓",
    '}{"\\,',
]
TIMES = [
    datetime(2026, 3, 1, 4, 0, tzinfo=UTC),
    datetime(2026, 3, 1, 4, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
    datetime(1999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
]


def test_text_arrays_carry_any_text_and_null(stack: dict[str, str]) -> None:
    values: list[str | None] = [*HOSTILE, None]
    with psycopg.connect(stack["pg_dsn"]) as conn:
        got = conn.execute("SELECT %s::text[]", (text_array(values),)).fetchone()
        rows = conn.execute(
            "SELECT u.n, u.v FROM unnest(%s::text[]) WITH ORDINALITY AS u(v, n) ORDER BY u.n",
            (text_array(values),),
        ).fetchall()
    assert got is not None and got[0] == values
    assert [v for _, v in rows] == values
    assert text_array([]) == "{}"


def test_time_arrays_keep_their_instants_in_any_session_zone(stack: dict[str, str]) -> None:
    dsn = stack["pg_dsn"]
    kolkata = dsn + ("&" if "?" in dsn else "?") + "options=-c%20TimeZone%3DAsia%2FKolkata"
    for where in (dsn, kolkata):
        with psycopg.connect(where) as conn:
            got = conn.execute("SELECT %s::timestamptz[]", (time_array(TIMES),)).fetchone()
        assert got is not None and got[0] == TIMES  # equal as instants


def test_int_arrays_carry_64_bit_integers(stack: dict[str, str]) -> None:
    values = [0, 1, -1, 2**63 - 1, -(2**63)]
    with psycopg.connect(stack["pg_dsn"]) as conn:
        got = conn.execute("SELECT %s::bigint[]", (int_array(values),)).fetchone()
    assert got is not None and got[0] == values
