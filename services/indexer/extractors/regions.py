"""Cutting extracted text whose regions need other parsers (pure).

A notebook is Markdown cells and code cells: the Markdown is cut by the Markdown parser
and each code cell by its language's parser, so a function in a cell is a `function`
chunk like one in a file; a workbook's sheets are cut by the CSV parser, and a slide's
chunks carry its speaker notes as context. Each region is parsed on its own and its
chunks are placed back at their offsets of the canonical text (spans, lines, ordinals,
parents), so every chunk is still the canonical text at its span. A piece's top-level
chunks other than sections hang under the section that precedes them, and take its
heading path when they have none.
"""

from __future__ import annotations

import re
from dataclasses import replace

from govindex.core.records import ChunkDraft, ChunkKind, Span
from indexer.extractors.base import Extracted, Region
from indexer.parsers import PARSERS, ParsedDocument, Parser, parse
from indexer.parsers.base import LineIndex
from indexer.parsers.tabular import CsvParser

# Parsers only a region names: a worksheet's first row is its header, known, not guessed.
REGION_PARSERS: dict[str, Parser] = {"csv:header": CsvParser(header=True)}


_ATX = re.compile(r"[ \t]{0,3}(#{1,6})(?:[ \t]|$)")


def cut(extracted: Extracted) -> ParsedDocument:
    """The chunks of the canonical text, each region by its own parser."""
    text = extracted.text
    if not extracted.regions:
        return parse(PARSERS[extracted.parser], text)
    lines = LineIndex(text)
    drafts: list[ChunkDraft] = []
    frontmatter: dict[str, object] = {}
    open_sections: list[tuple[int, int]] = []  # (level, ordinal) of the sections still open
    for index, region in enumerate(_pieces(extracted)):
        chosen = REGION_PARSERS.get(region.parser) or PARSERS[region.parser]
        parsed = parse(chosen, text[region.start : region.end])
        if index == 0 and region.start == 0:
            frontmatter = dict(parsed.frontmatter)
        base = len(drafts)
        line = lines.line_of(region.start) - 1
        own = region.parser == extracted.parser  # its sections are the document's
        enclosing: int | None = open_sections[-1][1] if open_sections else None
        for draft in parsed.chunks:
            parent, kind = draft.parent_ordinal, draft.kind
            if parent is not None:
                parent += base
            elif own and kind is ChunkKind.SECTION:
                # A heading after another piece nests under the sections still open above
                # it, as it would in the document read whole.
                level = _level(draft.text)
                while open_sections and open_sections[-1][0] >= level:
                    open_sections.pop()
                enclosing = open_sections[-1][1] if open_sections else None
                parent = enclosing
            else:
                parent = enclosing  # a top-level chunk under the section before its piece
                if kind is ChunkKind.PREAMBLE and enclosing is not None:
                    kind = ChunkKind.PARAGRAPH  # the section's text goes on after a region
            prefix = drafts[enclosing].heading_path if enclosing is not None else ()
            placed = replace(
                draft,
                ordinal=base + draft.ordinal,
                kind=kind,
                parent_ordinal=parent,
                heading_path=(*prefix, *draft.heading_path),
                span=Span(
                    region.start + draft.span.char_start,
                    region.start + draft.span.char_end,
                    line + draft.span.line_start,
                    line + draft.span.line_end,
                ),
                context=draft.context or region.context,
            )
            drafts.append(placed)
            if own and kind is ChunkKind.SECTION:
                open_sections.append((_level(draft.text), placed.ordinal))
    return ParsedDocument(frontmatter=frontmatter, body_start=0, chunks=drafts)


def _level(heading: str) -> int:
    """An ATX heading's level (a setext or other section counts as level 1)."""
    found = _ATX.match(heading)
    return len(found.group(1)) if found else 1


def _pieces(extracted: Extracted) -> list[Region]:
    """The regions, and the text between them for the extracted text's own parser (from
    its first character that is not blank, so its chunks begin on their own lines)."""
    text = extracted.text
    pieces: list[Region] = []
    at = 0
    for region in sorted(extracted.regions, key=lambda r: r.start):
        if region.start > at:
            pieces.append(
                Region(_skip_blank(text, at, region.start), region.start, extracted.parser)
            )
        pieces.append(region)
        at = region.end
    if at < len(text):
        pieces.append(Region(_skip_blank(text, at, len(text)), len(text), extracted.parser))
    return [p for p in pieces if text[p.start : p.end].strip()]


def _skip_blank(text: str, start: int, end: int) -> int:
    """Where the first line with text begins in [start, end)."""
    first = len(text[start:end]) - len(text[start:end].lstrip())
    newline = text.rfind("\n", start, start + first)
    return newline + 1 if newline >= 0 else start
