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
from dataclasses import dataclass, fields
from functools import lru_cache
from itertools import accumulate
from typing import Any, Protocol

from govindex.core.records import ChunkDraft, ChunkKind, Span, slugify

NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(eq=False, slots=True)
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
        self.starts = _line_starts(text)

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


def _line_starts(text: str) -> list[int]:
    """Where every line starts. A text without the line ends str.splitlines() knows besides
    CR, LF and CRLF (almost every text) is split by it, line ends kept, and the lengths
    summed in C; a regex match object per line was most of the cost of indexing a
    document's lines. Otherwise a text with one kind of line end (LF, or CRLF) is split on
    it, and anything else takes the regex."""
    if not (
        "\v" in text
        or "\f" in text
        or "\x1c" in text
        or "\x1d" in text
        or "\x1e" in text
        or (not text.isascii() and ("\x85" in text or "\u2028" in text or "\u2029" in text))
    ):
        starts = list(accumulate(map(len, text.splitlines(True)), initial=0))
        if text and text[-1] not in "\r\n":  # the last sum is the end of the text, no start
            starts.pop()
        return starts
    crs = text.count("\r")
    if crs == 0:
        ending = "\n"
    elif crs == text.count("\r\n") == text.count("\n"):
        ending = "\r\n"
    else:
        return [0, *(m.end() for m in NEWLINE.finditer(text))]
    # Each line's length plus its ending, summed: the start of the next; the last sum is
    # one ending past the end of the text.
    starts = list(accumulate(map(len(ending).__add__, map(len, text.split(ending))), initial=0))
    starts.pop()
    return starts


_SPLIT_LEVELS = (
    re.compile(r"(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)"),  # paragraphs
    NEWLINE,  # lines
    re.compile(r"(?<=[.!?])[ \t]+(?=\S)"),  # sentences
    re.compile(r"(?<![ \t])[ \t]++(?=\S)"),  # words (from a run's start only: linear)
)
_SPACE_RUN = re.compile(r"\s+")


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
            nxt = _SPACE_RUN.search(text, position + max_chars, end)
            if nxt is None or nxt.end() >= end:
                break
            cut = nxt.end()
        cuts.append(cut)
        position = cut
    return cuts


# Long: one pass over the segments; split, each part would need the whole pass state.
def apply_size_policy(text: str, segments: list[Segment], policy: SizePolicy) -> list[Segment]:
    """Split what is too large, merge what is too small; linear in the number of segments."""
    max_chars, min_chars = policy.max_chars, policy.min_chars
    # Who hangs off whom, needed only once something is split: built then, from the
    # parents as they are (nothing has changed them before the first split).
    children: dict[int, list[Segment]] | None = None
    out: list[Segment] = []
    for seg in segments:
        if seg.end - seg.start <= max_chars:  # within budget: no cut to look for
            out.append(seg)
            continue
        cuts = split_points(text, seg.start, seg.end, max_chars)
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
        if children is None:
            children = _children(segments)
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
    parents: set[int] | None = None  # who is a parent (never merged away): when first asked
    merged: list[Segment] = []
    prev: Segment | None = None  # merged[-1]
    for seg in out:
        if (
            not seg.atomic
            and prev is not None
            and not prev.atomic
            and prev.kind == seg.kind
            and prev.parent is seg.parent
            and prev.context == seg.context
            and id(seg) not in (parents := _parents(out) if parents is None else parents)
            and not text[prev.end : seg.start].strip()
            and (seg.end - seg.start < min_chars or prev.end - prev.start < min_chars)
            and seg.end - prev.start <= max_chars
        ):
            count = next((int(x[7:]) for x in prev.labels if x.startswith("merged:")), 1) + 1
            prev.labels = (
                *[x for x in prev.labels if not x.startswith("merged:")],
                f"merged:{count}",
            )
            prev.end = seg.end
            continue
        merged.append(seg)
        prev = seg
    return merged


def _parents(segments: list[Segment]) -> set[int]:
    return {id(seg.parent) for seg in segments if seg.parent is not None}


def _children(segments: list[Segment]) -> dict[int, list[Segment]]:
    """Each parent's children (by the parent's id), in document order."""
    children: dict[int, list[Segment]] = {}
    for seg in segments:
        if seg.parent is not None:
            children.setdefault(id(seg.parent), []).append(seg)
    return children


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
    # Not blank: isspace() stops at the first other character, strip() would copy.
    kept = [s for s in segments if (piece := text[s.start : s.end]) and not piece.isspace()]
    kept_ids = {id(s) for s in kept}
    for seg in kept:  # a parent that held only whitespace hands its children up
        while seg.parent is not None and id(seg.parent) not in kept_ids:
            seg.parent = seg.parent.parent
    final = apply_size_policy(text, kept, policy)
    starts = (lines or LineIndex(text)).starts
    line_of = bisect.bisect_right  # LineIndex.line_of, without a method call per chunk
    ordinal = {id(s): i for i, s in enumerate(final)}
    used: dict[str, int] = {}
    drafts = []
    for i, seg in enumerate(final):
        anchor = ""
        if seg.title:
            base = _slug(seg.title) or seg.kind.value
            count = used.get(base, 0)
            used[base] = count + 1
            anchor = f"{base}-{count}" if count else base
        parent, parent_ordinal = seg.parent, None
        while parent is not None:  # the nearest ancestor still there
            parent_ordinal = ordinal.get(id(parent))
            if parent_ordinal is not None:
                break
            parent = parent.parent
        start, end = seg.start, seg.end
        last = end - 1 if end - 1 > start else start  # the chunk's last character
        drafts.append(
            _chunk(
                i,
                seg.kind,
                text[start:end],
                start,
                end,
                line_of(starts, start),
                line_of(starts, last),
                seg.heading_path,
                anchor,
                parent_ordinal,
                seg.labels,
                seg.context,
            )
        )
    return ParsedDocument(frontmatter=frontmatter or {}, body_start=body_start, chunks=drafts)


# Headings repeat across documents (Steps, Rollback, Overview): their anchors are cached.
_slug = lru_cache(maxsize=4096)(slugify)


_SPAN_FIELDS = ("char_start", "char_end", "line_start", "line_end")
_DRAFT_FIELDS = (
    *("ordinal", "kind", "text", "span", "heading_path", "anchor"),
    *("parent_ordinal", "labels", "context"),
)


class _SpanSlots:
    """Span's slots without its frozen __setattr__: filled by plain stores, then a Span."""

    __slots__ = ("char_end", "char_start", "line_end", "line_start")
    char_start: int
    char_end: int
    line_start: int
    line_end: int


class _DraftSlots:
    """ChunkDraft's slots without its frozen __setattr__, likewise."""

    __slots__ = (
        *("anchor", "context", "heading_path", "kind", "labels", "ordinal"),
        *("parent_ordinal", "span", "text"),
    )
    ordinal: int
    kind: ChunkKind
    text: str
    span: object  # a Span, made from _SpanSlots
    heading_path: tuple[str, ...]
    anchor: str
    parent_ordinal: int | None
    labels: tuple[str, ...]
    context: str


def _slots_of(cls: type, names: tuple[str, ...], slots: type) -> type | None:
    """`slots` if its instances can become `cls`'s by `__class__` assignment with nothing
    skipped that `cls`'s constructor does, else None: `cls` is a frozen dataclass with
    slots, these fields in this order (what `_chunk` fills) and no __post_init__, and
    CPython finds the two layouts the same."""
    params = getattr(cls, "__dataclass_params__", None)
    if (
        params is None
        or not params.frozen
        or tuple(f.name for f in fields(cls)) != names
        or set(getattr(cls, "__slots__", ())) != set(names)
        or set(getattr(slots, "__slots__", ())) != set(names)
        or hasattr(cls, "__post_init__")
    ):
        return None
    probe = slots()
    try:
        probe.__class__ = cls
    except TypeError:  # another layout (a __weakref__ slot, a base with slots)
        return None
    return slots


_SPAN_SLOTS = _slots_of(Span, _SPAN_FIELDS, _SpanSlots)
_DRAFT_SLOTS = _slots_of(ChunkDraft, _DRAFT_FIELDS, _DraftSlots)


# Long: one store per field, unrolled, is what makes it fast.
def _chunk(
    ordinal: int,
    kind: ChunkKind,
    text: str,
    char_start: int,
    char_end: int,
    line_start: int,
    line_end: int,
    heading_path: tuple[str, ...],
    anchor: str,
    parent_ordinal: int | None,
    labels: tuple[str, ...],
    context: str,
) -> ChunkDraft:
    """ChunkDraft(…, span=Span(char_start, …, line_end), …), built from their slots.

    Both are frozen dataclasses, whose generated __init__ sets each field through
    object.__setattr__: that was a third of `finalize`. A plain class with the same slots
    is filled by ordinary stores and then given the record's class (`__class__`
    assignment, which CPython allows between equal layouts): the same, equal, hashable
    records in a fifth of the constructors' time. While the classes are not the plain
    records `_slots_of` checks for, the constructors are called."""
    if _SPAN_SLOTS is None or _DRAFT_SLOTS is None:
        span = Span(char_start, char_end, line_start, line_end)
        return ChunkDraft(
            ordinal, kind, text, span, heading_path, anchor, parent_ordinal, labels, context
        )
    record = _SpanSlots()
    record.char_start = char_start
    record.char_end = char_end
    record.line_start = line_start
    record.line_end = line_end
    record.__class__ = Span  # type: ignore[assignment]
    draft = _DraftSlots()
    draft.ordinal = ordinal
    draft.kind = kind
    draft.text = text
    draft.span = record
    draft.heading_path = heading_path
    draft.anchor = anchor
    draft.parent_ordinal = parent_ordinal
    draft.labels = labels
    draft.context = context
    draft.__class__ = ChunkDraft  # type: ignore[assignment]
    return draft  # type: ignore[return-value]
