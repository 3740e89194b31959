"""What every command shares: the common options, settings, the Runtime, output helpers.

Nothing here (nor at the top of any command module) imports a driver, a service or the
composition root: `govindex --help` builds every command from its signature and docstring,
and a command imports what it runs when it runs (docs/reference/cli.md).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from govindex.core.paths import PatternError, check_patterns

if TYPE_CHECKING:
    from govindex.core.settings import Settings
    from govindex.runtime.composition import Runtime

T = TypeVar("T")

# Piped output is read by scripts and tests: never wrap or colour it.
console = Console(
    width=None if sys.stdout.isatty() else 400,
    no_color=not sys.stdout.isatty(),
    highlight=False,
    markup=False,
)
err = Console(stderr=True, highlight=False, markup=False)

# `govindex --help` groups its commands in these panels, in this order.
GETTING_STARTED = "Getting started"
SOURCES = "Sources & ingest"
SEARCH = "Search & packs"
INSPECTION = "Inspection"
JOBS = "Jobs"
OPERATIONS = "Operations"
# Every command's --state-dir and --log-level, apart from its own options.
COMMON_OPTIONS = "Common options"


def plain(metavar: str, kind: type = str) -> Any:
    """A parameter type that shows only its metavar in help (`FILE`, not `FILE <path>` or
    `<str>`); the annotation still converts the value (a Path stays a Path).

    Built from the type of whichever click this Typer uses (it vendors its own)."""
    base = type(
        typer.main.get_click_type(annotation=kind, parameter_info=typer.models.ArgumentInfo())
    )

    def get_metavar(self: Any, *args: Any, **kwargs: Any) -> str:
        return ""

    return type(f"Plain{base.__name__}", (base,), {"get_metavar": get_metavar})()


def argument(metavar: str, help: str, *, kind: type = str, **more: Any) -> Any:
    """A positional argument shown as METAVAR, with no type beside it."""
    return typer.Argument(metavar=metavar, click_type=plain(metavar, kind), help=help, **more)


# Values of the core that option defaults and help texts name. Importing them would cost
# every `--help` the pydantic models around them (a second and more), so they are repeated
# here; tests/unit/test_cli_first_hour.py keeps each equal to its source.
DEFAULT_STATE_DIR = Path(".govindex")  # govindex.core.settings.DEFAULT_STATE_DIR
CHANNELS = ("bm25", "fulltext", "structured", "graph", "dense")  # reader.models.CHANNELS
AUDIT_ENDPOINTS = (  # govindex.core.ports.AUDIT_ENDPOINTS
    "search",
    "pack",
    "chunk",
    "verify",
    "lineage",
    "stored_pack",
    "relations",
)
AUDIT_LIST_MAX = 1000  # govindex.core.ports.AUDIT_LIST_MAX
EVENT_KINDS = ("created", "updated", "deleted")  # govindex.core.replays.TYPES
MAX_REDRIVES = 3  # govindex.core.deadletters.MAX_REDRIVES

StateDir = Annotated[
    Path,
    typer.Option(
        "--state-dir",
        metavar="DIR",
        envvar="GOVINDEX_STATE_DIR",
        help="Where `govindex up` keeps Postgres data, logs and stack.json.",
        show_default=True,
        rich_help_panel=COMMON_OPTIONS,
    ),
]
LogLevel = Annotated[
    str,
    typer.Option(
        "--log-level",
        metavar="LEVEL",
        help="Log level: DEBUG, INFO, WARNING, ERROR. Libraries log at WARNING unless DEBUG.",
        rich_help_panel=COMMON_OPTIONS,
    ),
]
SourceId = Annotated[str, typer.Option("--source", metavar="SOURCE", help="Registered source id.")]
JsonLines = Annotated[bool, typer.Option("--json", help="Print JSON lines instead of a table.")]

DEFAULT_DIR = Path(os.environ.get("GOVINDEX_STATE_DIR", DEFAULT_STATE_DIR))


class Failure(Exception):
    """A command failed in a way the user can fix; the message says how."""


def setup(state_dir: Path, log_level: str, *, servers: bool = True) -> Settings:
    """Configure logs; settings from the environment, completed from stack.json."""
    from govindex.core.logs import configure_logging
    from govindex.core.settings import Settings

    configure_logging(level=log_level)
    settings = Settings(state_dir=state_dir)
    return settings.require_servers() if servers else settings


def with_runtime(settings: Settings, work: Callable[[Runtime], Awaitable[T]]) -> T:
    """Run `work` on a Runtime opened from settings, and close everything after."""
    from govindex.runtime.composition import Runtime

    async def run() -> T:
        async with Runtime(settings) as rt:
            return await work(rt)

    return asyncio.run(run())


def print_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    table = Table(*header, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def hint(text: str) -> None:
    """A hint for a person, on stderr: stdout stays what scripts read."""
    err.print(f"hint: {text}", soft_wrap=True)


def when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else ""


def short_version(version: str) -> str:
    if version.startswith("git:"):
        return version[:16]
    if version.startswith("sha256:"):
        return version[:19]
    return version[:40]


def check_globs(value: list[str] | None) -> list[str] | None:
    """An option's gitignore patterns, refused with the reason when one is invalid."""
    try:
        return check_patterns(value) if value else value
    except PatternError as exc:
        raise typer.BadParameter(str(exc)) from exc


def aware_datetime(value: str) -> datetime:
    """Parse an ISO 8601 time that names its zone (naive times are ambiguous: refused)."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not ISO 8601; use e.g. 2025-03-01T00:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        raise typer.BadParameter(f"{value!r} has no time zone; add Z or +00:00")
    return parsed
