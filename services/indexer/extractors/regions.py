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

from dataclasses import replace

from govindex.core.records import ChunkDraft, ChunkKind, Span
from indexer.extractors.base import Extracted, Region
from indexer.parsers import PARSERS, ParsedDocument, Parser, parse
from indexer.parsers.base import LineIndex
from indexer.parsers.tabular import CsvParser

# Parsers only a region names: a worksheet's first row is its header, known, not guessed.
REGION_PARSERS: dict[str, Parser] = {"csv:header": CsvParser(header=True)}


def cut(extracted: Extracted) -> ParsedDocument:
    """The chunks of the canonical text, each region by its own parser."""
    text = extracted.text
    if not extracted.regions:
        return parse(PARSERS[extracted.parser], text)
    lines = LineIndex(text)
    drafts: list[ChunkDraft] = []
    frontmatter: dict[str, object] = {}
    section: int | None = None
    for index, region in enumerate(_pieces(extracted)):
        chosen = REGION_PARSERS.get(region.parser) or PARSERS[region.parser]
        parsed = parse(chosen, text[region.start : region.end])
        if index == 0 and region.start == 0:
            frontmatter = dict(parsed.frontmatter)
        base = len(drafts)
        line = lines.line_of(region.start) - 1
        own = region.parser == extracted.parser  # its sections are the document's
        for draft in parsed.chunks:
            parent = draft.parent_ordinal
            heading = draft.heading_path
            if parent is not None:
                parent += base
            elif section is not None and draft.kind is not ChunkKind.SECTION:
                parent = section  # a top-level chunk under the section before its region
                heading = heading or drafts[section].heading_path
            placed = replace(
                draft,
                ordinal=base + draft.ordinal,
                parent_ordinal=parent,
                heading_path=heading,
                span=Span(
                    region.start + draft.span.char_start,
                    region.start + draft.span.char_end,
                    line + draft.span.line_start,
                    line + draft.span.line_end,
                ),
                context=draft.context or region.context,
            )
            drafts.append(placed)
            if own and draft.kind is ChunkKind.SECTION:
                section = placed.ordinal
    return ParsedDocument(frontmatter=frontmatter, body_start=0, chunks=drafts)


def _pieces(extracted: Extracted) -> list[Region]:
    """The regions, and the text between them for the extracted text's own parser."""
    pieces: list[Region] = []
    at = 0
    for region in sorted(extracted.regions, key=lambda r: r.start):
        if region.start > at:
            pieces.append(Region(at, region.start, extracted.parser))
        pieces.append(region)
        at = region.end
    if at < len(extracted.text):
        pieces.append(Region(at, len(extracted.text), extracted.parser))
    return [p for p in pieces if extracted.text[p.start : p.end].strip()]
