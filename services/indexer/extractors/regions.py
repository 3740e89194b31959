"""Cutting extracted text whose regions need other parsers (pure).

A notebook is Markdown cells and code cells: the Markdown is cut by the Markdown parser
and each code cell by its language's parser, so a function in a cell is a `function`
chunk like one in a file. Each region is parsed on its own and its chunks are placed back
at their offsets of the canonical text (spans, lines, ordinals, parents), so every chunk
is still the canonical text at its span. A region's top-level chunks hang under the
section that precedes them.
"""

from __future__ import annotations

from dataclasses import replace

from govindex.core.records import ChunkDraft, ChunkKind, Span
from indexer.extractors.base import Extracted, Region
from indexer.parsers import PARSERS, ParsedDocument, parse
from indexer.parsers.base import LineIndex


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
        parsed = parse(PARSERS[region.parser], text[region.start : region.end])
        if index == 0 and region.start == 0:
            frontmatter = dict(parsed.frontmatter)
        base = len(drafts)
        line = lines.line_of(region.start) - 1
        own = region.parser == extracted.parser
        for draft in parsed.chunks:
            parent = draft.parent_ordinal
            placed = replace(
                draft,
                ordinal=base + draft.ordinal,
                parent_ordinal=base + parent if parent is not None else (None if own else section),
                span=Span(
                    region.start + draft.span.char_start,
                    region.start + draft.span.char_end,
                    line + draft.span.line_start,
                    line + draft.span.line_end,
                ),
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
