"""`govindex ingest git|path`, `reconcile`, `delete`: emit document events from a source."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from govindex.cli.common import (
    DEFAULT_DIR,
    Failure,
    LogLevel,
    SourceId,
    StateDir,
    argument,
    check_globs,
    console,
    err,
    setup,
    with_runtime,
)
from govindex.cli.jobs import Execute, Rate, report, run_job

if TYPE_CHECKING:
    from govindex.core.records import SourceManifest
    from govindex.runtime.composition import Runtime
    from ingest.handlers import IngestReport

app = typer.Typer(
    help="Emit document events from a local git repository or a folder.", no_args_is_help=True
)


Include = Annotated[
    list[str] | None,
    typer.Option(
        "--include",
        metavar="PATTERN",
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
        metavar="PATTERN",
        help="Files to leave out, .gitignore-style (repeatable).",
        show_default=False,
        callback=check_globs,
    ),
]


@contextmanager
def progress_bar(what: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on a terminal's stderr; nothing when output is piped."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

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


def _ingested_as(manifest: SourceManifest, command: str) -> None:
    """Refuse a source whose manifest says it is read another way, naming that way."""
    kind = manifest.source_type.value
    if kind == command:
        return
    source = manifest.source_id
    how = {
        "git": f"`govindex ingest git REPO --source {source}`",
        "folder": f"`govindex ingest path DIR --source {source}`",
        "cdc": "Debezium change events of its table (docs/sources/debezium.md), not by "
        "`govindex ingest`",
    }[kind]
    wrong = "ingest git" if command == "git" else "ingest path"
    raise Failure(
        f"source {source!r} is a {kind} source (source_type: {kind} in its manifest), so "
        f"`govindex {wrong}` does not read it: it is read with {how}"
    )


@app.command("git")
def ingest_git_command(
    repo: Annotated[Path, argument("REPO", "A local git repository.", kind=Path)],
    source: SourceId,
    rev: Annotated[
        str,
        typer.Option("--rev", metavar="REV", help="Revision to ingest: a commit, tag or branch."),
    ] = "HEAD",
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
        govindex ingest git ./handbook --source handbook --rev HEAD~1 --exclude 'drafts/*'
    """
    from ingest.app import Filters, GitCheckout, registered, sync_source

    settings = setup(state_dir, log_level)
    filters = Filters(include or (), exclude or ())

    async def run(rt: Runtime) -> tuple[IngestReport, str]:
        _ingested_as(await registered(rt, source), "git")
        return await sync_source(rt, source, GitCheckout(repo, rev), filters, progress)

    with progress_bar("emitting events") as progress:
        report, version = with_runtime(settings, run)
    _report(f"{repo} at {version.removeprefix('git:')[:12]}", source, report)
    return 0


@app.command("path")
def ingest_path_command(
    folder: Annotated[Path, argument("DIR", "A folder of documents.", kind=Path)],
    source: SourceId,
    include: Include = None,
    exclude: Exclude = None,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Ingest a plain folder (a file's version is the hash of its bytes).

    Emits created / updated / deleted events for what changed in DIR since it was last
    ingested for the source (every file on the first run), and records DIR as the source's
    folder for `govindex reconcile`. The source must be a folder source.

        govindex ingest path ./notes --source notes
        govindex ingest path ./notes --source notes --include '*.md' --exclude 'drafts/'
    """
    from ingest.app import Filters, registered, sync_source

    settings = setup(state_dir, log_level)
    filters = Filters(include or (), exclude or ())

    async def run(rt: Runtime) -> tuple[IngestReport, str]:
        _ingested_as(await registered(rt, source), "folder")
        return await sync_source(rt, source, folder, filters, progress)

    with progress_bar("emitting events") as progress:
        report, _ = with_runtime(settings, run)
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

        govindex reconcile --source handbook
    """
    from ingest.app import reconcile_source

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
        str, typer.Option(metavar="TEXT", help="Why, kept in the tombstone.")
    ] = "deleted_by_operator",
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Emit the tombstone even when the index and the connector hold no such "
            "document (e.g. to delete ahead of an event still in flight).",
        ),
    ] = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Emit a tombstone for one document.

    Emits document.deleted for DOC at its next sequence and publishes it at once (should
    the broker be away, a worker's outbox relay publishes it). The indexer records the
    tombstone (later or replayed updates with a lower sequence are dropped) and the purger
    removes the content according to the source's deletion_mode. A document neither the
    index nor the source's connector ever held is refused (a typo would otherwise leave a
    tombstone and a purge receipt for nothing), unless --force.

        govindex delete --source handbook --doc runbooks/cache-flush.md
        govindex delete --source handbook --doc runbooks/cache-flush.md --reason retired
    """
    from ingest.app import delete_one, registered

    settings = setup(state_dir, log_level)

    async def run(rt: Runtime) -> tuple[SourceManifest, int]:
        manifest = await registered(rt, source)
        if not force:
            await _held(rt, manifest, doc)
        return await delete_one(rt, source, doc, reason)

    manifest, sequence = with_runtime(settings, run)
    console.print(
        f"tombstone emitted for {source}/{doc} at sequence {sequence} "
        f"(deletion_mode {manifest.deletion_mode.value}); "
        f"check with `govindex documents --source {source}`"
    )
    return 0


async def _held(rt: Runtime, manifest: SourceManifest, doc: str) -> None:
    """Refuse a document that the index (in any state) and the connector never held; one
    row looked up, whatever the source's size (the lists only to say what was meant)."""
    if await rt.registry.document_sequence(manifest.tenant, manifest.source_id, doc) is not None:
        return
    known = await rt.ingest_state.known(manifest.tenant, manifest.source_id)
    if doc in known:
        return
    _, sequences = await rt.registry.index_state(manifest.source_id)
    close = difflib.get_close_matches(doc, [*sequences, *known], n=3)
    source = manifest.source_id
    raise Failure(
        f"source {source!r} holds no document {doc!r}: neither the index nor the connector "
        "ever saw it, so nothing was emitted."
        + (f" Did you mean {', '.join(close)}?" if close else "")
        + f" `govindex documents --source {source}` lists its documents; --force emits the "
        "tombstone anyway."
    )


def backfill_command(
    source: SourceId,
    docs: Annotated[
        list[str] | None,
        typer.Option(
            "--docs",
            metavar="PATTERN",
            callback=check_globs,
            help="Only documents matching PATTERN (gitignore syntax); repeat for several.",
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
    from govindex.control.job_requests import BackfillJob

    settings = setup(state_dir, log_level)

    request = BackfillJob(kind="backfill", source=source, docs=list(docs or []))
    return report(run_job(settings, request, execute=execute, rate=rate))
