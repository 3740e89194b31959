"""What the Word, PowerPoint and Excel extractors share, so each format module holds only
its own structure: the Markdown writer counted against the text limit, escaped lines,
headings and pipe tables, list indentation, the table-cell count, and the checks that run
before a library opens a file.

Every file's zip directory is checked (`check_file`, through `open_zip`) before its library
inflates a byte, so a zip bomb is refused from what it claims, and a member that claims
less than it holds is cut by `zipfile` at the claimed size. Slides, sheets, cells and the
text are bounded by `Limits`; past a limit the file is refused, never cut short. What a
library cannot read is refused as `Unreadable` with its reason (`reading`).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from govindex.core.errors import PermanentError, TooLarge, Unreadable
from indexer.extractors.base import Limits, check_size, open_zip

# An OLE compound file: an encrypted (password-protected) Office file, or a legacy binary one.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
MAX_LEVEL = 8  # list levels 0..8, as Word and PowerPoint have


class Writer:
    """Blocks of Markdown separated by blank lines, counted as they come so a file is
    refused at the text limit instead of after building all of it."""

    def __init__(self, limits: Limits, what: str) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.limits = limits
        self.what = what

    def add(self, block: str) -> int:
        """Append a block; return the offset where it starts in the text."""
        if self.parts:
            self.parts.append("\n\n")
            self.size += 2
        start = self.size
        self.parts.append(block)
        self.size += len(block)
        if self.size > self.limits.max_text_chars:
            raise TooLarge(
                f"{self.what} extracts to over {self.size:,} characters, past the "
                f"{self.limits.max_text_chars:,} limit; split the file"
            )
        return start

    def text(self) -> str:
        return "".join(self.parts) + "\n" if self.parts else ""


# Line starts that Markdown would read as structure the file does not have: an ATX heading,
# a setext underline or thematic break, a fence, a block quote, HTML, a table row or a
# table's delimiter row, a link reference definition (which Markdown does not show).
_MISREAD = re.compile(
    r"(?:#{1,6}(?:[ \t]|$)|[=-]+[ \t]*$|[-_*](?:[ \t]*[-_*]){2,}[ \t]*$|`{3,}|~{3,}|[>|<]"
    r"|:?-+:?[ \t]*\||\[[^\]]*\]:)"
)
_CLOSING_HASHES = re.compile(r"(^|[ \t])(#+[ \t]*)$")
_PIPE = re.compile(r"(\\*)\|")
_NEWLINES = re.compile(r"[ \t]*(?:\r\n|\r|\n)[ \t]*")
_SPACES = re.compile(r"\s+")


def _line(line: str) -> str:
    """One line of running text, with a backslash before a start Markdown would misread
    (leading blanks dropped: in Markdown four of them make code)."""
    line = line.strip(" \t")
    return "\\" + line if _MISREAD.match(line) else line


def text_lines(text: str) -> list[str]:
    return [x for x in (_line(part) for part in _NEWLINES.split(text)) if x]


def atx_heading(level: int, text: str) -> str:
    """An ATX heading; trailing `#`s that would close it are escaped so they stay text."""
    title = _SPACES.sub(" ", text).strip()
    title = _CLOSING_HASHES.sub(lambda m: m.group(1) + "\\" + m.group(2), title)
    return "#" * max(1, min(level, 6)) + " " + title


def _cell(text: str) -> str:
    """A table cell on one line; a `|` is escaped (with the backslashes before it kept as
    backslashes) so it does not end the cell."""
    flat = _SPACES.sub(" ", text).strip()
    return _PIPE.sub(lambda m: m.group(1) * 2 + "\\|", flat)


def table(grid: Iterable[Sequence[str]], width: int) -> str:
    """A GFM pipe table: the first row is the header, every row `width` cells wide."""
    width = max(1, width)
    lines = []
    for n, row in enumerate(grid):
        cells = [_cell(c) for c in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            lines.append("|" + "|".join([" --- "] * width) + "|")
    return "\n".join(lines)


class Lists:
    """Indentation of list items: a nested item starts where its parent's text does."""

    def __init__(self) -> None:
        self.open: list[tuple[int, int]] = []  # (level, width of the marker and its space)

    def item(self, level: int, marker: str, text: str) -> str:
        while self.open and self.open[-1][0] >= level:
            self.open.pop()
        indent = sum(width for _, width in self.open)
        self.open.append((level, len(marker) + 1))
        lines = text_lines(text)
        pad = " " * (indent + len(marker) + 1)
        rest = "".join("\n" + pad + line for line in lines[1:])
        return " " * indent + marker + " " + lines[0] + rest

    def close(self) -> None:
        self.open.clear()


class Cells:
    """Table cells counted against `max_cells` across a file, as they are built."""

    def __init__(self, limits: Limits, what: str) -> None:
        self.count = 0
        self.limits = limits
        self.what = what

    def add(self, n: int) -> None:
        self.count += n
        if self.count > self.limits.max_cells:
            raise TooLarge(
                f"{self.what} holds over {self.count:,} table cells, past the "
                f"{self.limits.max_cells:,}-cell limit; split the file"
            )


def grid_text(grid: list[list[str]]) -> bool:
    return any(cell.strip() for row in grid for cell in row)


@contextmanager
def reading(what: str) -> Iterator[None]:
    """A library's own error on a file means the file is unreadable: say so, with the
    library's reason. Its warnings (unsupported extensions and the like) are not ours."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    except PermanentError:
        raise
    except Exception as exc:
        reason = exc.__class__.__name__ + (f": {str(exc)[:200]}" if str(exc) else "")
        raise Unreadable(
            f"{what} cannot be read ({reason}); check that it opens in its application and "
            "is saved in the format its name says"
        ) from None


def check_file(data: bytes, limits: Limits, what: str, saved_as: str) -> None:
    """Size and zip-bomb checks, before any library sees the bytes."""
    check_size(data, limits, what)
    if data.startswith(_OLE_MAGIC):
        raise Unreadable(
            f"{what} is an OLE compound file, not an Office Open XML zip: it is password-"
            f"protected, or a legacy binary file; save it unencrypted as {saved_as}"
        )
    open_zip(data, limits, what).close()


def as_int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
