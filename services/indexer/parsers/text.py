"""Plain text: paragraphs (blank-line separated); tiny neighbours merge under the size policy."""

from __future__ import annotations

import re

from govindex.core.records import ChunkKind
from indexer.parsers.base import ParsedDocument, Segment, SizePolicy, finalize

_PARAGRAPH_BREAK = re.compile(r"(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)\s*")


def paragraphs(text: str, start: int = 0, end: int | None = None) -> list[Segment]:
    stop = len(text) if end is None else end
    segments: list[Segment] = []
    position = start
    for brk in _PARAGRAPH_BREAK.finditer(text, start, stop):
        segments.append(Segment(position, brk.end(), ChunkKind.PARAGRAPH))
        position = brk.end()
    if position < stop:
        segments.append(Segment(position, stop, ChunkKind.PARAGRAPH))
    return segments


class PlainTextParser:
    name = "text"
    version = "1.0.0"

    def __init__(self, policy: SizePolicy | None = None) -> None:
        self.policy = policy or SizePolicy()

    def parse(self, text: str) -> ParsedDocument:
        return finalize(text, paragraphs(text), policy=self.policy)
