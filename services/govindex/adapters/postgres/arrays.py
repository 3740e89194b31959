"""Array parameters in their text form, for set-based statements
(`unnest(%s::text[], %s::timestamptz[], %s::bigint[])`) and COPY.

A list handed to psycopg is dumped element by element by its array dumper, in Python, on
every statement it is passed to, and the indexer's transaction passes the same columns of
a batch to several statements (6 % of its profile's samples). Formatted here once, a
column is one string, made in a seventh of the time (500 strings: 66 against 470 µs);
psycopg sends a `str` untyped, and the statement's cast parses it as the array it names.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime


def text_array(values: Iterable[str | None]) -> str:
    """`values` as a Postgres array literal with every element quoted (valid for any text,
    the word NULL and the empty string included); None is NULL."""
    return "{" + ",".join(map(_quoted, values)) + "}"


def time_array(values: Iterable[datetime]) -> str:
    """Times as a `timestamptz[]` literal, each in ISO 8601 with its offset (a time without
    one is read in the session's time zone, as psycopg sends such a time)."""
    return "{" + ",".join(f'"{value.isoformat()}"' for value in values) + "}"


def int_array(values: Iterable[int]) -> str:
    """Integers as a `bigint[]` literal."""
    return "{" + ",".join(map(str, map(int, values))) + "}"


def _quoted(value: str | None) -> str:
    """An array element in double quotes, each backslash and double quote escaped with a
    backslash."""
    if value is None:
        return "NULL"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
