"""Webhook deliveries already handled: a redelivered push is recognised and emits nothing."""

from __future__ import annotations

from govindex.adapters.postgres.tx import PostgresAdapter


class PostgresDeliveries(PostgresAdapter):
    """Implements Deliveries."""

    async def seen(self, provider: str, delivery_id: str) -> bool:
        return bool(
            await self._row(
                "SELECT 1 FROM webhook_deliveries WHERE provider = %s AND delivery_id = %s",
                (provider, delivery_id),
            )
        )

    async def record(self, provider: str, delivery_id: str, sources: str) -> None:
        await self._execute(
            "INSERT INTO webhook_deliveries (provider, delivery_id, source_id, outcome) "
            "VALUES (%s, %s, %s, 'synced') ON CONFLICT DO NOTHING",
            (provider, delivery_id, sources),
        )
