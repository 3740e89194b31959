"""`govindex replay`: re-publish one source's events of a time range, as a job."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, cast

import typer

from govindex.cli.common import (
    DEFAULT_DIR,
    EVENT_KINDS,
    LogLevel,
    SourceId,
    StateDir,
    aware_datetime,
    check_globs,
    setup,
)
from govindex.cli.jobs import Execute, Rate, report, run_job


def replay_command(
    source: SourceId,
    since: Annotated[
        datetime,
        typer.Option(
            "--from",
            metavar="TIME",
            parser=aware_datetime,
            help="Events appended at or after TIME (ISO 8601 with a zone).",
        ),
    ],
    until: Annotated[
        datetime | None,
        typer.Option(
            "--to",
            metavar="TIME",
            parser=aware_datetime,
            help="...and before TIME; default now (the topics' ends when the job starts).",
        ),
    ] = None,
    docs: Annotated[
        list[str] | None,
        typer.Option(
            "--doc",
            metavar="PATTERN",
            callback=check_globs,
            help="Only documents matching PATTERN (gitignore syntax, like a source's include); "
            "repeat for several.",
        ),
    ] = None,
    kinds: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            metavar="KIND",
            help=f"Only these kinds of events: {', '.join(EVENT_KINDS)}; repeat for several.",
        ),
    ] = None,
    rate: Rate = None,
    execute: Execute = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Re-publish one source's document events of a time range, as a job.

    Scans the documents and deletions topics between the two times (by key and headers; no
    body is decoded to choose) and re-publishes each event with the same key and id plus a
    `govindex-job` header. Dry run by default: predicts, reading only, what the indexer will
    do with each event (apply, duplicate, stale, behind_tombstone, or dead_letter with its
    reason); `govindex jobs items ID` lists them. A replay never brings deleted content
    back: an event behind a tombstone is dropped.

        govindex replay --source handbook --from 2025-03-01T00:00:00Z --to 2025-03-02T00:00:00Z
        govindex replay --source handbook --from 2025-03-01T00:00:00Z --doc 'runbooks/**' --execute
    """
    from govindex.control.job_requests import ReplayJob
    from govindex.core.replays import TYPES, EventKind

    for kind in kinds or ():
        if kind not in TYPES:
            raise typer.BadParameter(
                f"{kind!r} is not one of {', '.join(TYPES)}", param_hint="--type"
            )
    end = until or datetime.now(UTC)
    if end <= since:
        raise typer.BadParameter(f"--to {end.isoformat()} is not after --from", param_hint="--to")
    settings = setup(state_dir, log_level)

    request = ReplayJob(
        kind="replay",
        source=source,
        since=since,
        until=end,
        docs=list(docs or []),
        types=[cast(EventKind, k) for k in kinds or []],
    )
    return report(run_job(settings, request, execute=execute, rate=rate))
