"""The transactional outbox: rows written with a decision, relayed to the broker after commit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from govindex.adapters.postgres.tx import PostgresAdapter, transaction
from govindex.core.envelope import KafkaRecord


class PostgresOutbox(PostgresAdapter):
    """Hands outbox rows to a publisher, oldest first; marks them once the broker has them."""

    async def relay(
        self, publish: Callable[[str, KafkaRecord], Awaitable[None]], limit: int = 200
    ) -> int:
        """Publish up to `limit` pending rows with `await publish(topic, record)`.

        SKIP LOCKED lets several relays run without publishing a row twice at once; a crash
        after publishing but before marking re-publishes it, which consumers dedupe by id.
        """
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT id, topic, key, value, headers FROM outbox WHERE published_at IS NULL "
                "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                (limit,),
            )
            rows = await cur.fetchall()
            for _id, topic, key, value, headers in rows:
                record = KafkaRecord(
                    key=key.encode(),
                    value=bytes(value),
                    headers=[(name, str(v).encode()) for name, v in headers],
                )
                await publish(topic, record)
            if rows:
                await conn.execute(
                    "UPDATE outbox SET published_at = now() WHERE id = ANY(%s)",
                    ([row[0] for row in rows],),
                )
        return len(rows)
