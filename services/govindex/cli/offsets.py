"""`govindex offsets show|reset`: a consumer group's position on a topic, and moving it."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from govindex.cli.common import (
    DEFAULT_DIR,
    Failure,
    LogLevel,
    StateDir,
    aware_datetime,
    console,
    err,
    print_table,
    setup,
    with_runtime,
)
from govindex.cli.jobs import Execute, report, run_job

if TYPE_CHECKING:
    from govindex.core.settings import Settings
    from govindex.runtime.composition import Runtime

app = typer.Typer(
    help="A consumer group's committed offsets per partition, and resetting them "
    "(kafka-consumer-groups semantics; refused while the group has live members).",
    no_args_is_help=True,
)

Group = Annotated[
    str,
    typer.Option(
        "--group",
        metavar="GROUP",
        help="The consumer group: a worker's short name (indexer, indexer-deletions, "
        "purger, cdc.SOURCE) or the full Kafka group id.",
    ),
]
TopicOpt = Annotated[
    str,
    typer.Option(
        "--topic",
        metavar="TOPIC[:PARTITION]",
        help="The topic, optionally one partition of it; a short name (documents, "
        "deletions, tombstones) gets the namespace.",
    ),
]


def _topic(settings: Settings, value: str) -> tuple[str, int | None]:
    name, _, part = value.partition(":")
    if part and not part.isdigit():
        raise typer.BadParameter(f"{value!r}: the partition after ':' must be a number")
    topic = name if "." in name else f"{settings.namespace}.{name}"
    return topic, int(part) if part else None


@app.command("show")
def show_command(
    group: Group,
    topic: TopicOpt,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Committed offset, first and end offset and lag of every partition.

    A partition's lag is how many records past the group's committed offset it holds.

        govindex offsets show --group indexer --topic documents
    """
    from govindex.control.offsets import group_name, show_offsets

    settings = setup(state_dir, log_level)
    name, partition = _topic(settings, topic)
    full = group_name(settings, group)
    rows = with_runtime(settings, lambda rt: show_offsets(rt, full, name, partition))
    console.print(f"group {full} on {name}")
    print_table(
        ["partition", "committed", "first", "end", "lag"],
        (
            [
                str(r.partition),
                "-" if r.committed is None else str(r.committed),
                str(r.first),
                str(r.end),
                str(r.lag),
            ]
            for r in rows
        ),
    )
    return 0


@app.command("reset")
def reset_command(
    group: Group,
    topic: TopicOpt,
    to_datetime: Annotated[
        datetime | None,
        typer.Option(
            "--to-datetime",
            metavar="TIME",
            parser=aware_datetime,
            help="The first record at or after TIME (ISO 8601 with a zone).",
        ),
    ] = None,
    to_offset: Annotated[
        int | None,
        typer.Option("--to-offset", metavar="OFFSET", min=0, help="This offset on each partition."),
    ] = None,
    shift_by: Annotated[
        int | None,
        typer.Option("--shift-by", metavar="N", help="Move by N (negative: back, re-reading)."),
    ] = None,
    to_earliest: Annotated[
        bool, typer.Option("--to-earliest", help="The first record each partition holds.")
    ] = False,
    to_latest: Annotated[
        bool, typer.Option("--to-latest", help="The end of each partition (skip what is there).")
    ] = False,
    execute: Execute = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Move a group's committed offsets, as a job; dry run unless --execute.

    Exactly one of --to-datetime, --to-offset, --shift-by, --to-earliest, --to-latest.
    Targets are clamped to what each partition holds. Refused while any worker runs the
    group unpaused or the broker reports live members: pause first.

        govindex worker pause indexer
        govindex offsets reset --group indexer --topic documents --shift-by -100 --execute
        govindex worker resume indexer
    """
    given: dict[str, Any] = {
        k: v
        for k, v in {
            "datetime": to_datetime.isoformat() if to_datetime else None,
            "offset": to_offset,
            "shift_by": shift_by,
            "earliest": to_earliest or None,
            "latest": to_latest or None,
        }.items()
        if v is not None
    }
    if len(given) != 1:
        raise typer.BadParameter(
            "give exactly one of --to-datetime, --to-offset, --shift-by, --to-earliest, --to-latest"
        )
    from govindex.control.job_requests import ResetJob, ResetTarget

    settings = setup(state_dir, log_level)
    name, partition = _topic(settings, topic)
    request = ResetJob(
        kind="offsets-reset",
        group=group,
        topic=name,
        partition=partition,
        to=ResetTarget.model_validate(given),
    )
    job = run_job(settings, request, execute=execute, rate=None)
    plan = job.checkpoint.get("plan", {})
    print_table(
        ["partition", "committed", "new"],
        (
            [p, "-" if v["from"] is None else str(v["from"]), str(v["to"])]
            for p, v in sorted(plan.items(), key=lambda kv: int(kv[0]))
        ),
    )
    refused = job.checkpoint.get("would_be_refused")
    if refused:
        err.print(f"--execute would be refused now: {refused}")
    return report(job)


def pause_or_resume(action: str, kinds: list[str], settings: Settings) -> int:
    """`govindex worker pause|resume KIND...`: set the flag, wait for every process."""
    from govindex.control.offsets import pause_workers

    if not kinds:
        raise Failure(f"name the worker to {action}: indexer, purger or cdc")
    for kind in kinds:

        async def apply(rt: Runtime, kind: str = kind) -> list[str]:
            return await pause_workers(rt, kind, action == "pause")

        runners = with_runtime(settings, apply)
        where = ", ".join(runners) if runners else "no worker process is running it now"
        console.print(f"{kind} {action}d ({where})")
    return 0
