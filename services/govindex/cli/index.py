"""`govindex reparse`, `reindex`, `schemas`: rebuild what is derived from stored content."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

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
from govindex.cli.jobs import Execute, Rate, report, run_job

if TYPE_CHECKING:
    from pydantic import BaseModel

    from govindex.core.schemas import DocumentBuilder
    from govindex.runtime.composition import Runtime
    from indexer.reparse import ReparseReport


def schema_sources() -> tuple[dict[str, type[BaseModel]], dict[str, DocumentBuilder]]:
    """Every model with a schema file, and the APIs' OpenAPI documents, built from the same
    models (core cannot import the APIs)."""
    from govindex.control.admin import admin_openapi
    from govindex.core.schemas import MODELS
    from reader.models import READ_MODELS
    from reader.openapi import read_openapi

    documents: dict[str, DocumentBuilder] = {
        "openapi.read": read_openapi,
        "openapi.admin": admin_openapi,
    }
    return {**MODELS, **READ_MODELS}, documents


def __getattr__(name: str) -> object:
    """`ALL_MODELS` and `OPENAPI_DOCUMENTS`, built when first asked for (PEP 562)."""
    if name == "ALL_MODELS":
        return schema_sources()[0]
    if name == "OPENAPI_DOCUMENTS":
        return schema_sources()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def reparse_command(
    source: Annotated[
        str | None, typer.Option("--source", metavar="SOURCE", help="Only this source.")
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
    from rich.progress import Progress

    from indexer.app import reparse_documents
    from ingest.app import registered

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


def reindex_command(
    rate: Rate = None,
    no_switch: Annotated[
        bool,
        typer.Option(
            "--no-switch",
            help="Build and verify, but leave the alias where it is: the generation stays "
            "building (workers keep it current) until `govindex reindex --switch N`.",
        ),
    ] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Build nothing: compare a generation (the live one, or --generation) with "
            "Postgres chunk by chunk; with --execute, repair what differs.",
        ),
    ] = False,
    generation: Annotated[
        int | None,
        typer.Option("--generation", metavar="N", min=1, help="The generation --verify checks."),
    ] = None,
    switch: Annotated[
        int | None,
        typer.Option(
            "--switch",
            metavar="N",
            min=1,
            help="Build nothing: verify (and repair) building generation N, then point the "
            "alias at it.",
        ),
    ] = None,
    execute: Execute = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Rebuild the OpenSearch projection from Postgres into a new generation, as a job.

    Registers the next generation as building (from then on every worker writes to it as
    well as to the live one), copies every stored chunk with a checkpoint (at --rate chunks
    per second), verifies it against Postgres chunk by chunk (sequence and content hash),
    repairs what a concurrent change left different, and only then switches the alias,
    atomically. Dry run unless --execute; `govindex jobs resume ID` continues a stopped one;
    `govindex jobs cancel ID` abandons it (its generation is dropped).

        govindex reindex --execute
        govindex reindex --rate 2000 --no-switch --execute
        govindex reindex --verify
    """
    if sum((verify, switch is not None, no_switch)) > 1:
        raise typer.BadParameter("use one of --verify, --switch N and --no-switch")
    if generation is not None and not verify:
        raise typer.BadParameter("--generation goes with --verify", param_hint="--generation")
    from govindex.control.job_requests import ReindexJob

    settings = setup(state_dir, log_level)
    if verify:
        request = ReindexJob(kind="reindex", mode="verify", generation=generation)
    elif switch is not None:
        request = ReindexJob(kind="reindex", mode="switch", generation=switch)
    else:
        request = ReindexJob(kind="reindex", switch=not no_switch)
    job = run_job(settings, request, execute=execute, rate=rate)
    code = report(job)
    built = job.checkpoint.get("generation")
    if request.mode == "build" and built and no_switch and job.state.value == "succeeded":
        console.print(
            f"generation {built} is built and kept current; switch to it with "
            f"`govindex reindex --switch {built} --execute`"
        )
    return code


def reembed_command(
    rate: Rate = None,
    no_switch: Annotated[
        bool,
        typer.Option(
            "--no-switch",
            help="Build the model's generation but keep the live one answering reads until "
            "a later `govindex reembed --execute` switches.",
        ),
    ] = False,
    execute: Execute = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Build the dense channel's vectors for a model beside the live ones, as a job.

    The model is GOVINDEX_EMBEDDER_NEXT while a change of model is under way, else
    GOVINDEX_EMBEDDER. Registers its generation (workers then embed new chunks with it as
    well), embeds from the text Postgres holds every chunk lacking its vector (at --rate
    chunks per second, with a checkpoint), and when none is missing makes it live in one
    commit: reads never rank by two models. Dry run unless --execute; `govindex jobs
    resume ID` continues a stopped one.

        govindex reembed                         # how many chunks lack the model's vector
        GOVINDEX_EMBEDDER_NEXT=model2vec:/models/m2v govindex reembed --rate 500 --execute
    """
    from govindex.control.job_requests import ReembedJob

    settings = setup(state_dir, log_level)
    job = run_job(
        settings, ReembedJob(kind="reembed", switch=not no_switch), execute=execute, rate=rate
    )
    return report(job)


def schemas_command(
    write: Annotated[bool, typer.Option("--write", help="Rewrite the schema files.")] = False,
    folder: Annotated[
        Path, typer.Option("--dir", metavar="DIR", help="Where the schemas live.")
    ] = Path("schemas"),
) -> int:
    """Check (or rewrite) the JSON Schemas in schemas/ against the pydantic models.

    Covers every event payload, the source manifest, the read API's requests,
    responses and pack manifest, and the read and admin APIs' OpenAPI documents. Run it
    from the repository's root.

        govindex schemas
        govindex schemas --write
    """
    from govindex.core.schemas import (
        check_documents,
        check_schemas,
        write_documents,
        write_schemas,
    )

    models, documents = schema_sources()
    if write:
        written = write_schemas(folder, models)
        for path in written + write_documents(folder, documents):
            console.print(f"wrote {path}")
        return 0
    drift = check_schemas(folder, models) + check_documents(folder, documents)
    if drift:
        raise Failure(
            "schemas drifted from the models: "
            + ", ".join(drift)
            + "; run `govindex schemas --write` and commit the result"
        )
    console.print(f"schemas in {folder}/ match the models")
    return 0
