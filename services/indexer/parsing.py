"""Parsers turn a document's text into chunk drafts at exact spans (pure, no I/O)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml

from govindex.errors import InvalidEvent
from govindex.records import ChunkDraft, ChunkKind, Span, slugify


@dataclass(frozen=True)
class ParsedDocument:
    """Frontmatter metadata plus the chunk drafts of the body."""

    frontmatter: Mapping[str, Any]
    body_start: int
    chunks: list[ChunkDraft] = field(default_factory=list)


class Parser(Protocol):
    name: str
    version: str

    def parse(self, text: str) -> ParsedDocument: ...


_FRONTMATTER_OPEN = re.compile(r"\A---[ \t]*\r?\n")
_FRONTMATTER_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def split_frontmatter(text: str) -> tuple[dict[str, Any], int]:
    """Return the YAML frontmatter as a dict and the offset where the body starts."""
    opening = _FRONTMATTER_OPEN.match(text)
    if opening is None:
        return {}, 0
    closing = _FRONTMATTER_CLOSE.search(text, opening.end())
    if closing is None:
        return {}, 0
    raw = text[opening.end() : closing.start()]
    try:
        data = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        raise InvalidEvent(
            f"the YAML frontmatter does not parse ({exc.__class__.__name__}): fix the block "
            "between the leading '---' lines"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidEvent("the frontmatter must be a YAML mapping (key: value lines)")
    return data, closing.end()


class LineIndex:
    """Maps character offsets to 1-based line numbers in O(log n)."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)


class MarkdownParser:
    """Cuts Markdown by heading hierarchy: one chunk per heading section.

    A section runs from its heading line to the next heading of any level, so the chunks of
    a document cover its body exactly; text before the first heading is a preamble chunk.
    Headings inside fenced code blocks are text, not structure.
    """

    name = "markdown"
    version = "1.0.0"

    def parse(self, text: str) -> ParsedDocument:
        frontmatter, body_start = split_frontmatter(text)
        lines = LineIndex(text)
        headings = list(self._headings(text, body_start))
        drafts: list[ChunkDraft] = []
        stack: list[tuple[int, str, int]] = []  # (level, title, ordinal)
        seen_anchors: dict[str, int] = {}

        def span(start: int, end: int) -> Span:
            return Span(
                char_start=start,
                char_end=end,
                line_start=lines.line_of(start),
                line_end=lines.line_of(max(start, end - 1)),
            )

        first = headings[0][0] if headings else len(text)
        if text[body_start:first].strip():
            drafts.append(
                ChunkDraft(
                    ordinal=0,
                    kind=ChunkKind.PREAMBLE,
                    text=text[body_start:first],
                    span=span(body_start, first),
                    heading_path=(),
                    anchor="",
                )
            )
        for index, (start, level, title) in enumerate(headings):
            end = headings[index + 1][0] if index + 1 < len(headings) else len(text)
            while stack and stack[-1][0] >= level:
                stack.pop()
            parent = stack[-1][2] if stack else None
            ordinal = len(drafts)
            stack.append((level, title, ordinal))
            anchor = slugify(title)
            count = seen_anchors.get(anchor, 0)
            seen_anchors[anchor] = count + 1
            if count:
                anchor = f"{anchor}-{count}"
            drafts.append(
                ChunkDraft(
                    ordinal=ordinal,
                    kind=ChunkKind.SECTION,
                    text=text[start:end],
                    span=span(start, end),
                    heading_path=tuple(t for _, t, _ in stack),
                    anchor=anchor,
                    parent_ordinal=parent,
                )
            )
        return ParsedDocument(frontmatter=frontmatter, body_start=body_start, chunks=drafts)

    @staticmethod
    def _headings(text: str, body_start: int) -> list[tuple[int, int, str]]:
        found: list[tuple[int, int, str]] = []
        fence: str | None = None
        offset = body_start
        for line in text[body_start:].splitlines(keepends=True):
            stripped = line.rstrip("\r\n")
            fence_match = _FENCE.match(stripped)
            if fence_match:
                marker = fence_match.group(1)
                if fence is None:
                    fence = marker
                elif marker[0] == fence[0] and len(marker) >= len(fence):
                    fence = None
            elif fence is None:
                heading = _HEADING.match(stripped)
                if heading:
                    found.append((offset, len(heading.group(1)), (heading.group(2) or "").strip()))
            offset += len(line)
        return found


PARSERS: dict[str, Parser] = {MarkdownParser.name: MarkdownParser()}


def parser_for(name: str) -> Parser:
    try:
        return PARSERS[name]
    except KeyError:
        raise InvalidEvent(
            f"the manifest names parser {name!r}, which this indexer does not have; "
            f"known parsers: {', '.join(sorted(PARSERS))}"
        ) from None
