"""Markdown as the walk writes it: lines of page text escaped so that they stay text, and
blocks prefixed by the list items and quotes they sit in, counted against the text limit
as they are written. `escape_line` serves the notebook extractor's text too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from govindex.core.errors import TooLarge
from indexer.extractors.base import Limits
from indexer.extractors.html.common import WHAT

# Line starts that Markdown would read as structure in what is plain text in the page.
_ATX = re.compile(r"#{1,6}(?:[ \t]|$)")
_BULLET = re.compile(r"[-+*](?:[ \t]|$)")
_ORDERED = re.compile(r"(\d{1,9})([.)])(?:[ \t]|$)")
_FENCE = re.compile(r"(?:`{3,}|~{3,})")
_UNDERLINE = re.compile(r"(?:=+|-+)[ \t]*$")
_BREAK = re.compile(r"(?:(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_HTML_START = re.compile(r"<[A-Za-z/!?]")
_DELIMITER_ROW = re.compile(r"\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")


def escape_line(line: str) -> str:
    """A line of plain text as Markdown that reads it as that text, not as structure: a
    leading `#`, `>`, list marker, fence, setext underline, thematic break, HTML tag or
    table delimiter row gets a backslash. Clause numbers (`4.1.2`, `§ 4`, `(a)`) are not
    Markdown structure and stay as written."""
    if not line:
        return line
    head = line[0]
    if head == "#" and _ATX.match(line):
        return "\\" + line
    if head == ">":
        return "\\" + line
    if head in "-+*" and _BULLET.match(line):
        return "\\" + line
    if head.isdigit() and (number := _ORDERED.match(line)):
        return line[: number.end(1)] + "\\" + line[number.end(1) :]
    if head in "`~" and _FENCE.match(line):
        return "\\" + line
    if head in "=-" and _UNDERLINE.match(line):
        return "\\" + line
    if head in "*_" and _BREAK.match(line):
        return "\\" + line
    if head == "<" and _HTML_START.match(line):
        return "\\" + line
    if head in "|:-" and "-" in line and _DELIMITER_ROW.match(line):
        return "\\" + line
    return line


@dataclass(slots=True)
class _Frame:
    """A container open in the output: a list item (`first` is its marker) or a quote."""

    first: str
    rest: str
    tight: bool = False  # a list item after its sibling: no blank line before it
    fresh: bool = True  # its first line is still to come
    emitted: bool = False  # it holds a block already


class Output:
    """Lines of Markdown, counted as they are written so that a page past the text limit
    is refused before its text is built."""

    def __init__(self, limits: Limits) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.limit = limits.max_text_chars
        self.frames: list[_Frame] = []
        self.emitted = False

    def need(self, chars: int) -> None:
        if self.size + chars > self.limit:
            raise TooLarge(
                f"{WHAT} extracts to more than {self.limit:,} characters, over the "
                "max_text_chars limit; split the page"
            )

    def _write(self, line: str) -> None:
        self.need(len(line) + 1)
        self.size += len(line) + 1
        self.lines.append(line)

    def _separated(self) -> bool:
        for frame in reversed(self.frames):
            if frame.emitted:
                return True
            if frame.tight:
                return False
        return self.emitted

    def block(self, lines: Iterable[str]) -> None:
        """One block (its lines without prefixes), a blank line before it unless it opens
        its container or is a list item following its sibling."""
        if self._separated():
            self._write("".join(f.rest for f in self.frames if not f.fresh).rstrip())
        for line in lines:
            prefix = "".join(f.first if f.fresh else f.rest for f in self.frames)
            for frame in self.frames:
                frame.fresh = False
            self._write(prefix + line if line else prefix.rstrip())
        for frame in self.frames:
            frame.emitted = True
        self.emitted = True

    def open(self, first: str, rest: str, tight: bool = False) -> None:
        self.frames.append(_Frame(first, rest, tight))

    def close(self) -> None:
        self.frames.pop()

    def text(self) -> str:
        return "\n".join(self.lines) + "\n" if self.lines else ""
