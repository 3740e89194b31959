"""Index generations: which OpenSearch index holds which build of the projection."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.tx import PostgresAdapter, transaction


class PostgresGenerations(PostgresAdapter):
    def __init__(self, pool: AsyncConnectionPool, alias: str) -> None:
        super().__init__(pool)
        self._alias = alias

    async def begin(self, index_name: Callable[[int], str], job_id: int | None = None) -> int:
        """Register the next generation as building; return its number. With `job_id`, the
        one that job registered before, if it is still building (a resumed job)."""
        async with transaction(self._pool) as conn:
            if job_id is not None:
                cur = await conn.execute(
                    "SELECT generation FROM index_generations WHERE alias = %s AND job_id = %s "
                    "AND state = 'building'",
                    (self._alias, job_id),
                )
                found = await cur.fetchone()
                if found is not None:
                    return int(found[0])
            cur = await conn.execute(
                "SELECT coalesce(max(generation), 0) + 1 FROM index_generations WHERE alias = %s",
                (self._alias,),
            )
            row = await cur.fetchone()
            generation = int(row[0]) if row else 1
            await conn.execute(
                "INSERT INTO index_generations (alias, generation, index_name, state, job_id) "
                "VALUES (%s, %s, %s, 'building', %s)",
                (self._alias, generation, index_name(generation), job_id),
            )
        return generation

    async def go_live(self, generation: int) -> None:
        """The generation becomes live, every other one retired; chunks say where they are."""
        async with transaction(self._pool) as conn:
            await conn.execute(
                "UPDATE index_generations SET state = CASE WHEN generation = %s THEN 'live' "
                "ELSE 'retired' END WHERE alias = %s",
                (generation, self._alias),
            )
            await conn.execute("UPDATE chunks SET index_generation = %s", (generation,))

    async def building(self) -> list[tuple[int, str]]:
        """(generation, index name) of every generation registered and not yet live."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT generation, index_name FROM index_generations "
                "WHERE alias = %s AND state = 'building' ORDER BY generation",
                (self._alias,),
            )
            return [(int(g), str(name)) for g, name in await cur.fetchall()]

    async def live(self) -> int | None:
        """The generation Postgres records as live (what the alias should point at)."""
        row = await self._row(
            "SELECT generation FROM index_generations WHERE alias = %s AND state = 'live' "
            "ORDER BY generation DESC LIMIT 1",
            (self._alias,),
        )
        return int(row[0]) if row else None

    async def get(self, generation: int) -> str | None:
        """The generation's state (building, live, retired); None if never registered."""
        row = await self._row(
            "SELECT state FROM index_generations WHERE alias = %s AND generation = %s",
            (self._alias, generation),
        )
        return str(row[0]) if row else None

    async def retire(self, generation: int) -> None:
        """An abandoned build: workers stop writing to it."""
        await self._execute(
            "UPDATE index_generations SET state = 'retired' WHERE alias = %s AND generation = %s "
            "AND state = 'building'",
            (self._alias, generation),
        )

    async def digests(self, after: str, limit: int) -> list[tuple[str, int, str]]:
        """(chunk_id, sequence, content_hash) of stored chunks after `after`, by chunk id."""
        rows = await self._rows(
            "SELECT chunk_id, sequence, content_hash FROM chunks WHERE chunk_id > %s "
            "ORDER BY chunk_id LIMIT %s",
            (after, limit),
        )
        return [(str(c), int(q), str(h)) for c, q, h in rows]

    async def digests_of(self, chunk_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """chunk_id -> (sequence, content_hash) of those of the ids Postgres holds."""
        if not chunk_ids:
            return {}
        rows = await self._rows(
            "SELECT chunk_id, sequence, content_hash FROM chunks WHERE chunk_id = ANY(%s)",
            (list(chunk_ids),),
        )
        return {str(c): (int(q), str(h)) for c, q, h in rows}

    async def stored_chunks(self) -> int:
        return await self._count("SELECT count(*) FROM chunks")
