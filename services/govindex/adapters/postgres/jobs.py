"""The jobs table, what each job did with each record, and what a job that re-publishes
records (a redrive, a replay) writes in each of its steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, LiteralString

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from govindex.adapters.postgres.tx import PostgresAdapter, connection, enqueue, transaction
from govindex.core.jobs import (
    RUN,
    STALE_AFTER_S,
    Job,
    JobError,
    JobItem,
    JobState,
    JobTakenOver,
    StepOutcome,
)
from govindex.core.ports import OutboxMessage


class PostgresJobs(PostgresAdapter):
    """Implements JobStore (and the dead-letter bookkeeping of redrives)."""

    async def create(
        self,
        kind: str,
        args: Mapping[str, Any],
        *,
        requested_by: str,
        dry_run: bool,
        rate: float | None,
        runner: str,
    ) -> Job:
        return await self._one(
            "INSERT INTO jobs (kind, requested_by, args, dry_run, rate, runner, heartbeat_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, now()) RETURNING *",
            (kind, requested_by, Jsonb(dict(args)), dry_run, rate, runner),
        )

    async def get(self, job_id: int) -> Job | None:
        rows = await self._jobs("SELECT * FROM jobs WHERE id = %s", (job_id,))
        return rows[0] if rows else None

    async def recent(self, limit: int, kind: str | None = None) -> list[Job]:
        return await self._jobs(
            "SELECT * FROM jobs WHERE %s::text IS NULL OR kind = %s ORDER BY id DESC LIMIT %s",
            (kind, kind, limit),
        )

    async def claim(self, job_id: int, runner: str, *, runner_gone: bool = False) -> Job:
        rows = await self._jobs(
            "UPDATE jobs SET state = 'running', runner = %s, heartbeat_at = now(), "
            "updated_at = now(), finished_at = NULL, error = NULL WHERE id = %s "
            "AND (state IN ('paused', 'failed') OR (state = 'running' AND (%s "
            "OR heartbeat_at IS NULL OR heartbeat_at < now() - make_interval(secs => %s)))) "
            "RETURNING *",
            (runner, job_id, runner_gone, STALE_AFTER_S),
        )
        if rows:
            return rows[0]
        job = await self.get(job_id)
        if job is None:
            raise JobError(f"no job {job_id}; `govindex jobs list` shows the recent ones")
        if job.state in (JobState.SUCCEEDED, JobState.CANCELLED):
            raise JobError(f"job {job_id} is {job.state.value}; nothing to resume")
        raise JobError(
            f"job {job_id} is running in {job.runner} (last heartbeat {job.heartbeat_at}); "
            f"pause it first, or wait {STALE_AFTER_S:.0f} s if that process is gone"
        )

    async def set_state(self, job_id: int, state: JobState, error: str | None = None) -> Job:
        finished = state.finished
        return await self._one(
            "UPDATE jobs SET state = %s, error = coalesce(%s, error), updated_at = now(), "
            "finished_at = CASE WHEN %s THEN now() END, "
            "runner = CASE WHEN %s THEN NULL ELSE runner END "
            "WHERE id = %s RETURNING *",
            (state.value, error, finished, finished or state == JobState.PAUSED, job_id),
        )

    async def set_rate(self, job_id: int, rate: float | None) -> Job:
        return await self._one(
            "UPDATE jobs SET rate = %s, updated_at = now() WHERE id = %s RETURNING *",
            (rate, job_id),
        )

    async def start(self, job_id: int, total: int | None, checkpoint: Mapping[str, Any]) -> None:
        await self._execute(
            "UPDATE jobs SET total = %s, checkpoint = %s, updated_at = now() WHERE id = %s",
            (total, Jsonb(dict(checkpoint)), job_id),
        )

    async def beat(self, job_id: int) -> StepOutcome:
        try:
            async with transaction(self._pool) as conn:
                cur = await conn.execute(
                    "UPDATE jobs SET heartbeat_at = now() WHERE id = %s "
                    "AND (%s::text IS NULL OR runner = %s) RETURNING state, rate",
                    (job_id, RUN.get(), RUN.get()),
                )
                return await _fenced(conn, job_id, await cur.fetchone())
        except _Stopped as stopped:
            return stopped.outcome

    async def record(
        self,
        job_id: int,
        *,
        done: int,
        counts: Mapping[str, int],
        checkpoint: Mapping[str, Any],
        finished: bool = False,
        items: Sequence[JobItem] = (),
    ) -> StepOutcome:
        """A step that wrote nothing but the job's own progress (a dry run's), with what it
        would have done with each record it looked at."""
        try:
            async with transaction(self._pool) as conn:
                await _items(conn, job_id, items)
                return await self._advance(conn, job_id, done, counts, checkpoint, finished)
        except _Stopped as stopped:
            return stopped.outcome

    async def items(self, job_id: int) -> list[JobItem]:
        """What the job did (or, in a dry run, would do) with each record, in its order."""
        return await self._typed(
            JobItem,
            'SELECT topic, partition, "offset", event_id, doc_key, event_type, sequence, '
            "outcome, reason FROM job_items WHERE job_id = %s ORDER BY seq",
            (job_id,),
        )

    # --- dead letters ---------------------------------------------------------------------

    async def actions(self, topic: str) -> dict[tuple[int, int], str]:
        """What redrives did with the dead letters of `topic`: (partition, offset) -> action."""
        rows = await self._rows(
            'SELECT partition, "offset", action FROM dead_letter_actions WHERE topic = %s',
            (topic,),
        )
        return {(int(p), int(o)): str(a) for p, o, a in rows}

    async def publish_step(
        self,
        job_id: int,
        *,
        messages: Sequence[OutboxMessage],
        unsettle: Sequence[tuple[str, str]],
        done: int,
        counts: Mapping[str, int],
        checkpoint: Mapping[str, Any],
        finished: bool = False,
        topic: str = "",
        actions: Sequence[tuple[int, int, str]] = (),
        items: Sequence[JobItem] = (),
    ) -> StepOutcome:
        """One transaction: the records to publish (the relay sends them), the dead-lettered
        marks cleared (so the consumer's next outcome is recorded afresh), what was done
        with each dead letter of `topic` or each record, and the job's progress. A crash
        before the commit leaves none of it; the resumed job starts from the previous
        checkpoint."""
        try:
            async with transaction(self._pool) as conn:
                await _items(conn, job_id, items)
                async with conn.cursor() as cur:
                    if actions:
                        await cur.executemany(
                            'INSERT INTO dead_letter_actions (topic, partition, "offset", action, '
                            "job_id) VALUES (%s, %s, %s, %s, %s)",
                            [(topic, p, o, action, job_id) for p, o, action in actions],
                        )
                    if unsettle:
                        await cur.executemany(
                            "DELETE FROM dead_lettered WHERE consumer = %s AND event_id = %s",
                            list(unsettle),
                        )
                await enqueue(conn, messages)
                return await self._advance(conn, job_id, done, counts, checkpoint, finished)
        except _Stopped as stopped:
            return stopped.outcome

    # --- helpers ----------------------------------------------------------------------------

    @staticmethod
    async def _advance(
        conn: Any,
        job_id: int,
        done: int,
        counts: Mapping[str, int],
        checkpoint: Mapping[str, Any],
        finished: bool,
    ) -> StepOutcome:
        cur = await conn.execute(
            "UPDATE jobs SET done = %s, counts = %s, checkpoint = %s, heartbeat_at = now(), "
            "updated_at = now(), "
            "state = CASE WHEN %s AND state = 'running' THEN 'succeeded' ELSE state END, "
            "finished_at = CASE WHEN %s AND state = 'running' THEN now() ELSE finished_at END "
            "WHERE id = %s AND (%s::text IS NULL OR runner = %s) RETURNING state, rate",
            (
                done,
                Jsonb(dict(counts)),
                Jsonb(dict(checkpoint)),
                finished,
                finished,
                job_id,
                RUN.get(),
                RUN.get(),
            ),
        )
        return await _fenced(conn, job_id, await cur.fetchone())

    async def _jobs(self, query: LiteralString, params: Sequence[Any]) -> list[Job]:
        async with connection(self._pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(query, params)
            return [Job.model_validate(row) for row in await cur.fetchall()]

    async def _one(self, query: LiteralString, params: Sequence[Any]) -> Job:
        rows = await self._jobs(query, params)
        if not rows:
            raise JobError("no such job; `govindex jobs list` shows the recent ones")
        return rows[0]


class _Stopped(Exception):
    """Raised inside a step's transaction to roll it back: the job was paused or cancelled
    (and so left by this run) since the step began."""

    def __init__(self, outcome: StepOutcome) -> None:
        super().__init__(outcome.state.value)
        self.outcome = outcome


async def _fenced(conn: Any, job_id: int, row: tuple[Any, ...] | None) -> StepOutcome:
    """The step's outcome when this run still holds the job. Otherwise the step rolls back:
    paused or cancelled, this run stops as asked; taken over, it stops without a word."""
    if row is not None:
        return StepOutcome(JobState(row[0]), row[1])
    cur = await conn.execute("SELECT state, rate, runner FROM jobs WHERE id = %s", (job_id,))
    found = await cur.fetchone()
    if found is None:
        raise JobError(f"job {job_id} disappeared from the jobs table")
    state = JobState(found[0])
    if state in (JobState.PAUSED, JobState.CANCELLED):
        raise _Stopped(StepOutcome(state, found[1]))
    raise JobTakenOver(
        f"job {job_id} is {state.value} in {found[2] or 'no process'}; this run stops"
    )


async def _items(conn: Any, job_id: int, items: Sequence[JobItem]) -> None:
    if not items:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            'INSERT INTO job_items (job_id, topic, partition, "offset", event_id, doc_key, '
            "event_type, sequence, outcome, reason) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
            "%s, %s) ON CONFLICT DO NOTHING",
            [
                (
                    job_id,
                    x.topic,
                    x.partition,
                    x.offset,
                    x.event_id,
                    x.doc_key,
                    x.event_type,
                    x.sequence,
                    x.outcome,
                    x.reason,
                )
                for x in items
            ],
        )
