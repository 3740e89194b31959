"""`govindex source apply|disable|delete`: register and retire sources."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from govindex.adapters.postgres.pool import migrate
from govindex.cli.common import DEFAULT_DIR, LogLevel, StateDir, console, setup, with_runtime
from govindex.core.manifests import load_manifests
from govindex.runtime.composition import Runtime
from ingest.app import retire_source

app = typer.Typer(help="Register source manifests, or retire a source and purge it.")


@app.command("apply")
def apply(
    files: Annotated[list[Path], typer.Argument(metavar="FILE...", help="YAML manifests.")],
    check: Annotated[
        bool, typer.Option("--check", help="Validate only; register nothing.")
    ] = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Validate manifests and register (or update) them in Postgres.

    Every problem is reported with its file and field; nothing is registered unless all
    files are valid.

        govindex source apply manifests/*.yaml
    """
    manifests = load_manifests(files)
    if check:
        for m in manifests:
            console.print(f"ok  {m.source_id}  (tenant {m.tenant}, {m.source_type.value})")
        return 0
    settings = setup(state_dir, log_level)

    async def register(rt: Runtime) -> int:
        await migrate(rt.servers.pg_dsn)
        for m in manifests:
            outcome = await rt.registry.register(m)
            if outcome == "updated" and rt.cache is not None:
                # what the source allows may have narrowed: cached answers go
                await rt.cache.evict_source(m.tenant, m.source_id)
            state = "enabled" if m.enabled else "DISABLED"
            console.print(
                f"{outcome:8} {m.source_id}  (tenant {m.tenant}, {m.source_type.value}, "
                f"{m.deletion_mode.value}, {state})"
            )
        return 0

    return with_runtime(settings, register)


def _retire_command(reason: str, doc: str) -> Callable[..., int]:
    def retire(
        source_id: Annotated[str, typer.Argument(metavar="ID")],
        state_dir: StateDir = DEFAULT_DIR,
        log_level: LogLevel = "WARNING",
    ) -> int:
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
    """,
    )
)
app.command("delete")(
    _retire_command(
        "source_deleted",
        "Retire a source for good and purge every document of it (see `disable`).",
    )
)
