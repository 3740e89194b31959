"""What every parser shares: segments at exact spans, line numbers, and the size policy.

A parser cuts a document into disjoint, contiguous segments in document order; structure
is expressed by parent links, not by nested spans, so the spans of a document's chunks
cover its body with nothing but whitespace between them
(docs/design/guarantees.md#chunks-are-faithful). Text repeated from
elsewhere for a reader (a table's header) travels in `context`, never in the chunk text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from govindex.core.records import ChunkDraft, ChunkKind, Span, slugify

NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(eq=False)
class Segment:
    """A run of source text that one chunk will hold."""

    start: int
    end: int
    kind: ChunkKind
    heading_path: tuple[str, ...] = ()
    title: str = ""
    parent: Segment | None = None
    labels: tuple[str, ...] = ()
    context: str = ""
    atomic: bool = False  # an addressable unit (step, clause, function): never merged
    children: list[Segment] = field(default_factory=list)


@dataclass(frozen=True)
class ParsedDocument:
    frontmatter: Mapping[str, Any]
    body_start: int
    chunks: list[ChunkDraft]


class Parser(Protocol):
    name: str
    version: str

    def parse(self, text: str) -> ParsedDocument: ...


@dataclass(frozen=True)
class SizePolicy:
    """Budget in characters (≈ 4 per token). Too large: split at the next structural boundary
    (paragraph, line, sentence, word: never mid-word). Too small: merged with a mergeable
    neighbour of the same parent and kind. Both are recorded in the chunk's labels."""

    max_chars: int = 2400
    min_chars: int = 120


DEFAULT_POLICY = SizePolicy()


class LineIndex:
    """Character offset ↔ 1-based line number, with CR, LF and CRLF as line ends."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in NEWLINE.finditer(text)]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def offset_of_line(self, line: int) -> int:
        """Start offset of 1-based `line` (len(text) past the end)."""
        return self.starts[line - 1] if line - 1 < len(self.starts) else len(self.text)

    def lines(self, start: int = 0) -> list[tuple[int, str]]:
        """(offset, line without its ending) for every line from `start` on."""
        first = self.line_of(start) - 1
        text, starts = self.text, self.starts
        bounds = [*starts[first + 1 :], len(text)]
        out = []
        begin = max(starts[first], start) if first < len(starts) else len(text)
        for end in bounds:
            line = text[begin:end]
            if line.endswith("\n"):
                line = line[:-2] if line.endswith("\r\n") else line[:-1]
            elif line.endswith("\r"):
                line = line[:-1]
            out.append((begin, line))
            begin = end
        return out


_SPLIT_LEVELS = (
    re.compile(r"(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)"),  # paragraphs
    NEWLINE,  # lines
    re.compile(r"(?<=[.!?])[ \t]+(?=\S)"),  # sentences
    re.compile(r"(?<![ \t])[ \t]++(?=\S)"),  # words (from a run's start only: linear)
)


def split_points(text: str, start: int, end: int, max_chars: int) -> list[int]:
    """Cut offsets in (start, end) so that no piece exceeds max_chars where avoidable."""
    cuts: list[int] = []
    position = start
    while end - position > max_chars:
        cut = None
        for level in _SPLIT_LEVELS:
            window = text[position : position + max_chars + 1]
            found = [m.end() for m in level.finditer(window) if 0 < m.end() < len(window)]
            if found:
                cut = position + found[-1]
                break
        if cut is None or cut <= position:
            # One word longer than the budget: keep it whole rather than cut it.
            nxt = re.compile(r"\s+").search(text, position + max_chars, end)
            if nxt is None or nxt.end() >= end:
                break
            cut = nxt.end()
        cuts.append(cut)
        position = cut
    return cuts


# Long: one pass over the segments; split, each part would need the whole pass state.
def apply_size_policy(text: str, segments: list[Segment], policy: SizePolicy) -> list[Segment]:
    """Split what is too large, merge what is too small; linear in the number of segments."""
    children: dict[int, list[Segment]] = {}
    for seg in segments:
        if seg.parent is not None:
            children.setdefault(id(seg.parent), []).append(seg)
    out: list[Segment] = []
    for seg in segments:
        cuts = split_points(text, seg.start, seg.end, policy.max_chars)
        if not cuts:
            out.append(seg)
            continue
        bounds = [seg.start, *cuts, seg.end]
        # A piece holding only whitespace joins the piece before it.
        bounds = [
            b
            for k, b in enumerate(bounds)
            if k in (0, len(bounds) - 1) or text[b : bounds[k + 1]].strip()
        ]
        if len(bounds) == 2:
            out.append(seg)
            continue
        parts = []
        for i in range(len(bounds) - 1):
            part = Segment(
                bounds[i],
                bounds[i + 1],
                seg.kind,
                seg.heading_path,
                seg.title if i == 0 else "",
                seg.parent if i == 0 else None,
                (*seg.labels, f"part:{i + 1}/{len(bounds) - 1}"),
                seg.context,
                seg.atomic,
            )
            parts.append(part)
        for later in parts[1:]:
            later.parent = seg.parent if seg.parent is not None else parts[0]
        for child in children.pop(id(seg), []):  # children hang off the first part
            child.parent = parts[0]
        children[id(parts[0])] = []
        out.extend(parts)
    parents = {id(seg.parent) for seg in out if seg.parent is not None}
    merged: list[Segment] = []
    for seg in out:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and not seg.atomic
            and not prev.atomic
            and prev.kind == seg.kind
            and prev.parent is seg.parent
            and prev.context == seg.context
            and id(seg) not in parents
            and not text[prev.end : seg.start].strip()
            and (seg.end - seg.start < policy.min_chars or prev.end - prev.start < policy.min_chars)
            and seg.end - prev.start <= policy.max_chars
        ):
            count = next((int(x[7:]) for x in prev.labels if x.startswith("merged:")), 1) + 1
            prev.labels = (
                *[x for x in prev.labels if not x.startswith("merged:")],
                f"merged:{count}",
            )
            prev.end = seg.end
            continue
        merged.append(seg)
    return merged


def finalize(
    text: str,
    segments: Sequence[Segment],
    *,
    frontmatter: Mapping[str, Any] | None = None,
    body_start: int = 0,
    policy: SizePolicy = DEFAULT_POLICY,
    lines: LineIndex | None = None,
) -> ParsedDocument:
    """Drop empty segments, apply the size policy, number, anchor and link the rest."""
    kept = [s for s in segments if text[s.start : s.end].strip()]
    kept_ids = {id(s) for s in kept}
    for seg in kept:  # a parent that held only whitespace hands its children up
        while seg.parent is not None and id(seg.parent) not in kept_ids:
            seg.parent = seg.parent.parent
    final = apply_size_policy(text, kept, policy)
    lines = lines or LineIndex(text)
    ordinal = {id(s): i for i, s in enumerate(final)}
    used: dict[str, int] = {}
    drafts = []
    for i, seg in enumerate(final):
        anchor = ""
        if seg.title:
            base = slugify(seg.title) or seg.kind.value
            count = used.get(base, 0)
            used[base] = count + 1
            anchor = f"{base}-{count}" if count else base
        parent = seg.parent
        while parent is not None and id(parent) not in ordinal:
            parent = parent.parent
        drafts.append(
            ChunkDraft(
                ordinal=i,
                kind=seg.kind,
                text=text[seg.start : seg.end],
                span=Span(
                    char_start=seg.start,
                    char_end=seg.end,
                    line_start=lines.line_of(seg.start),
                    line_end=lines.line_of(max(seg.start, seg.end - 1)),
                ),
                heading_path=seg.heading_path,
                anchor=anchor,
                parent_ordinal=ordinal[id(parent)] if parent is not None else None,
                labels=seg.labels,
                context=seg.context,
            )
        )
    return ParsedDocument(frontmatter=frontmatter or {}, body_start=body_start, chunks=drafts)
