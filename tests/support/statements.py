"""Record every statement the code sends to PostgreSQL: query text and parameters.

`RecordingAsyncCursor` and `RecordingCursor` are psycopg cursors that note each `execute`
and `executemany` (the text as sent, with its placeholders, and the first parameter set)
in a `StatementLog` before running it. Bind them to a log with `cursors(log)` and install
them through a pool's `kwargs={"cursor_factory": ...}` (or `connect(cursor_factory=...)`).

`recording(log)` installs them on every connection opened while it is active, by giving
`psycopg.AsyncConnection.connect` and `psycopg.Connection.connect` a default
`cursor_factory`: the code opens connections three ways (the Runtime's pool, the outbox
relay's LISTEN connection, the synchronous connection of `govindex status`), and only this
reaches all three without a change to the code under test (`psycopg.connect`, an alias
bound at import, is replaced too). Connections opened before it
was entered keep their cursors: build the Runtime inside it.

COPY (how chunks and versions are written) is not recorded: a `COPY … FROM STDIN` appends
rows and has no plan to check.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import psycopg
from psycopg import AsyncCursor, Cursor, sql
from psycopg.abc import AdaptContext, Params, Query


@dataclass(frozen=True)
class Statement:
    """One statement as the code sent it: its text and one set of its parameters."""

    query: str
    params: Sequence[Any] | Mapping[str, Any] | None
    many: bool = False


@dataclass
class StatementLog:
    """Every statement recorded, in order (parameters of `executemany`: the first set)."""

    statements: list[Statement] = field(default_factory=list)
    active: bool = True

    def add(self, statement: Statement) -> None:
        if self.active:
            self.statements.append(statement)

    def distinct(self) -> dict[str, Statement]:
        """One statement per distinct text (the first recorded, with its parameters)."""
        found: dict[str, Statement] = {}
        for statement in self.statements:
            found.setdefault(statement.query, statement)
        return found


def query_text(query: Query, context: AdaptContext) -> str:
    if isinstance(query, sql.Composable):
        return query.as_string(context)
    if isinstance(query, bytes | bytearray | memoryview):
        return bytes(query).decode()
    if isinstance(query, str):
        return query
    return str(query)  # a template string: recorded as it prints, never explained


class RecordingAsyncCursor(AsyncCursor[Any]):
    """An async cursor that records what it executes in `log` (see `cursors`)."""

    log: ClassVar[StatementLog | None] = None

    def _note(self, query: Query, params: Any, many: bool = False) -> None:
        if self.log is not None:
            self.log.add(Statement(query_text(query, self), params, many))

    async def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        self._note(query, params)
        sent: Any = query  # one of the overloads' types: the driver tells them apart
        return await super().execute(sent, params, prepare=prepare, binary=binary)

    async def executemany(
        self, query: Query, params_seq: Iterable[Params], *, returning: bool = False
    ) -> None:
        sets = list(params_seq)  # an iterator is read once: keep it for the driver
        self._note(query, sets[0] if sets else None, many=True)
        await super().executemany(query, sets, returning=returning)


class RecordingCursor(Cursor[Any]):
    """A synchronous cursor that records what it executes in `log` (see `cursors`)."""

    log: ClassVar[StatementLog | None] = None

    def _note(self, query: Query, params: Any, many: bool = False) -> None:
        if self.log is not None:
            self.log.add(Statement(query_text(query, self), params, many))

    def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        self._note(query, params)
        sent: Any = query
        return super().execute(sent, params, prepare=prepare, binary=binary)

    def executemany(
        self, query: Query, params_seq: Iterable[Params], *, returning: bool = False
    ) -> None:
        sets = list(params_seq)
        self._note(query, sets[0] if sets else None, many=True)
        super().executemany(query, sets, returning=returning)


def cursors(log: StatementLog) -> tuple[type[RecordingAsyncCursor], type[RecordingCursor]]:
    """Cursor classes that record into `log`: for `cursor_factory`."""

    class BoundAsync(RecordingAsyncCursor):
        pass

    class Bound(RecordingCursor):
        pass

    BoundAsync.log = log
    Bound.log = log
    return BoundAsync, Bound


@contextmanager
def recording(log: StatementLog) -> Iterator[StatementLog]:
    """Every connection opened meanwhile (async or not) records into `log`."""
    async_cursor, sync_cursor = cursors(log)
    async_connect = psycopg.AsyncConnection.__dict__["connect"]
    sync_connect = psycopg.Connection.__dict__["connect"]

    async def connect_async(cls: Any, /, conninfo: str = "", **kwargs: Any) -> Any:
        kwargs.setdefault("cursor_factory", async_cursor)
        return await async_connect.__func__(cls, conninfo, **kwargs)

    def connect_sync(cls: Any, /, conninfo: str = "", **kwargs: Any) -> Any:
        kwargs.setdefault("cursor_factory", sync_cursor)
        return sync_connect.__func__(cls, conninfo, **kwargs)

    psycopg.AsyncConnection.connect = classmethod(connect_async)  # type: ignore[method-assign,assignment]
    psycopg.Connection.connect = classmethod(connect_sync)  # type: ignore[method-assign,assignment]
    module_connect = psycopg.connect  # bound to Connection when psycopg was imported
    psycopg.connect = psycopg.Connection.connect
    try:
        yield log
    finally:
        psycopg.AsyncConnection.connect = async_connect  # type: ignore[method-assign]
        psycopg.Connection.connect = sync_connect  # type: ignore[method-assign]
        psycopg.connect = module_connect
        log.active = False
