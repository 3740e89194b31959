"""`govindex jobs list|show|pause|resume|cancel|rate`, and how a command runs a job."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from govindex.cli.common import (
    DEFAULT_DIR,
    Failure,
    JsonLines,
    LogLevel,
    StateDir,
    argument,
    console,
    err,
    print_table,
    setup,
    when,
    with_runtime,
)

if TYPE_CHECKING:
    from govindex.control.job_requests import JobRequest
    from govindex.core.jobs import (
        Job,
        JobItem,
        JobState,
    )  # imported where they run: `govindex --help` loads no driver
    from govindex.core.settings import Settings
    from govindex.runtime.composition import Runtime
    from govindex.runtime.job_types import Progress as ReportProgress

app = typer.Typer(
    help="Operator jobs (replays, redrives, resets, rebuilds, backfills): list them, watch "
    "them, pause, resume, cancel, or change their rate while they run.",
    no_args_is_help=True,
)

JobId = Annotated[int, argument("ID", "The job's id (`govindex jobs list`).", kind=int)]
Rate = Annotated[
    float | None,
    typer.Option(
        "--rate",
        metavar="PER_SECOND",
        min=0.001,
        help="At most this many items per second (change it later with `govindex jobs rate`).",
    ),
]
Execute = Annotated[
    bool,
    typer.Option(
        "--execute",
        help="Act. Without it the job is a dry run: it reports what it would do, changes nothing.",
    ),
]


@contextmanager
def job_progress(what: str) -> Iterator[ReportProgress]:
    """done/total, rate and ETA on a terminal's stderr; nothing when output is piped."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    if not err.is_terminal:
        yield lambda done, total: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(what, total=None, rate="")

        def update(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)
            speed = bar.tasks[task].speed
            bar.update(task, rate=f"{speed:.1f}/s" if speed else "")

        yield update


def run_job(settings: Settings, request: JobRequest, *, execute: bool, rate: float | None) -> Job:
    """Start the job `request` describes, run it here with a progress bar, return it ended
    (or paused, or cancelled): the CLI's jobs take the admin API's arguments."""
    from govindex.control.jobs import start_job

    async def run(rt: Runtime, progress: ReportProgress) -> Job:
        args = await request.args(rt)
        kind = request.kind
        return await start_job(rt, kind, args, dry_run=not execute, rate=rate, progress=progress)

    with job_progress(request.kind) as progress:
        return with_runtime(settings, lambda rt: run(rt, progress))


def report(job: Job) -> int:
    """Print how a job ended; the exit code: 0 done (or paused/cancelled on request), 1 failed."""
    from govindex.core.jobs import JobState

    mode = "dry run" if job.dry_run else "executed"
    counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(job.counts.items()))
    console.print(
        f"job {job.id} ({job.kind}, {mode}) {job.state.value}: "
        f"{job.done}/{job.total if job.total is not None else '?'} items"
        + (f"; {counts}" if counts else "")
    )
    if job.state == JobState.PAUSED:
        console.print(f"resume it with `govindex jobs resume {job.id}`")
    if job.dry_run and job.state == JobState.SUCCEEDED:
        console.print("nothing was changed; add --execute to act")
    if job.state == JobState.FAILED:
        err.print(f"job {job.id} failed: {job.error}")
        return 1
    return 0


def _row(job: Job) -> list[str]:
    total = "?" if job.total is None else str(job.total)
    return [
        str(job.id),
        job.kind,
        job.state.value,
        "dry run" if job.dry_run else "execute",
        f"{job.done}/{total}",
        "" if job.rate is None else f"{job.rate:g}/s",
        job.requested_by,
        when(job.created_at),
    ]


@app.command("list")
def list_command(
    kind: Annotated[
        str | None, typer.Option("--kind", metavar="KIND", help="Only jobs of this kind.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", min=1, help="How many, newest first.")
    ] = 20,
    as_json: JsonLines = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """The most recent jobs, newest first.

    Each job's id, kind, state, whether it is a dry run, items done of the total, its rate,
    who asked for it and when.

        govindex jobs list
        govindex jobs list --kind dlq-redrive --json
    """
    settings = setup(state_dir, log_level)
    jobs = with_runtime(settings, lambda rt: rt.jobs.recent(limit, kind))
    if as_json:
        for job in jobs:
            console.print(job.model_dump_json(), soft_wrap=True)
        return 0
    header = ["id", "kind", "state", "mode", "done", "rate", "by", "created"]
    print_table(header, (_row(job) for job in jobs))
    return 0


@app.command("show")
def show_command(
    job_id: JobId, state_dir: StateDir = DEFAULT_DIR, log_level: LogLevel = "WARNING"
) -> int:
    """Everything recorded about one job: arguments, state, checkpoint, counts, error.

    Printed as JSON.

        govindex jobs show 12
    """
    settings = setup(state_dir, log_level)
    job = with_runtime(settings, lambda rt: _get(rt, job_id))
    console.print(json.dumps(job.model_dump(mode="json"), indent=2), soft_wrap=True)
    return 0


@app.command("items")
def items_command(
    job_id: JobId,
    outcome: Annotated[
        str | None,
        typer.Option("--outcome", metavar="OUTCOME", help="Only records with this outcome."),
    ] = None,
    as_json: JsonLines = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """What a job did with each record it looked at, or would do in a dry run (a replay
    records one line per event: position, document, sequence, prediction and reason).

    Records of a dry run say what the job would do, those of an executed job what it
    did.

        govindex jobs items 12
        govindex jobs items 12 --outcome dead_letter --json
    """
    settings = setup(state_dir, log_level)

    async def read(rt: Runtime) -> list[JobItem]:
        await _get(rt, job_id)
        return [x for x in await rt.jobs.items(job_id) if outcome in (None, x.outcome)]

    items = with_runtime(settings, read)
    if as_json:
        for x in items:
            console.print(json.dumps(dataclasses.asdict(x)), soft_wrap=True)
        return 0
    header = ["position", "event", "document", "sequence", "outcome", "reason"]
    print_table(
        header,
        (
            [
                f"{x.topic}[{x.partition}]@{x.offset}",
                x.event_type.rsplit(".", 2)[-2] if x.event_type else "",
                x.doc_key,
                "" if x.sequence is None else str(x.sequence),
                x.outcome,
                x.reason,
            ]
            for x in items
        ),
    )
    return 0


@app.command("pause")
def pause_command(
    job_id: JobId, state_dir: StateDir = DEFAULT_DIR, log_level: LogLevel = "WARNING"
) -> int:
    """Stop a running job after its current step; `govindex jobs resume ID` continues it.

    A job runs in the process that started it (or resumed it); that process stops at its
    next step.

        govindex jobs pause 12
    """
    from govindex.core.jobs import JobState

    return _set(job_id, JobState.PAUSED, state_dir, log_level)


@app.command("cancel")
def cancel_command(
    job_id: JobId, state_dir: StateDir = DEFAULT_DIR, log_level: LogLevel = "WARNING"
) -> int:
    """Stop a job for good after its current step (what it did stays done).

    A cancelled job cannot be resumed; a rebuild's unfinished generation is dropped.

        govindex jobs cancel 12
    """
    from govindex.core.jobs import JobState

    return _set(job_id, JobState.CANCELLED, state_dir, log_level)


@app.command("rate")
def rate_command(
    job_id: JobId,
    rate: Annotated[float, argument("PER_SECOND", "Items per second; 0: no limit.", kind=float)],
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Change a job's rate; a running job follows it from its next step.

    The rate is items per second; 0 lifts the limit. The job's next step waits as long
    as the new rate asks.

        govindex jobs rate 12 50
        govindex jobs rate 12 0
    """
    if rate < 0:
        raise typer.BadParameter(f"{rate:g} is below 0", param_hint="PER_SECOND")
    settings = setup(state_dir, log_level)
    job = with_runtime(settings, lambda rt: _rate(rt, job_id, rate or None))
    console.print(f"job {job.id}: rate {'unlimited' if job.rate is None else f'{job.rate:g}/s'}")
    return 0


@app.command("resume")
def resume_command(
    job_id: JobId, state_dir: StateDir = DEFAULT_DIR, log_level: LogLevel = "WARNING"
) -> int:
    """Continue a paused or failed job, or one whose process died, from its checkpoint,
    in this process (until it ends, is paused again or cancelled).

    Shows its progress on a terminal, and how it ended.

        govindex jobs resume 12
    """
    from govindex.control.jobs import resume_job

    settings = setup(state_dir, log_level)
    with job_progress(f"job {job_id}") as progress:
        job = with_runtime(settings, lambda rt: resume_job(rt, job_id, progress))
    return report(job)


async def _get(rt: Runtime, job_id: int) -> Job:
    job = await rt.jobs.get(job_id)
    if job is None:
        raise Failure(f"no job {job_id}; `govindex jobs list` shows the recent ones")
    return job


async def _rate(rt: Runtime, job_id: int, rate: float | None) -> Job:
    await _get(rt, job_id)
    return await rt.jobs.set_rate(job_id, rate)


def _set(job_id: int, state: JobState, state_dir: Path, log_level: str) -> int:
    from govindex.core.jobs import JobState

    async def apply(rt: Runtime) -> Job:
        job = await _get(rt, job_id)
        if job.state in (JobState.SUCCEEDED, JobState.CANCELLED):
            raise Failure(f"job {job_id} is already {job.state.value}")
        return await rt.jobs.set_state(job_id, state)

    settings = setup(state_dir, log_level)
    job = with_runtime(settings, apply)
    console.print(f"job {job.id} {job.state.value}")
    return 0
