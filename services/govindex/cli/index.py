"""`govindex reparse`, `reindex`, `schemas`: rebuild what is derived from stored content."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress

from govindex.cli.common import (
    DEFAULT_DIR,
    Failure,
    LogLevel,
    StateDir,
    console,
    err,
    setup,
    with_runtime,
)
from govindex.core.schemas import MODELS, check_schemas, write_schemas
from govindex.runtime.bootstrap import rebuild_projection
from govindex.runtime.composition import Runtime
from indexer.app import reembed_chunks, reparse_documents
from indexer.reparse import ReparseReport
from ingest.app import registered
from reader.models import READ_MODELS

ALL_MODELS = {**MODELS, **READ_MODELS}


def reparse_command(
    source: Annotated[
        str | None, typer.Option("--source", metavar="ID", help="Only this source.")
    ] = None,
    parser: Annotated[
        str | None,
        typer.Option("--parser", metavar="NAME", help="Only versions cut by this parser."),
    ] = None,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Re-chunk stored content whose parser version changed.

    Re-chunks the stored raw content of current versions (no re-fetch from the source)
    whose parser or parser version differs from today's, and replaces their chunks in
    Postgres and OpenSearch. Access, validity and sequences are kept. Documents already cut
    by today's parser are skipped.

        govindex reparse --source handbook
        govindex reparse --parser markdown
    """
    settings = setup(state_dir, log_level)

    async def run(rt: Runtime) -> ReparseReport:
        if source:
            await registered(rt, source, enabled=False)
        if not err.is_terminal:
            return await reparse_documents(rt, source_id=source, parser_name=parser)
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task("reparsing", total=None)
            return await reparse_documents(
                rt,
                source_id=source,
                parser_name=parser,
                progress=lambda done, total, key: bar.update(task, completed=done, total=total),
            )

    report = with_runtime(settings, run)
    console.print(
        f"reparsed {len(report.reparsed)}, unchanged {report.unchanged}, changed "
        f"meanwhile {len(report.changed_meanwhile)}, failed {len(report.failed)}"
    )
    for key, reason in report.failed:
        console.print(f"  failed {key}: {reason}")
    return 1 if report.failed else 0


def reindex_command(state_dir: StateDir = DEFAULT_DIR, log_level: LogLevel = "WARNING") -> int:
    """Rebuild the OpenSearch projection from Postgres into a new generation.

    Copies every stored chunk into a new index generation, then switches the alias to it.
    Running workers keep stamping the generation they started with until restarted.
    """
    settings = setup(state_dir, log_level)

    async def run(rt: Runtime) -> tuple[int, int]:
        await rt.index.ensure_template()
        generation = await rebuild_projection(rt)
        return generation, await rt.index.count()

    generation, count = with_runtime(settings, run)
    console.print(
        f"rebuilt {settings.index_alias} as generation {generation}: {count} chunks. "
        "Running workers keep stamping the generation they started with until restarted."
    )
    return 0


def reembed_command(state_dir: StateDir = DEFAULT_DIR, log_level: LogLevel = "WARNING") -> int:
    """Embed stored chunks for the dense channel with today's model.

    Embeds, from the text Postgres holds, every chunk that has no vector of the configured
    model and version (after a model upgrade, or for chunks indexed before the dense
    channel existed). Resumable: each batch commits on its own; run it again after a crash.
    """
    settings = setup(state_dir, log_level)

    async def run(rt: Runtime) -> int:
        try:
            if not err.is_terminal:
                return await reembed_chunks(rt)
            with Progress(console=err, transient=True) as bar:
                task = bar.add_task("embedding", total=None)
                return await reembed_chunks(
                    rt, progress=lambda done, total: bar.update(task, completed=done, total=total)
                )
        except ValueError as exc:
            raise Failure(str(exc)) from None

    done = with_runtime(settings, run)
    console.print(f"embedded {done} chunk(s) with {settings.embedder}")
    return 0


def schemas_command(
    write: Annotated[bool, typer.Option("--write", help="Rewrite the schema files.")] = False,
    folder: Annotated[Path, typer.Option("--dir", help="Where the schemas live.")] = Path(
        "schemas"
    ),
) -> int:
    """Check (or rewrite) the JSON Schemas in schemas/ against the pydantic models.

    Covers every event payload, the source manifest and the read API's requests,
    responses and pack manifest.
    """
    if write:
        for path in write_schemas(folder, ALL_MODELS):
            console.print(f"wrote {path}")
        return 0
    drift = check_schemas(folder, ALL_MODELS)
    if drift:
        raise Failure(
            "schemas drifted from the models: "
            + ", ".join(drift)
            + "; run `govindex schemas --write` and commit the result"
        )
    console.print(f"schemas in {folder}/ match the models")
    return 0
