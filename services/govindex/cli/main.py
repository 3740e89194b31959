"""The `govindex` command line: one Typer app, one module per command group."""

from __future__ import annotations

import sys
from collections.abc import Callable

import typer

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
from govindex.cli.common import Failure, err
from govindex.core.errors import GovindexError

EPILOG = """\
Typical session (two terminals, same directory):

  govindex up                                 (terminal 1)\b
  govindex source apply manifests/*.yaml      (terminal 2)\b
  govindex ingest git ./handbook --source handbook\b
  govindex query "rollback" --tenant acme --principal group:sre\b
  govindex delete --source handbook --doc runbooks/old.md\b
  govindex documents --source handbook\b
  govindex status

Against production servers set GOVINDEX_PG_DSN, GOVINDEX_KAFKA_BOOTSTRAP, \
GOVINDEX_OPENSEARCH_URL and GOVINDEX_REDIS_URL; without them commands use the stack that \
`govindex up` recorded in STATE_DIR/stack.json.
"""

app = typer.Typer(
    name="govindex",
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
app.add_typer(sources.app, name="source")
app.add_typer(ingest.app, name="ingest")
app.add_typer(dlq.app, name="dlq")
app.add_typer(jobs.app, name="jobs")
app.add_typer(offsets.app, name="offsets")
app.add_typer(read.packs_app, name="packs")
COMMANDS: dict[str, Callable[..., int]] = {
    "reconcile": ingest.reconcile_command,
    "delete": ingest.delete_command,
    "backfill": ingest.backfill_command,
    "verify-purge": purge.verify_purge_command,
    "purge-status": purge.purge_status_command,
    "retention": purge.retention_command,
    "documents": inspect.documents_command,
    "status": inspect.status_command,
    "query": read.query_command,
    "pack": read.pack_command,
    "verify-pack": read.verify_pack_command,
    "relations": read.relations_command,
    "audit": audit.audit_command,
    "chunk": inspect.chunk_command,
    "reparse": index.reparse_command,
    "reindex": index.reindex_command,
    "replay": replay.replay_command,
    "reembed": index.reembed_command,
    "schemas": index.schemas_command,
}
for name, command in COMMANDS.items():
    app.command(name)(command)


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
