"""The `govindex` command line: one Typer app, one module per command group.

Building the app imports no driver: every command module imports what it runs inside the
command (tests/unit/test_cli_first_hour.py checks `govindex --help` stays that light).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from govindex import __version__
from govindex.cli import (
    audit,
    dlq,
    index,
    ingest,
    inspect,
    jobs,
    offsets,
    purge,
    read,
    replay,
    sources,
    stack,
)
from govindex.cli.common import (
    GETTING_STARTED,
    INSPECTION,
    JOBS,
    OPERATIONS,
    SEARCH,
    SOURCES,
    Failure,
    err,
)
from govindex.core.errors import GovindexError

# Indented: a code block, one command a line, as typed (the markdown help never reflows it).
EPILOG = """\
Typical session, two terminals in the same directory; `./handbook` is a git repository of \
Markdown files (`examples/make-handbook-repo.sh handbook`, in a clone of govindex, makes one):

    # terminal 1: the embedded stack and its workers, until Ctrl-C
    govindex up
    # terminal 2
    govindex source init --type git --id handbook handbook.yaml
    govindex source apply handbook.yaml
    govindex ingest git ./handbook --source handbook
    govindex query failover --tenant acme --principal group:eng \\
        --purpose support
    govindex delete --source handbook --doc runbooks/cache-flush.md
    govindex documents --source handbook
    govindex status

Against production servers set GOVINDEX_PG_DSN, GOVINDEX_KAFKA_BOOTSTRAP, \
GOVINDEX_OPENSEARCH_URL and GOVINDEX_REDIS_URL; without them commands use the stack that \
`govindex up` recorded in STATE_DIR/stack.json.
"""

# The order of `govindex --help`: by panel (common.py), the first-hour commands first.
ORDER = (
    # Getting started
    "demo",
    "up",
    "status",
    # Sources & ingest
    "source",
    "ingest",
    "reconcile",
    "delete",
    "backfill",
    # Search & packs
    "query",
    "pack",
    "verify-pack",
    "packs",
    "relations",
    # Inspection
    "documents",
    "chunk",
    "audit",
    "verify-purge",
    "purge-status",
    # Jobs
    "jobs",
    "replay",
    "reindex",
    "reembed",
    "dlq",
    "offsets",
    # Operations
    "worker",
    "bootstrap",
    "retention",
    "reparse",
    "schemas",
)


class _Ordered(TyperGroup):
    """Commands listed in ORDER (any other after them): panels appear in order too."""

    def list_commands(self, ctx: Any) -> list[str]:
        known = [name for name in ORDER if name in self.commands]
        return known + [name for name in self.commands if name not in ORDER]


app = typer.Typer(
    name="govindex",
    cls=_Ordered,
    help="Governed ingestion and indexing for retrieval systems: every chunk is stamped with "
    "source version, content hash, valid time, ACL and parser version; deletions reach "
    "every copy.",
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"govindex {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """Governed ingestion and indexing for retrieval systems."""


app.registered_commands += stack.app.registered_commands  # up, worker, bootstrap, demo
GROUPS: dict[str, tuple[typer.Typer, str]] = {
    "source": (sources.app, SOURCES),
    "ingest": (ingest.app, SOURCES),
    "packs": (read.packs_app, SEARCH),
    "jobs": (jobs.app, JOBS),
    "dlq": (dlq.app, JOBS),
    "offsets": (offsets.app, JOBS),
}
for name, (group, panel) in GROUPS.items():
    app.add_typer(group, name=name, rich_help_panel=panel)
COMMANDS: dict[str, tuple[Callable[..., int], str]] = {
    "reconcile": (ingest.reconcile_command, SOURCES),
    "delete": (ingest.delete_command, SOURCES),
    "backfill": (ingest.backfill_command, SOURCES),
    "query": (read.query_command, SEARCH),
    "pack": (read.pack_command, SEARCH),
    "verify-pack": (read.verify_pack_command, SEARCH),
    "relations": (read.relations_command, SEARCH),
    "status": (inspect.status_command, GETTING_STARTED),
    "documents": (inspect.documents_command, INSPECTION),
    "chunk": (inspect.chunk_command, INSPECTION),
    "audit": (audit.audit_command, INSPECTION),
    "verify-purge": (purge.verify_purge_command, INSPECTION),
    "purge-status": (purge.purge_status_command, INSPECTION),
    "replay": (replay.replay_command, JOBS),
    "reindex": (index.reindex_command, JOBS),
    "reembed": (index.reembed_command, JOBS),
    "retention": (purge.retention_command, OPERATIONS),
    "reparse": (index.reparse_command, OPERATIONS),
    "schemas": (index.schemas_command, OPERATIONS),
}
for name, (command, panel) in COMMANDS.items():
    app.command(name, rich_help_panel=panel)(command)


def main(argv: list[str] | None = None) -> int:
    """Run a command; errors a user can fix print one line and exit 1 (usage errors 2)."""
    try:
        result = app(args=argv, prog_name="govindex", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except typer.TyperException as exc:  # usage errors: what was wrong and the usage line
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err.print(f"govindex: {exc}")
        return int(getattr(exc, "exit_code", 2))
    except (typer.Abort, KeyboardInterrupt):
        return 130
    except (Failure, GovindexError) as exc:
        err.print(f"govindex: {exc}", soft_wrap=True)
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
