"""`govindex source init|apply|disable|delete`: describe, register and retire sources."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from govindex.cli import manifests
from govindex.cli.common import (
    DEFAULT_DIR,
    Failure,
    LogLevel,
    StateDir,
    argument,
    console,
    hint,
    setup,
    with_runtime,
)

if TYPE_CHECKING:
    from govindex.runtime.composition import Runtime

app = typer.Typer(
    help="Describe sources in manifests, register them, or retire a source and purge it.",
    no_args_is_help=True,
)


@app.command("init")
def init(
    file: Annotated[
        Path | None,
        argument(
            "[FILE]",
            "Where to write the manifest (default: print it); an existing file is kept "
            "unless --force.",
            kind=Path,
            show_default=False,
        ),
    ] = None,
    source_type: Annotated[
        str,
        typer.Option(
            "--type",
            metavar="TYPE",
            help="git (a repository: `govindex ingest git`), folder (`govindex ingest path`) "
            "or cdc (a table through Debezium).",
        ),
    ] = "git",
    source_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            metavar="SOURCE",
            help="The source id (default: FILE's name without .yaml, else by type: "
            "handbook, notes, runbooks-db).",
            show_default=False,
        ),
    ] = None,
    tenant: Annotated[
        str, typer.Option("--tenant", metavar="TENANT", help="The tenant it belongs to.")
    ] = "acme",
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists.")] = False,
) -> int:
    """Write a commented source manifest to start from (no server needed).

    Every required field is filled with a placeholder that `source apply --check` accepts;
    the comment of each line that needs a value of your own says CHANGE (a cdc source's
    table, for one, has no usable placeholder). Edit, check, then register it.

        govindex source init --type git --id handbook handbook.yaml
        govindex source init --type folder --id notes notes.yaml
        govindex source apply --check handbook.yaml
    """
    if source_type not in manifests.TYPES:
        raise typer.BadParameter(
            f"{source_type!r} is not one of {', '.join(manifests.TYPES)}", param_hint="--type"
        )
    to_stdout = file is None or str(file) == "-"
    stem = "" if file is None or to_stdout else file.name.removesuffix(".yaml").removesuffix(".yml")
    chosen = source_id or stem or manifests.DEFAULT_IDS[source_type]
    shown = "FILE" if file is None or to_stdout else str(file)
    text = manifests.template(source_type, chosen, tenant, shown)
    manifest = manifests.check_template(text)
    if file is None or to_stdout:
        sys.stdout.write(text)
        return 0
    if file.exists() and not force:
        raise Failure(f"{file} exists; keep it, choose another FILE, or pass --force")
    try:
        file.write_text(text)
    except OSError as exc:
        raise Failure(f"cannot write {file}: {exc.strerror or exc}") from None
    console.print(
        f"wrote {file}: a {manifest.source_type.value} source {manifest.source_id!r} of tenant "
        f"{manifest.tenant!r}. Edit the lines marked CHANGE, then run "
        f"`govindex source apply --check {file}` and `govindex source apply {file}`.",
        soft_wrap=True,
    )
    return 0


@app.command("apply")
def apply(
    files: Annotated[list[Path], argument("FILE...", "YAML manifests.", kind=Path)],
    check: Annotated[
        bool, typer.Option("--check", help="Validate only; register nothing (no server needed).")
    ] = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Validate manifests and register (or update) them in Postgres.

    Every problem is reported with its file and field; nothing is registered unless all
    files are valid. `govindex source init` writes a manifest to start from.

        govindex source apply --check handbook.yaml
        govindex source apply handbook.yaml notes.yaml
    """
    found = manifests.load(files)
    if check:
        for m in found:
            console.print(f"ok  {m.source_id}  (tenant {m.tenant}, {m.source_type.value})")
        return 0
    settings = setup(state_dir, log_level)

    async def register(rt: Runtime) -> list[str]:
        from govindex.adapters.postgres.pool import migrate

        await migrate(rt.servers.pg_dsn)
        created = []
        for m in found:
            outcome = await rt.registry.register(m)
            if outcome == "updated" and rt.cache is not None:
                # what the source allows may have narrowed: cached answers go
                await rt.cache.evict_source(m.tenant, m.source_id)
            state = "enabled" if m.enabled else "DISABLED"
            console.print(
                f"{outcome:8} {m.source_id}  (tenant {m.tenant}, {m.source_type.value}, "
                f"{m.deletion_mode.value}, {state})"
            )
            if outcome == "created" and m.source_type.value in NEXT:
                created.append(NEXT[m.source_type.value].format(source=m.source_id))
        return created

    for step in with_runtime(settings, register):
        hint(f"next: {step}")
    return 0


NEXT = {
    "git": "govindex ingest git REPO --source {source}",
    "folder": "govindex ingest path DIR --source {source}",
}


def _retire_command(reason: str, doc: str) -> Callable[..., int]:
    def retire(
        source_id: Annotated[str, argument("SOURCE", "A registered source id.")],
        state_dir: StateDir = DEFAULT_DIR,
        log_level: LogLevel = "WARNING",
    ) -> int:
        from ingest.app import retire_source

        settings = setup(state_dir, log_level)
        deleted = with_runtime(settings, lambda rt: retire_source(rt, source_id, reason))
        console.print(
            f"source {source_id} disabled; deletions emitted for {len(deleted)} "
            f"documents ({reason}). Follow with `govindex purge-status`."
        )
        return 0

    retire.__doc__ = doc
    return retire


app.command("disable")(
    _retire_command(
        "source_disabled",
        """Stop accepting a source's events and purge every document of it.

    Marks the source disabled and emits a deletion for every document the index holds for
    it. The purger removes their content from every sink whatever the source's
    deletion_mode, and writes a receipt per document.

        govindex source disable handbook
    """,
    )
)
app.command("delete")(
    _retire_command(
        "source_deleted",
        """Retire a source for good and purge every document of it (see `disable`).

    Marks the source disabled and emits a deletion for every document of it, like
    `disable`; the reason its tombstones keep is source_deleted.

        govindex source delete handbook
    """,
    )
)
