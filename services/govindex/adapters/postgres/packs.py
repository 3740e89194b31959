"""Kept packs (migration 016): the pack's row, its items in lineage, its audit record and
its `pack.built` event in one transaction; read back item by item, expired by retention."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, LiteralString

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from govindex.adapters.postgres.audit import write_audit
from govindex.adapters.postgres.lineage import register_in, registration
from govindex.adapters.postgres.tx import PostgresAdapter, enqueue, transaction
from govindex.core.ports import (
    AuditEntry,
    KeptItem,
    OutboxMessage,
    StoredItem,
    StoredPackRow,
    pack_artifact_id,
)

KIND = "pack"  # the lineage kind of a kept pack's items
_COLUMNS: LiteralString = (
    "SELECT pack_id, tenant_id, credential_name, idempotency_key, request_hash, pack_hash, "
    " built_at, expires_at, shell FROM stored_packs "
)


def _row(found: dict[str, Any]) -> StoredPackRow:
    return StoredPackRow(**found)


class PostgresPackStore(PostgresAdapter):
    """Implements PackStore."""

    async def keyed(
        self, tenant_id: str, credential_name: str, idempotency_key: str
    ) -> StoredPackRow | None:
        async with transaction(self._pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                _COLUMNS + "WHERE tenant_id = %s AND credential_name = %s AND "
                "idempotency_key = %s AND expires_at > now()",
                (tenant_id, credential_name, idempotency_key),
            )
            found = await cur.fetchone()
        return None if found is None else _row(found)

    async def keep(
        self,
        row: StoredPackRow,
        items: Sequence[KeptItem],
        audit: AuditEntry,
        event: OutboxMessage,
    ) -> bool:
        async with transaction(self._pool) as conn:
            # An expired pack under the same key gives the key back.
            await conn.execute(
                "DELETE FROM stored_packs WHERE tenant_id = %s AND credential_name = %s AND "
                " idempotency_key = %s AND expires_at <= now()",
                (row.tenant_id, row.credential_name, row.idempotency_key),
            )
            cur = await conn.execute(
                "INSERT INTO stored_packs (pack_id, tenant_id, credential_name, "
                " idempotency_key, request_hash, pack_hash, built_at, expires_at, shell) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (
                    row.pack_id,
                    row.tenant_id,
                    row.credential_name,
                    row.idempotency_key,
                    row.request_hash,
                    row.pack_hash,
                    row.built_at,
                    row.expires_at,
                    Jsonb(row.shell),
                ),
            )
            if cur.rowcount == 0:
                return False
            location = f"govindex:packs/{row.pack_id}"
            await register_in(
                conn,
                [
                    registration(
                        KIND,
                        pack_artifact_id(row.pack_id, item.key),
                        item.built_from,
                        f"{location}#{item.key}",
                        tenant_id=row.tenant_id,
                        text=item.text,
                    )
                    for item in items
                ],
            )
            await write_audit(conn, audit)
            await enqueue(conn, [event])
        return True

    async def load(
        self, tenant_id: str, pack_id: str
    ) -> tuple[StoredPackRow, list[StoredItem]] | None:
        async with transaction(self._pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                _COLUMNS + "WHERE tenant_id = %s AND pack_id = %s AND expires_at > now()",
                (tenant_id, pack_id),
            )
            found = await cur.fetchone()
            if found is None:
                return None
            row = _row(found)
            keys = [str(k) for k in row.shell.get("keys", [])]
            ids = [pack_artifact_id(pack_id, k) for k in keys]
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT artifact_id, text, reason FROM derived_artifacts WHERE tenant_id = %s "
                " AND kind = %s AND artifact_id = ANY (%s)",
                (tenant_id, KIND, ids),
            )
            artifacts = {a["artifact_id"]: a for a in await cur.fetchall()}
        items = []
        for key, artifact_id in zip(keys, ids, strict=True):
            artifact = artifacts.get(artifact_id)
            if artifact is None:
                items.append(StoredItem(key, None, "expired"))
            else:
                items.append(StoredItem(key, artifact["text"], artifact["reason"]))
        return row, items

    async def expire(self) -> int:
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "DELETE FROM stored_packs WHERE expires_at <= now() RETURNING tenant_id, "
                " pack_id, shell -> 'keys'"
            )
            gone = await cur.fetchall()
            ids = [
                (tenant, pack_artifact_id(pack_id, str(key)))
                for tenant, pack_id, keys in gone
                for key in keys or []
            ]
            if ids:
                await conn.execute(
                    "DELETE FROM derived_artifacts d USING unnest(%s::text[], %s::text[]) AS "
                    " g(tenant_id, artifact_id) WHERE d.tenant_id = g.tenant_id AND d.kind = %s "
                    " AND d.artifact_id = g.artifact_id",
                    ([t for t, _ in ids], [a for _, a in ids], KIND),
                )
        return len(gone)
