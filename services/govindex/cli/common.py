"""What every command shares: the common options, settings, the Runtime, output helpers."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from govindex.core.logs import configure_logging
from govindex.core.paths import PatternError, check_patterns
from govindex.core.settings import DEFAULT_STATE_DIR, Settings
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

StateDir = Annotated[
    Path,
    typer.Option(
        "--state-dir",
        envvar="GOVINDEX_STATE_DIR",
        help="Where `govindex up` keeps Postgres data, logs and stack.json.",
        show_default=True,
    ),
]
LogLevel = Annotated[
    str, typer.Option("--log-level", help="Log level: DEBUG, INFO, WARNING, ERROR.")
]
SourceId = Annotated[str, typer.Option("--source", metavar="ID", help="Registered source id.")]
JsonLines = Annotated[bool, typer.Option("--json", help="Print JSON lines instead of a table.")]

DEFAULT_DIR = Path(os.environ.get("GOVINDEX_STATE_DIR", DEFAULT_STATE_DIR))


class Failure(Exception):
    """A command failed in a way the user can fix; the message says how."""


def setup(state_dir: Path, log_level: str, *, servers: bool = True) -> Settings:
    """Configure logs; settings from the environment, completed from stack.json."""
    configure_logging(level=log_level)
    settings = Settings(state_dir=state_dir)
    return settings.require_servers() if servers else settings


def with_runtime(settings: Settings, work: Callable[[Runtime], Awaitable[T]]) -> T:
    """Run `work` on a Runtime opened from settings, and close everything after."""

    async def run() -> T:
        async with Runtime(settings) as rt:
            return await work(rt)

    return asyncio.run(run())


def print_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    table = Table(*header, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for row in rows:
        table.add_row(*row)
    console.print(table)


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
