"""Chunk rows: the one column list, and how chunks are written and read back."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, LiteralString, get_origin

from psycopg import AsyncConnection, sql
from psycopg.rows import kwargs_row
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.arrays import text_array
from govindex.adapters.postgres.tx import connection
from govindex.core.records import Chunk

CHUNK_COLUMNS: tuple[str, ...] = tuple(Chunk.model_fields)
_ARRAYS = frozenset(n for n, f in Chunk.model_fields.items() if get_origin(f.annotation) is tuple)


def chunk_row(chunk: Chunk) -> list[Any]:
    data = chunk.model_dump()
    return [
        list(data[name]) if isinstance(data[name], tuple) else data[name] for name in CHUNK_COLUMNS
    ]


async def insert_chunks(conn: AsyncConnection[Any], chunks: Sequence[Chunk]) -> None:
    if not chunks:
        return
    insert = sql.SQL("INSERT INTO chunks ({}) VALUES ({})").format(
        sql.SQL(", ").join(map(sql.Identifier, CHUNK_COLUMNS)),
        sql.SQL(", ").join(sql.Placeholder() * len(CHUNK_COLUMNS)),
    )
    async with conn.cursor() as cur:
        await cur.executemany(insert, [chunk_row(chunk) for chunk in chunks])


async def copy_chunks(conn: AsyncConnection[Any], chunks: Sequence[Chunk]) -> None:
    """Write new chunk rows with COPY: one stream for a whole batch."""
    if not chunks:
        return
    statement = sql.SQL("COPY chunks ({}) FROM STDIN").format(
        sql.SQL(", ").join(map(sql.Identifier, CHUNK_COLUMNS))
    )
    async with conn.cursor() as cur, cur.copy(statement) as copy:
        for chunk in chunks:
            await copy.write_row(_copy_row(chunk))


def _copy_row(chunk: Chunk) -> list[Any]:
    """A chunk's COPY row: its fields as they are, each `text[]` as its text form, kept
    from chunk to chunk (a batch repeats the same ACL, scopes, purposes and evidence on
    every chunk; psycopg's array dumper, in Python, was a twentieth of the indexer's CPU)."""
    return [
        _array_text(getattr(chunk, name)) if name in _ARRAYS else getattr(chunk, name)
        for name in CHUNK_COLUMNS
    ]


@lru_cache(maxsize=4096)
def _array_text(values: tuple[str, ...]) -> str:
    """`values` as a Postgres array literal; COPY then escapes it as any text field, and
    the server parses it as the column's array."""
    return text_array(values)


async def select_chunks(
    pool: AsyncConnectionPool, where: LiteralString, params: Sequence[Any]
) -> list[Chunk]:
    """Chunks matching `where` (a fixed clause; values only through `params`)."""
    query = sql.SQL("SELECT {} FROM chunks ").format(
        sql.SQL(", ").join(map(sql.Identifier, CHUNK_COLUMNS))
    ) + sql.SQL(where)
    async with connection(pool) as conn:
        cur = conn.cursor(row_factory=kwargs_row(_chunk_from_row))
        await cur.execute(query, params)
        return await cur.fetchall()


def _chunk_from_row(**row: Any) -> Chunk:
    return Chunk.model_validate(row)
