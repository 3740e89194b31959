"""The transactional outbox: rows written with a decision, relayed to the broker after commit.

Rows that a consumer must apply (`awaits`) stay pending until that consumer processed or
dead-lettered their event, and are published again until then: after a restart, after a
broker lost its log, or when one copy was simply lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.tx import PostgresAdapter, transaction
from govindex.core.envelope import KafkaRecord

# How long a published, unsettled event waits before it is published again: this many
# seconds, doubling with each publication, at most an hour.
MAX_REPUBLISH_S = 3600


_UNPUBLISHED = (
    "SELECT id, topic, key, value, headers FROM outbox WHERE published_at IS NULL "
    "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"
)
_UNPUBLISHED_OF = (
    "SELECT id, topic, key, value, headers FROM outbox WHERE published_at IS NULL "
    "AND event_id = ANY(%s) ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"
)


class PostgresOutbox(PostgresAdapter):
    """Implements Outbox and DeadLetterLog."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        super().__init__(pool)
        self._listener: AsyncConnection[Any] | None = None

    async def relay(
        self,
        publish: Callable[[str, Sequence[KafkaRecord]], Awaitable[None]],
        limit: int = 1000,
        event_ids: Sequence[str] | None = None,
    ) -> int:
        """Publish up to `limit` unpublished rows, oldest first: one `publish` per topic run,
        which sends them all and waits once for the broker's acknowledgements. With
        `event_ids`, only those events' rows (what a command just emitted, published at once
        rather than behind the relay's backlog; the order guard orders them).

        SKIP LOCKED lets several relays run without publishing a row twice at once; a crash
        after publishing but before marking re-publishes it, which consumers dedupe by id.
        Rows of one key keep their order: same topic, one producer, sent in id order.
        """
        async with transaction(self._pool) as conn:
            if event_ids is None:
                cur = await conn.execute(_UNPUBLISHED, (limit,))
            else:
                cur = await conn.execute(_UNPUBLISHED_OF, (list(event_ids), limit))
            rows = await cur.fetchall()
            run: list[KafkaRecord] = []
            for i, (_id, topic, key, value, headers) in enumerate(rows):
                run.append(
                    KafkaRecord(
                        key=key.encode(),
                        value=bytes(value),
                        headers=[(name, str(v).encode()) for name, v in headers],
                    )
                )
                if i + 1 == len(rows) or rows[i + 1][1] != topic:
                    await publish(topic, run)
                    run = []
            if rows:
                await conn.execute(
                    "UPDATE outbox SET published_at = now(), publish_count = publish_count + 1 "
                    "WHERE id = ANY(%s)",
                    ([row[0] for row in rows],),
                )
        return len(rows)

    async def wait_for_rows(self, timeout_s: float) -> bool:
        """Sleep until a transaction that wrote outbox rows commits (LISTEN/NOTIFY), or for
        `timeout_s`; True if woken by one. Without a listening connection (Postgres down,
        or restarting), it sleeps the timeout: the relay then simply polls."""
        try:
            if self._listener is None or self._listener.closed:
                conninfo = self._pool.conninfo
                assert isinstance(conninfo, str)  # the pool is built from a DSN
                self._listener = await AsyncConnection.connect(conninfo, autocommit=True)
                await self._listener.execute("LISTEN govindex_outbox")
            async for _ in self._listener.notifies(timeout=timeout_s, stop_after=1):
                return True
            return False
        except psycopg.Error:
            await self.close_listener()
            await asyncio.sleep(timeout_s)
            return False

    async def close_listener(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(psycopg.Error):
                await self._listener.close()
            self._listener = None

    async def settle(self) -> int:
        """Mark pending events their consumer processed or dead-lettered; return how many."""
        return await self._execute(
            "UPDATE outbox o SET settled_at = now() WHERE o.awaits IS NOT NULL "
            "AND o.settled_at IS NULL AND o.published_at IS NOT NULL AND ("
            " EXISTS (SELECT 1 FROM processed_events p WHERE p.consumer = o.awaits "
            "  AND p.event_id = o.event_id) OR "
            " EXISTS (SELECT 1 FROM dead_lettered d WHERE d.consumer = o.awaits "
            "  AND d.event_id = o.event_id))"
        )

    async def republish(self, after_s: float | None) -> int:
        """Queue pending events for publication again; return how many.

        `after_s` None: every published, unsettled event (at start, when the broker may have
        lost its log). Otherwise those whose last publication is older than their backoff.
        """
        if after_s is None:
            return await self._execute(
                "UPDATE outbox SET published_at = NULL, republished_at = now() "
                "WHERE awaits IS NOT NULL AND settled_at IS NULL AND published_at IS NOT NULL"
            )
        return await self._execute(
            "UPDATE outbox SET published_at = NULL, republished_at = now() "
            "WHERE awaits IS NOT NULL AND settled_at IS NULL AND published_at IS NOT NULL "
            "AND published_at < now() - make_interval(secs => least(%s, "
            " %s * power(2, greatest(publish_count - 1, 0))))",
            (MAX_REPUBLISH_S, after_s),
        )

    async def prune(self, older_than_s: float) -> int:
        """Delete rows that need nothing more: published and settled (or awaited by no one)."""
        return await self._execute(
            "DELETE FROM outbox WHERE published_at < now() - make_interval(secs => %s) "
            "AND (awaits IS NULL OR settled_at IS NOT NULL)",
            (older_than_s,),
        )

    async def dead_lettered(self, consumer: str, event_id: str, reason: str) -> None:
        """A consumer dead-lettered an event: it is settled, never re-published."""
        await self._execute(
            "INSERT INTO dead_lettered (consumer, event_id, reason) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (consumer, event_id, reason),
        )
