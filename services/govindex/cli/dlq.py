"""`govindex dlq list|show|redrive`: dead letters with their reasons, and redrives as jobs."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from govindex.cli.common import (
    DEFAULT_DIR,
    MAX_REDRIVES,
    JsonLines,
    LogLevel,
    StateDir,
    argument,
    aware_datetime,
    console,
    print_table,
    setup,
    when,
    with_runtime,
)
from govindex.cli.jobs import Execute, Rate, report, run_job

if TYPE_CHECKING:
    from govindex.control.dlq import Listed
    from govindex.core.deadletters import Filter

app = typer.Typer(
    help="Dead letters: records a consumer could not apply, kept with the reason. List and "
    f"inspect them; redrive them to their topic once the cause is fixed (after {MAX_REDRIVES} "
    "failed redrives a record is quarantined instead).",
    no_args_is_help=True,
)

Reason = Annotated[
    str | None,
    typer.Option(
        "--reason", metavar="REASON", help="Only this reason, e.g. invalid_event, unknown_source."
    ),
]
Consumer = Annotated[
    str | None,
    typer.Option(
        "--consumer", metavar="CONSUMER", help="Only those this consumer failed, e.g. indexer."
    ),
]
Since = Annotated[
    datetime | None,
    typer.Option(
        "--since",
        metavar="TIME",
        parser=aware_datetime,
        help="Only those dead-lettered at or after TIME (ISO 8601 with a zone).",
    ),
]
Max = Annotated[int | None, typer.Option("--max", metavar="N", min=1, help="At most this many.")]


def _flt(reason: str | None, consumer: str | None, since: datetime | None) -> Filter:
    from govindex.core.deadletters import Filter

    return Filter(reason=reason, consumer=consumer, since=since)


def _document(key: bytes | None) -> str:
    """The record's key, which names the document (tenant/source/doc) of a document event;
    shown as text, cut short (it is the producer's bytes)."""
    if not key:
        return ""
    text = key.decode("utf-8", "replace").replace("\n", " ")
    return text if len(text) <= 160 else text[:159] + "…"


def _summary(item: Listed) -> dict[str, Any]:
    x = item.letter
    return {
        "position": x.position,
        "dead_lettered_at": when(x.at),
        "consumer": x.consumer,
        "reason": x.reason,
        "document": _document(x.key),
        "origin": x.header("govindex-dlq-origin"),
        "event_id": x.event_id,
        "type": x.header("ce_type"),
        "redrives": x.redrives,
        "handled": item.handled or "",
        "error": x.error,
    }


@app.command("list")
def list_command(
    reason: Reason = None,
    consumer: Consumer = None,
    since: Since = None,
    max_: Max = 100,
    as_json: JsonLines = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Dead letters, oldest first, with why they failed and what a redrive did with them.

    Each dead letter's position (PARTITION:OFFSET, for `govindex dlq show`), when and by
    which consumer it was dead-lettered, the reason, the document it is about (the record's
    key: tenant/source/doc), its redrives and the error.

        govindex dlq list
        govindex dlq list --reason unknown_source --since 2025-03-01T00:00:00Z --json
    """
    from govindex.control.dlq import list_letters

    settings = setup(state_dir, log_level)
    found = with_runtime(
        settings, lambda rt: list_letters(rt, _flt(reason, consumer, since), max_ or 100)
    )
    rows = [_summary(item) for item in found]
    if as_json:
        for row in rows:
            console.print(json.dumps(row), soft_wrap=True)
        return 0
    header = [
        "position",
        "dead-lettered",
        "consumer",
        "reason",
        "document",
        "redrives",
        "handled",
        "error",
    ]
    keys = ["position", "dead_lettered_at", "consumer", "reason", "document", "redrives"]
    keys.append("handled")
    print_table(header, ([*(str(r[k]) for k in keys), str(r["error"])[:60]] for r in rows))
    return 0


@app.command("show")
def show_command(
    position: Annotated[str, argument("PARTITION:OFFSET", "From `govindex dlq list`.")],
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """One dead letter in full: every header, the key and the value.

    Printed as JSON; the value is shown as JSON when it is JSON.

        govindex dlq show 0:42
    """
    from govindex.control.dlq import show_letter

    try:
        partition, offset = (int(part) for part in position.split(":"))
    except ValueError:
        raise typer.BadParameter(f"{position!r} is not PARTITION:OFFSET, e.g. 0:42") from None
    settings = setup(state_dir, log_level)
    item = with_runtime(settings, lambda rt: show_letter(rt, partition, offset))
    x = item.letter
    value: Any = (x.value or b"").decode(errors="replace")
    with contextlib.suppress(ValueError, RecursionError):  # shown as JSON when it is
        value = json.loads(value)
    shown = {
        **_summary(item),
        "key": (x.key or b"").decode(errors="replace"),
        "headers": {k: v.decode(errors="replace") for k, v in x.headers},
        "value": value,
    }
    console.print(json.dumps(shown, indent=2), soft_wrap=True)
    return 0


@app.command("redrive")
def redrive_command(
    reason: Reason = None,
    consumer: Consumer = None,
    since: Since = None,
    max_: Max = None,
    rate: Rate = None,
    execute: Execute = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Publish dead letters to the topic they came from again, as a job.

    Dry run by default: counts what would be redriven and what quarantined (a record that
    already failed 3 redrives goes to the quarantine topic). Each dead letter is handled by
    one redrive only; a job stopped half-way continues with `govindex jobs resume ID`.

        govindex dlq redrive --reason unknown_source
        govindex dlq redrive --reason unknown_source --rate 50 --execute
    """
    from govindex.control.job_requests import RedriveJob

    settings = setup(state_dir, log_level)
    request = RedriveJob(
        kind="dlq-redrive", reason=reason, consumer=consumer, since=since, max=max_
    )
    return report(run_job(settings, request, execute=execute, rate=rate))
