"""The read audit: one row per answered read, listed by `govindex audit`, pruned by retention."""

from __future__ import annotations

from datetime import datetime
from typing import Any, LiteralString

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from govindex.adapters.postgres.tx import Params, PostgresAdapter, connection
from govindex.core.ports import AUDIT_LIST_MAX, AuditEntry, AuditRow

_INSERT = (
    "INSERT INTO read_audit (at, endpoint, status, credential_kind, credential_name, subject, "
    " tenant, principals, scopes, purpose, as_of, known_at, request_hash, chunk_ids, "
    " pack_hash) VALUES (coalesce(%s, now()), %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
    " %s, %s, %s)"
)
_SELECT = (
    "SELECT id, at, endpoint, status, credential_kind, credential_name, subject, tenant, "
    " principals, scopes, purpose, as_of, known_at, request_hash, chunk_ids, pack_hash "
    "FROM read_audit"
)
# A prune deletes this many rows per transaction, so months of reads never hold one long
# transaction (and its locks) open against the inserts of the reads being answered.
PRUNE_BATCH = 10_000


def _params(entry: AuditEntry) -> Params:
    return (
        entry.at,
        entry.endpoint,
        entry.status,
        entry.credential_kind,
        entry.credential_name,
        entry.subject,
        entry.tenant,
        list(entry.principals),
        list(entry.scopes),
        entry.purpose,
        entry.as_of,
        entry.known_at,
        entry.request_hash,
        list(entry.chunk_ids),
        entry.pack_hash,
    )


def _audit_row(row: dict[str, Any]) -> AuditRow:
    arrays = ("principals", "scopes", "chunk_ids")
    return AuditRow(**{**row, **{name: tuple(row[name]) for name in arrays}})


async def write_audit(conn: AsyncConnection[Any], entry: AuditEntry) -> None:
    """Record `entry` in the caller's transaction: whatever else the read stores (a pack
    kept under an idempotency key) commits or rolls back with its audit row."""
    await conn.execute(_INSERT, _params(entry))


class PostgresReadAudit(PostgresAdapter):
    """Implements ReadAudit."""

    async def record(self, entry: AuditEntry) -> None:
        await self._execute(_INSERT, _params(entry))

    async def entries(
        self,
        *,
        tenant: str | None = None,
        credential: str | None = None,
        principal: str | None = None,
        endpoint: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
    ) -> list[AuditRow]:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        filters: tuple[tuple[LiteralString, object], ...] = (
            ("tenant = %s", tenant),
            ("credential_name = %s", credential),
            ("%s = ANY (principals)", principal),
            ("endpoint = %s", endpoint),
            ("at >= %s", since),
            ("at < %s", until),
        )
        # Only the filters given reach the statement: each combination is planned for the
        # index it can use, which `%s IS NULL OR ...` would hide from a generic plan.
        chosen = [(sql.SQL(condition), value) for condition, value in filters if value is not None]
        where = (
            sql.SQL(" WHERE ") + sql.SQL(" AND ").join(c for c, _ in chosen)
            if chosen
            else sql.SQL("")
        )
        query = sql.SQL("{select}{where} ORDER BY at DESC, id DESC LIMIT %s").format(
            select=sql.SQL(_SELECT), where=where
        )
        params = [value for _, value in chosen] + [min(limit, AUDIT_LIST_MAX)]
        async with connection(self._pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(query, params)
            return [_audit_row(row) for row in await cur.fetchall()]

    async def prune(self, older_than_days: int) -> int:
        if older_than_days < 1:
            raise ValueError(f"older_than_days must be at least 1, not {older_than_days}")
        # One cutoff for every batch: rows recorded while the prune runs are never its.
        found = await self._row("SELECT now() - make_interval(days => %s)", (older_than_days,))
        assert found is not None
        cutoff = found[0]
        pruned = 0
        while True:
            deleted = await self._execute(
                "DELETE FROM read_audit WHERE id IN "
                "(SELECT id FROM read_audit WHERE at < %s LIMIT %s)",
                (cutoff, PRUNE_BATCH),
            )
            pruned += deleted
            if deleted < PRUNE_BATCH:
                return pruned
