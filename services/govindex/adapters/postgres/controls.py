"""Worker controls (pause/resume flags) and worker heartbeats."""

from __future__ import annotations

from collections.abc import Sequence

from govindex.adapters.postgres.tx import PostgresAdapter
from govindex.core.ports.operations import Heartbeat


class PostgresControls(PostgresAdapter):
    async def paused(self) -> set[str]:
        rows = await self._rows("SELECT kind FROM worker_controls WHERE paused")
        return {str(r[0]) for r in rows}

    async def set_paused(self, kind: str, paused: bool, requested_by: str) -> None:
        await self._execute(
            "INSERT INTO worker_controls (kind, paused, requested_by) VALUES (%s, %s, %s) "
            "ON CONFLICT (kind) DO UPDATE SET paused = EXCLUDED.paused, "
            "requested_by = EXCLUDED.requested_by, updated_at = now()",
            (kind, paused, requested_by),
        )

    async def beat(
        self,
        runner: str,
        kinds: Sequence[str],
        paused: Sequence[str],
        healing: str | None = None,
    ) -> None:
        await self._execute(
            "INSERT INTO worker_heartbeats (runner, kinds, paused, healing) "
            "VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (runner) DO UPDATE SET kinds = EXCLUDED.kinds, "
            "paused = EXCLUDED.paused, healing = EXCLUDED.healing, beat_at = now()",
            (runner, list(kinds), list(paused), healing),
        )

    async def gone(self, runner: str) -> None:
        await self._execute("DELETE FROM worker_heartbeats WHERE runner = %s", (runner,))

    async def alive(self, within_s: float) -> list[Heartbeat]:
        """Processes that reported within `within_s` seconds."""
        return await self._typed(
            Heartbeat,
            "SELECT runner, kinds, paused, beat_at FROM worker_heartbeats "
            "WHERE beat_at > now() - make_interval(secs => %s) ORDER BY runner",
            (within_s,),
        )
