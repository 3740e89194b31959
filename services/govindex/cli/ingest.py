"""`govindex ingest git|path`, `reconcile`, `delete`: emit document events from a source."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from govindex.cli.common import (
    DEFAULT_DIR,
    LogLevel,
    SourceId,
    StateDir,
    check_globs,
    console,
    err,
    setup,
    with_runtime,
)
from govindex.cli.jobs import Execute, Rate, report, run_job
from govindex.control.job_requests import BackfillJob
from ingest.app import Filters, GitCheckout, delete_one, reconcile_source, sync_source
from ingest.handlers import IngestReport

app = typer.Typer(help="Emit document events from a local git repository or a folder.")


Include = Annotated[
    list[str] | None,
    typer.Option(
        "--include",
        metavar="GLOB",
        help="Files to ingest, .gitignore-style: '*.md' at any depth, 'docs/**', "
        "'!docs/old.md' (repeatable; default: the manifest's include, else every type "
        "govindex reads: Markdown, text, PDF, Office, HTML, notebooks, CSV, YAML, JSON, "
        "HCL and code).",
        show_default=False,
        callback=check_globs,
    ),
]
Exclude = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        metavar="GLOB",
        help="Files to leave out, .gitignore-style (repeatable).",
        show_default=False,
        callback=check_globs,
    ),
]


@contextmanager
def progress_bar(what: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on a terminal's stderr; nothing when output is piped."""
    if not err.is_terminal:
        yield lambda done, total: None
        return
    columns = (
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(what, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _report(label: str, source_id: str, report: IngestReport) -> None:
    console.print(
        f"ingested {label} into source {source_id}: {len(report.created)} created, "
        f"{len(report.updated)} updated, {len(report.deleted)} deleted, "
        f"{report.unchanged} unchanged, {len(report.skipped)} skipped"
    )
    for skipped in report.skipped:
        console.print(f"  skipped {skipped.doc_id}: {skipped.reason}")


@app.command("git")
def ingest_git_command(
    repo: Annotated[Path, typer.Argument(metavar="REPO", help="A local git repository.")],
    source: SourceId,
    rev: Annotated[str, typer.Option(help="Revision to ingest.")] = "HEAD",
    include: Include = None,
    exclude: Exclude = None,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Ingest a local git repository at a revision.

    Emits created / updated / deleted events for what changed in REPO at REV since the
    state last ingested for the source (the whole tree on the first run). source_version
    is `git:<sha>` of the commit that last changed each file; observed_at its commit time.

        govindex ingest git ./handbook --source handbook
        govindex ingest git ./handbook --source handbook --rev v2 --exclude 'drafts/*'
    """
    settings = setup(state_dir, log_level)
    filters = Filters(include or (), exclude or ())
    with progress_bar("emitting events") as progress:
        report, version = with_runtime(
            settings,
            lambda rt: sync_source(rt, source, GitCheckout(repo, rev), filters, progress),
        )
    _report(f"{repo} at {version.removeprefix('git:')[:12]}", source, report)
    return 0


@app.command("path")
def ingest_path_command(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A folder of documents.")],
    source: SourceId,
    include: Include = None,
    exclude: Exclude = None,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Ingest a plain folder (a file's version is the hash of its bytes).

    govindex ingest path ./notes --source notes
    """
    settings = setup(state_dir, log_level)
    filters = Filters(include or (), exclude or ())
    with progress_bar("emitting events") as progress:
        report, _ = with_runtime(
            settings, lambda rt: sync_source(rt, source, folder, filters, progress)
        )
    _report(str(folder), source, report)
    return 0


def reconcile_command(
    source: SourceId, state_dir: StateDir = DEFAULT_DIR, log_level: LogLevel = "WARNING"
) -> int:
    """Make the index equal to the source: a git branch head or a folder.

    For a git source, fetches its mirror and compares the tree at the branch head with what
    the index holds; for a folder source, compares the folder (the manifest's `folder.path`,
    else where `govindex ingest path` last read it). Emits the missing creates, updates and
    deletes, above every sequence the index applied. The backstop for a missed webhook, a
    lost event or a crash: a file deleted in the source never stays searchable.
    `govindex up` does this for every git and folder source at start.
    """
    settings = setup(state_dir, log_level)
    manifest, drift, report = with_runtime(settings, lambda rt: reconcile_source(rt, source))
    against = f"branch {manifest.git.branch}" if manifest.git else "its folder"
    console.print(
        f"reconciled {source} with {against}: "
        f"{len(drift.missing_or_stale)} missing or stale in the index, "
        f"{len(drift.only_in_index)} only in the index; emitted {len(report.created)} "
        f"created, {len(report.updated)} updated, {len(report.deleted)} deleted"
    )
    for doc_id in drift.missing_or_stale + drift.only_in_index:
        console.print(f"  {doc_id}")
    return 0


def delete_command(
    source: SourceId,
    doc: Annotated[str, typer.Option("--doc", metavar="DOC", help="Document id (its path).")],
    reason: Annotated[
        str, typer.Option(help="Why, kept in the tombstone.")
    ] = "deleted_by_operator",
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Emit a tombstone for one document.

    Emits document.deleted for DOC at its next sequence. The indexer records the tombstone
    (later or replayed updates with a lower sequence are dropped) and the purger removes
    the content according to the source's deletion_mode.

        govindex delete --source handbook --doc runbooks/old.md
    """
    settings = setup(state_dir, log_level)
    manifest, sequence = with_runtime(settings, lambda rt: delete_one(rt, source, doc, reason))
    console.print(
        f"tombstone emitted for {source}/{doc} at sequence {sequence} "
        f"(deletion_mode {manifest.deletion_mode.value}); "
        f"check with `govindex documents --source {source}`"
    )
    return 0


def backfill_command(
    source: SourceId,
    docs: Annotated[
        list[str] | None,
        typer.Option(
            "--docs",
            metavar="GLOB",
            callback=check_globs,
            help="Only documents matching GLOB (gitignore syntax); repeat for several.",
        ),
    ] = None,
    rate: Rate = None,
    execute: Execute = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Read a source again and re-emit every document, in resumable steps, as a job.

    Each step reserves its documents' sequences before it reads the source (a git source's
    branch head, a folder source's folder), so an update emitted meanwhile by a webhook or
    an ingest wins over the backfill's copy; a document the source no longer has is
    deleted. Dry run by default; `govindex jobs resume ID` continues a stopped one.

        govindex backfill --source handbook
        govindex backfill --source handbook --docs 'runbooks/**' --rate 50 --execute
    """
    settings = setup(state_dir, log_level)

    request = BackfillJob(kind="backfill", source=source, docs=list(docs or []))
    return report(run_job(settings, request, execute=execute, rate=rate))
