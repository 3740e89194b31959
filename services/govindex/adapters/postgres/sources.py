"""The source registry: manifests as registered, and queries across sources."""

from __future__ import annotations

from typing import Literal, LiteralString

from psycopg import sql
from psycopg.types.json import Jsonb

from govindex.adapters.postgres.tx import PostgresAdapter, transaction
from govindex.core.errors import UnknownSource
from govindex.core.records import SourceManifest


class PostgresSourceRegistry(PostgresAdapter):
    """Registered source manifests; implements SourceRegistry and SourceCatalog."""

    async def register(self, manifest: SourceManifest) -> Literal["created", "updated"]:
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT tenant_id FROM sources WHERE source_id = %s", (manifest.source_id,)
            )
            row = await cur.fetchone()
            if row is not None and row[0] != manifest.tenant:
                raise UnknownSource(
                    f"source id {manifest.source_id!r} is already registered for tenant "
                    f"{row[0]!r}; source ids are global, pick another one"
                )
            await conn.execute(
                "INSERT INTO sources (tenant_id, source_id, manifest, enabled) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, source_id) DO UPDATE SET "
                "manifest = EXCLUDED.manifest, enabled = EXCLUDED.enabled, updated_at = now()",
                (
                    manifest.tenant,
                    manifest.source_id,
                    Jsonb(manifest.model_dump(mode="json")),
                    manifest.enabled,
                ),
            )
        return "created" if row is None else "updated"

    async def get(self, tenant_id: str, source_id: str) -> SourceManifest | None:
        found = await self._select("WHERE tenant_id = %s AND source_id = %s", tenant_id, source_id)
        return found[0] if found else None

    async def find(self, source_id: str) -> SourceManifest | None:
        """By source id alone (ids are global): what operator commands name."""
        found = await self._select("WHERE source_id = %s", source_id)
        return found[0] if found else None

    async def set_enabled(self, source_id: str, enabled: bool) -> SourceManifest | None:
        row = await self._row(
            "UPDATE sources SET enabled = %s, manifest = jsonb_set(manifest, '{enabled}', "
            "to_jsonb(%s::boolean)), updated_at = now() WHERE source_id = %s "
            "RETURNING manifest",
            (enabled, enabled, source_id),
        )
        return SourceManifest.model_validate(row[0]) if row else None

    async def all(self) -> list[SourceManifest]:
        return await self._select("ORDER BY source_id")

    async def find_by_repository(self, repository: str) -> list[SourceManifest]:
        """Git sources whose manifest names this provider repository (any branch)."""
        return await self._select(
            "WHERE lower(manifest->'git'->>'repository') = lower(%s) ORDER BY source_id",
            repository,
        )

    async def cdc_sources(self) -> list[SourceManifest]:
        return await self._select(
            "WHERE manifest->'cdc' IS NOT NULL AND manifest->'cdc' <> 'null'::jsonb "
            "ORDER BY source_id"
        )

    async def held_documents(self, source_id: str) -> dict[str, int]:
        """Documents the index holds as active for a source, with their last sequence."""
        rows = await self._rows(
            "SELECT doc_id, last_sequence FROM documents WHERE source_id = %s AND state = 'active'",
            (source_id,),
        )
        return {row[0]: int(row[1]) for row in rows}

    async def document_sequence(self, tenant_id: str, source_id: str, doc_id: str) -> int | None:
        row = await self._row(
            "SELECT last_sequence FROM documents WHERE tenant_id = %s AND source_id = %s "
            "AND doc_id = %s",
            (tenant_id, source_id, doc_id),
        )
        return int(row[0]) if row else None

    async def index_state(self, source_id: str) -> tuple[dict[str, str], dict[str, int]]:
        """Content hashes of the active documents, and the last sequence applied to each
        document (deleted ones included): what reconcile compares a source with."""
        rows = await self._rows(
            "SELECT doc_id, state, content_hash, last_sequence FROM documents WHERE source_id = %s",
            (source_id,),
        )
        held = {row[0]: row[2] for row in rows if row[1] == "active"}
        return held, {row[0]: int(row[3]) for row in rows}

    async def _select(self, where: LiteralString, *params: str) -> list[SourceManifest]:
        rows = await self._rows(sql.SQL("SELECT manifest FROM sources ") + sql.SQL(where), params)
        return [SourceManifest.model_validate(row[0]) for row in rows]
