"""Markdown, runbooks, policies and incident reports: cut the way their authors think.

The block structure is CommonMark's (pulldown-cmark through pyromark, with GFM tables):
setext and ATX headings, block quotes, nested lists, fenced and indented code and HTML
blocks are what a CommonMark renderer sees, and every chunk is an exact span of the
source. Sections follow the top-level heading hierarchy (a heading inside a quote, a
list item, code or HTML is content). Inside a section: the items of a numbered list are
steps; list items under Timeline / Findings / Action items are entries of those kinds;
paragraph lines numbered like `§ 4`, `4.1.2` or `(a)` are clauses (children of the clause
they refine); tables are cut into row groups that carry the header as context.
Frontmatter is metadata, not a chunk: `indexer.frontmatter` splits it off and reads it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from functools import lru_cache
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import pyromark

from govindex.core.records import ChunkKind
from indexer.frontmatter import split_frontmatter
from indexer.parsers.base import LineIndex, ParsedDocument, Segment, SizePolicy, finalize

if TYPE_CHECKING:
    from pyromark.event import Range

# A list item's line, matched where the line starts in the document (`match(text, start)`):
# marker, then the item's text up to the line's end. A step needs only the marker: the
# same match, less the text it need not scan.
_ITEM_AT = re.compile(r"( {0,3})(\d{1,9}[.)]|[-*+])[ \t]+([^\r\n]*)")
_STEP_AT = re.compile(r" {0,3}(\d{1,9}[.)]|[-*+])[ \t]")
# A clause's number at a line's start; nothing it matches crosses a line end, so it is also
# matched where the line starts in the document (`_CLAUSE_AT.match(text, start)`).
_CLAUSE = re.compile(
    r"^ {0,3}(?:\*\*)?(§[ \t]*\d+(?:\.\d+)*|\d+(?:\.\d+)+\.?|\([a-z]{1,3}\))(?=[ \t])"
)
_CLAUSE_AT = re.compile(_CLAUSE.pattern[1:])
_TIME = re.compile(r"^(?:\*\*)?(\d{4}-\d{2}-\d{2}[T ]?\d{0,2}:?\d{0,2}Z?|\d{1,2}:\d{2}(?::\d{2})?)")
_OWNER = re.compile(r"@([A-Za-z0-9_.-]+)")
_DEFINED = re.compile(r'^\s*(?:[-*+]\s+)?(?:\*\*(.+?)\*\*|"(.+?)"\s+means)')

ROLES = {
    "prerequisites": "prerequisites",
    "before you begin": "prerequisites",
    "requirements": "prerequisites",
    "steps": "steps",
    "procedure": "steps",
    "validation": "validation",
    "verification": "validation",
    "verify": "validation",
    "rollback": "rollback",
    "roll back": "rollback",
    "timeline": "timeline",
    "findings": "findings",
    "root cause": "root_cause",
    "root causes": "root_cause",
    "action items": "action_items",
    "follow-ups": "action_items",
    "follow ups": "action_items",
    "definitions": "definitions",
    "glossary": "definitions",
}
ENTRY_KIND = {
    "timeline": ChunkKind.TIMELINE_ENTRY,
    "findings": ChunkKind.FINDING,
    "action_items": ChunkKind.ACTION_ITEM,
}
ROW_GROUP_ROWS = 20
_CLAUSE_HEADS = frozenset("§(*")
_NUMBERING = re.compile(r"^[§\d.\s]+")


def role_of(title: str) -> str | None:
    words = _NUMBERING.sub("", title).strip().lower().rstrip(":")
    return ROLES.get(words)


# CommonMark plus GFM tables: the options the parser (and its benchmark) give pyromark.
OPTIONS = pyromark.Options.ENABLE_TABLES


class _Offsets:
    """CommonMark ranges are UTF-8 byte offsets into the body; chunks want lines (and
    character offsets) of the document: the line a block begins on.

    The line of body byte b is `bisect_right(table, b + shift) + delta`: with an ASCII body
    the table is the document's line starts (bytes are characters), otherwise the starts of
    the body's lines in bytes, computed once.
    """

    def __init__(self, body: str, body_start: int, index: LineIndex) -> None:
        if body.isascii():
            self.table, self.shift, self.delta = index.starts, body_start, -1
        else:
            first = bisect.bisect_right(index.starts, body_start) - 1
            self.table, self.shift, self.delta = _byte_line_starts(body.encode()), 0, first - 1


def _byte_line_starts(data: bytes) -> list[int]:
    """Where the lines of UTF-8 `data` start: bytes.splitlines() knows only CR, LF and CRLF
    as line ends, so the lengths of its lines (ends kept) are summed in C."""
    starts = list(accumulate(map(len, data.splitlines(True)), initial=0))
    if data and data[-1] not in b"\r\n":  # the last sum is the end of the data, no start
        starts.pop()
    return starts


def _outline(body: str, at: _Offsets, sections: _Sections) -> None:
    """Hand the document's top-level blocks to `sections`, from a CommonMark event stream
    (one pass), each as soon as its End is read.

    Headings inside block quotes, list items or HTML blocks are content, not sections;
    setext headings, indented and fenced code, nested lists are CommonMark's, exactly.
    Inside a block, only a heading's text and a list's or table's parts are kept: each
    kind of block is read to its End by a loop of its own (`_title`, `_parts`, `_close`)
    that tests only what that kind needs, since Python sees every event. Lines are
    0-based indexes into `LineIndex.starts`, looked up inline (`_Offsets`).
    """
    table, shift, delta = at.table, at.shift, at.delta
    line_of = bisect.bisect_right
    events: Iterator[tuple[Any, Range]] = pyromark.events_with_range(body, options=OPTIONS)
    for event, where in events:
        line = line_of(table, where["start"] + shift) + delta
        if event.__class__ is not dict:  # Rule: the only top-level event that is no block
            sections.block(line, "Rule")
            continue
        opened = event.get("Start")
        if opened is None:  # never: every other top-level event opens a block
            continue
        if opened == "Paragraph":
            last = line_of(table, max(where["end"] - 1, 0) + shift) + delta
            for inline, _ in events:  # no paragraph holds another: the first End is its own
                if inline == _PARAGRAPH_END:
                    break
            sections.paragraph(line, last)
        elif opened.__class__ is str:  # HtmlBlock
            _close(events)
            sections.block(line, opened)
        # What a heading's, list's or table's Start says: level, kind, parts to come.
        elif "Heading" in opened:
            sections.heading(line, _LEVELS[opened["Heading"]["level"]], _title(events))
        elif "List" in opened:
            sections.items(line, opened["List"] is not None, _parts(events, at))
        elif "Table" in opened:
            sections.table(line, _parts(events, at))
        else:  # CodeBlock, BlockQuote
            _close(events)
            sections.block(line, next(iter(opened)))


_PARAGRAPH_END = {"End": "Paragraph"}
_LEVELS = {f"H{n}": n for n in range(1, 7)}


def _close(events: Iterator[tuple[Any, Range]]) -> None:
    """Read `events` up to and including the End of the block just opened."""
    depth = 0
    for event, _ in events:
        # An event is a dict, or a str (SoftBreak, HardBreak) that contains neither
        # "Start" nor "End": `in` tests both kinds without a type check.
        if "Start" in event:
            depth += 1
        elif "End" in event:
            if not depth:
                return
            depth -= 1


def _parts(events: Iterator[tuple[Any, Range]], at: _Offsets) -> list[int]:
    """The lines of a list's items or of a table's head and rows, read up to and including
    the list's or table's End: every Start directly inside it opens one of them."""
    parts: list[int] = []
    table, shift, delta = at.table, at.shift, at.delta
    line_of = bisect.bisect_right
    depth = 0
    for event, where in events:
        if "Start" in event:
            if not depth:
                parts.append(line_of(table, where["start"] + shift) + delta)
            depth += 1
        elif "End" in event:
            if not depth:
                break
            depth -= 1
    return parts


def _title(events: Iterator[tuple[Any, Range]]) -> str:
    """A heading's text, inline markup resolved, read up to and including its End: text
    and code spans as they read, line breaks (the only events that are no dict) as
    spaces."""
    pieces: list[str] = []
    depth = 0
    for event, _ in events:
        if event.__class__ is not dict:
            pieces.append(" ")
        elif "Start" in event:
            depth += 1
        elif "End" in event:
            if not depth:
                break
            depth -= 1
        elif (piece := event.get("Text") or event.get("Code")) is not None:
            pieces.append(piece)
    return "".join(pieces).strip()


class _Sections:
    """Cuts a document into sections and cuts each section's body into steps, entries,
    clauses, row groups and paragraphs, block by block as `_outline` reads them.

    Sections follow the heading hierarchy; text before the first heading is the
    preamble. A section keeps its heading and lead text; every block after the first
    structural one (a step, entry, clause or table) is a child of the section. Segments
    are opened at the start of their first line and end where the next one starts.
    """

    __slots__ = (
        *("blocks", "body_start", "clauses", "defines", "ends", "role", "section"),
        *("segments", "stack", "starts", "text"),
    )

    def __init__(self, text: str, starts: list[int], body_start: int) -> None:
        self.text, self.starts, self.body_start = text, starts, body_start
        self.ends = [*starts[1:], len(text)]  # where each line ends, its line end included
        self.segments: list[Segment] = []  # in document order
        self.stack: list[tuple[int, Segment]] = []  # the open sections, with their levels
        self.section: Segment | None = None  # the open section, or the preamble
        self.role: str | None = None  # the open section's
        self.blocks: list[Segment] = []  # the open section's, in document order
        self.clauses: list[tuple[str, Segment]] = []  # likewise, with their numbers
        self.defines = False  # whether a section defines terms

    def close(self) -> list[Segment]:
        """The document's segments, the last section closed."""
        self._close(len(self.text))
        return self.segments

    def heading(self, line: int, level: int, title: str) -> None:
        """Open the section of a heading, closing the one open."""
        start = self.starts[line]
        if self.blocks:
            self._close(start)
        elif self.section is not None:  # the common case: a section that opened no block
            self.section.end = start
        stack = self.stack
        while stack and stack[-1][0] >= level:
            stack.pop()
        role, kind, labels = _heading(title)
        if role == "definitions":
            self.defines = True
        parent = stack[-1][1] if stack else None
        section = Segment(
            start,
            len(self.text),
            kind,
            (*parent.heading_path, title) if parent else (title,),
            title or "section",
            parent,
            labels,
            "",
            True,  # atomic: a heading is an address
        )
        stack.append((level, section))
        self.segments.append(section)
        self.section, self.role = section, role
        if self.blocks:
            self.blocks = []
        if self.clauses:  # a clause's parent is a clause of its own section
            self.clauses = []

    def block(self, line: int, tag: str) -> None:
        """A block that is prose whatever it holds (code stays with what it follows)."""
        section = self.section or self._preamble()
        if tag != "CodeBlock" and self.blocks:
            self._open(section, self.starts[line], ChunkKind.PARAGRAPH)

    def paragraph(self, first: int, last: int) -> None:
        """A paragraph: prose, except its lines numbered like clauses."""
        section = self.section or self._preamble()
        text, starts = self.text, self.starts
        for n in range(first, max(first, last) + 1):
            start = starts[n]
            # `_may_be_clause`, inline, on the line's first character: every line is
            # tested, and a line that starts with a space is left to the match itself.
            head = text[start : start + 1]
            clause = (
                _CLAUSE_AT.match(text, start)
                if head in _CLAUSE_HEADS or head.isdigit() or head == " "
                else None
            )
            if clause is not None:
                number = _clause_id(clause.group(1))
                parent = _clause_parent(number, self.clauses) or section
                labels = (f"clause:{number}",)
                seg = self._open(section, start, ChunkKind.CLAUSE, parent, labels, "", True)
                self.clauses.append((number, seg))
            elif n == first and self.blocks:
                self._open(section, start, ChunkKind.PARAGRAPH)

    def items(self, line: int, ordered: bool, lines: list[int]) -> None:
        """A list, given its items' lines: steps if it is numbered, entries under Timeline,
        Findings or Action items, prose otherwise."""
        section = self.section or self._preamble()
        entry = ENTRY_KIND.get(self.role or "")
        if not (ordered or entry):  # a plain bullet list is prose
            if self.blocks:
                self._open(section, self.starts[line], ChunkKind.PARAGRAPH)
            return
        kind = entry or ChunkKind.STEP
        text, starts, path, opened = self.text, self.starts, section.heading_path, self.blocks
        step = kind is ChunkKind.STEP  # the common case: a step's number is all it carries
        for item_line in lines:
            start = starts[item_line]
            item = (_STEP_AT if step else _ITEM_AT).match(text, start)
            if item is None:
                labels: tuple[str, ...] = ()
            elif step:
                labels = _step_labels(item.group(1))
            else:
                labels = _entry_labels(kind, item)
            opened.append(Segment(start, start, kind, path, "", section, labels, "", True))

    def table(self, line: int, parts: list[int]) -> None:
        """Row groups of ROW_GROUP_ROWS rows; every group after the first carries the
        header (its line and the delimiter line) as context."""
        section = self.section or self._preamble()
        text, starts, ends = self.text, self.starts, self.ends
        head, rows = starts[line], parts[1:]
        header = text[head : starts[rows[0]]] if rows else ""
        for g in range(0, max(1, len(rows)), ROW_GROUP_ROWS):
            group = rows[g : g + ROW_GROUP_ROWS]
            keys = tuple(
                [f"key:{cell}" for r in group if (cell := _first_cell(text[starts[r] : ends[r]]))]
            )
            self._open(
                section,
                head if g == 0 else starts[group[0]],
                ChunkKind.ROW_GROUP,
                section,
                keys[:50],
                "" if g == 0 else header,
                True,
            )

    def _preamble(self) -> Segment:
        """Open the preamble: the section of what comes before the first heading."""
        section = self.section = Segment(self.body_start, len(self.text), ChunkKind.PREAMBLE)
        self.segments.append(section)
        return section

    def _open(
        self,
        section: Segment,
        start: int,
        kind: ChunkKind,
        parent: Segment | None = None,
        labels: tuple[str, ...] = (),
        context: str = "",
        atomic: bool = False,
    ) -> Segment:
        seg = Segment(
            start, start, kind, section.heading_path, "", parent or section, labels, context, atomic
        )
        self.blocks.append(seg)
        return seg

    def _close(self, end: int) -> None:
        """Give the open section and its blocks their ends, and add the blocks."""
        section = self.section
        if section is None:
            return
        blocks = self.blocks
        if not blocks:
            section.end = end
            return
        for k in range(len(blocks) - 1):
            blocks[k].end = blocks[k + 1].start
        blocks[-1].end = end
        section.end = blocks[0].start
        self.segments.extend(blocks)


class MarkdownParser:
    name = "markdown"
    version = "3.0.0"

    def __init__(self, policy: SizePolicy | None = None) -> None:
        self.policy = policy or SizePolicy()

    def parse(self, text: str) -> ParsedDocument:
        frontmatter, body_start = split_frontmatter(text)
        index = LineIndex(text)
        body = text[body_start:]
        sections = _Sections(text, index.starts, body_start)
        _outline(body, _Offsets(body, body_start, index), sections)
        segments = sections.close()
        if sections.defines:  # only a definitions section defines terms
            _link_definitions(text, segments)
        return finalize(
            text,
            segments,
            frontmatter=frontmatter,
            body_start=body_start,
            policy=self.policy,
            lines=index,
        )


@lru_cache(maxsize=4096)  # headings repeat across documents: Steps, Rollback, Timeline
def _heading(title: str) -> tuple[str | None, ChunkKind, tuple[str, ...]]:
    """What a heading's title alone decides: its section's role, kind and labels."""
    role = role_of(title)
    clause = _CLAUSE.match(title + " ") if _may_be_clause(title) else None
    kind = (
        ChunkKind.ROOT_CAUSE
        if role == "root_cause"
        else (ChunkKind.CLAUSE if clause else ChunkKind.SECTION)
    )
    labels: tuple[str, ...] = (f"role:{role}",) if role else ()
    if clause:
        labels = (*labels, f"clause:{_clause_id(clause.group(1))}")
    return role, kind, labels


def _may_be_clause(line: str) -> bool:
    """Whether `line` can start like a clause (`_CLAUSE`): a test far cheaper than the match,
    and most lines fail it."""
    head = line.lstrip(" ")[:1]
    return head in _CLAUSE_HEADS or head.isdigit()


def _clause_id(raw: str) -> str:
    return raw.replace("§", "").replace("*", "").strip().rstrip(".")


def _clause_parent(number: str, clauses: list[tuple[str, Segment]]) -> Segment | None:
    if number.startswith("("):
        for other, seg in reversed(clauses):
            if not other.startswith("("):
                return seg
        return None
    for other, seg in reversed(clauses):
        if not other.startswith("(") and number.startswith(other + "."):
            return seg
    return None


def _entry_labels(kind: ChunkKind, item: re.Match[str]) -> tuple[str, ...]:
    marker = item.group(2)
    body = item.group(3)
    labels = []
    if marker[0].isdigit():
        labels.append(f"step:{marker[:-1]}")
    if kind is ChunkKind.TIMELINE_ENTRY and (time := _TIME.match(body.strip())):
        labels.append(f"at:{time.group(1)}")
    if kind is ChunkKind.ACTION_ITEM:
        lowered = body.lower()
        if lowered.startswith("[x]"):
            labels.append("status:done")
        elif lowered.startswith("[ ]"):
            labels.append("status:open")
        labels += [f"owner:{o}" for o in _OWNER.findall(body)[:3]]
    return tuple(labels)


def _first_cell(row: str) -> str:
    return row.strip().strip("|").split("|", 1)[0].strip()[:64]


@lru_cache(maxsize=1024)
def _step_labels(marker: str) -> tuple[str, ...]:
    """A step's labels: its number, if its list is numbered (`3.` or `3)`)."""
    return (f"step:{marker[:-1]}",) if marker[0].isdigit() else ()


def _link_definitions(text: str, segments: list[Segment]) -> None:
    """Label clauses and steps with the defined terms they use (`ref:<term>`)."""
    terms: list[str] = []
    for seg in segments:
        if "role:definitions" in seg.labels or (
            seg.parent is not None and "role:definitions" in seg.parent.labels
        ):
            for line in text[seg.start : seg.end].splitlines():
                found = _DEFINED.match(line)
                if found and (term := (found.group(1) or found.group(2) or "").strip()):
                    terms.append(term)
    if not terms:
        return
    patterns = [(t, re.compile(rf"\b{re.escape(t)}\b")) for t in dict.fromkeys(terms)]
    for seg in segments:
        if "role:definitions" in seg.labels:
            continue
        body = text[seg.start : seg.end]
        refs = tuple(f"ref:{t}" for t, p in patterns if p.search(body))
        seg.labels = (*seg.labels, *refs[:20])
