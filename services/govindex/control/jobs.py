"""Running jobs: who runs them, how a command starts one, how `jobs resume` continues one.

A job runs in the process of the command that started it (or resumed it), step by step;
each step commits its effect with the checkpoint and reads back the job's state and rate,
so `govindex jobs pause|cancel|rate` from another terminal take effect at the next step.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Mapping
from typing import Any

import structlog

from govindex.core.jobs import RUN, Job, JobError, JobState, JobTakenOver
from govindex.runtime.composition import Runtime
from govindex.runtime.job_types import Progress, Runner, requester, runner_id

log = structlog.get_logger(__name__)


def _run_token() -> str:
    """Who runs a job: this process (host:pid), and which run of it in this process."""
    return f"{runner_id()}/{secrets.token_hex(4)}"


def _runners() -> dict[str, Runner]:
    from govindex.control.dlq import REDRIVE, run_redrive
    from govindex.control.offsets import RESET, run_reset
    from govindex.control.reembed import REEMBED, run_reembed
    from govindex.control.reindex import REINDEX, run_reindex
    from govindex.control.replay import REPLAY, run_replay
    from ingest.app import BACKFILL, run_backfill

    return {
        REDRIVE: run_redrive,
        RESET: run_reset,
        REPLAY: run_replay,
        REINDEX: run_reindex,
        REEMBED: run_reembed,
        BACKFILL: run_backfill,
    }


async def start_job(
    rt: Runtime,
    kind: str,
    args: Mapping[str, Any],
    *,
    dry_run: bool,
    rate: float | None,
    progress: Progress,
) -> Job:
    """Record a job and run it here to the end (or until paused or cancelled)."""
    job = await rt.jobs.create(
        kind, args, requested_by=requester(), dry_run=dry_run, rate=rate, runner=_run_token()
    )
    log.info("job.started", job=job.id, kind=kind, dry_run=dry_run, args=dict(args))
    return await _run(rt, job, progress)


async def launch_job(
    rt: Runtime,
    kind: str,
    args: Mapping[str, Any],
    *,
    dry_run: bool,
    rate: float | None,
    requested_by: str,
) -> tuple[Job, asyncio.Task[Job]]:
    """Record a job and run it in this process's event loop (a server's); returns the job
    as recorded and the task running it."""
    if kind not in _runners():
        raise JobError(f"no job kind {kind!r}; known: {', '.join(sorted(_runners()))}")
    job = await rt.jobs.create(
        kind, args, requested_by=requested_by, dry_run=dry_run, rate=rate, runner=_run_token()
    )
    log.info("job.started", job=job.id, kind=kind, dry_run=dry_run, args=dict(args))
    return job, asyncio.create_task(_run(rt, job, _quiet))


async def relaunch_job(rt: Runtime, job_id: int) -> tuple[Job, asyncio.Task[Job]]:
    """`resume_job`, run as a task of this process's event loop."""
    job = await _claim(rt, job_id)
    return job, asyncio.create_task(_run(rt, job, _quiet))


def _quiet(done: int, total: int | None) -> None:
    """No progress bar: the job's row says how far it is."""


def _gone(runner: str | None) -> bool:
    """Whether `runner` (host:pid) is a process of this host that no longer exists."""
    host, _, pid = (runner or "").partition("/")[0].rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, another user's
        return False
    return False


async def resume_job(rt: Runtime, job_id: int, progress: Progress) -> Job:
    """Continue a paused or failed job, or one whose process died, from its checkpoint.

    A job still `running` is taken over once its heartbeat is stale, or at once when its
    process was on this host and is gone."""
    return await _run(rt, await _claim(rt, job_id), progress)


async def _claim(rt: Runtime, job_id: int) -> Job:
    current = await rt.jobs.get(job_id)
    dead = current is not None and _gone(current.runner)
    job = await rt.jobs.claim(job_id, _run_token(), runner_gone=dead)
    log.info("job.resumed", job=job.id, kind=job.kind, checkpoint=job.checkpoint)
    return job


async def _run(rt: Runtime, job: Job, progress: Progress) -> Job:
    runner = _runners().get(job.kind)
    if runner is None:
        raise JobError(f"job {job.id} is a {job.kind!r} job, which this version cannot run")
    RUN.set(job.runner)  # every step of this run is fenced on it
    try:
        finished = await runner(rt, job, progress)
    except JobTakenOver as exc:
        log.warning("job.taken_over", job=job.id, reason=str(exc))
        current = await rt.jobs.get(job.id)
        return current or job
    except BaseException as exc:
        # Interrupted (Ctrl-C) or failed: a failure is recorded; an interruption leaves the
        # job running with a stale heartbeat, so `jobs resume` can take it over.
        if isinstance(exc, Exception):
            await rt.jobs.set_state(job.id, JobState.FAILED, error=str(exc)[:2000])
            log.error("job.failed", job=job.id, error=str(exc))
        raise
    log.info("job.stopped", job=job.id, state=finished.state.value, counts=finished.counts)
    return finished
