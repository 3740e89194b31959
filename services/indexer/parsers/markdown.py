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
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import pyromark

from govindex.core.records import ChunkKind
from indexer.frontmatter import split_frontmatter
from indexer.parsers.base import LineIndex, ParsedDocument, Segment, SizePolicy, finalize

if TYPE_CHECKING:
    from pyromark.event import Range

_ITEM = re.compile(r"^( {0,3})(\d{1,9}[.)]|[-*+])[ \t]+(.*)$")
_CLAUSE = re.compile(
    r"^ {0,3}(?:\*\*)?(§[ \t]*\d+(?:\.\d+)*|\d+(?:\.\d+)+\.?|\([a-z]{1,3}\))(?=[ \t])"
)
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
_PARTS = frozenset(("Item", "TableHead", "TableRow"))  # what a top-level block is made of
_BYTE_NEWLINE = re.compile(rb"\r\n|\r|\n")


@dataclass(slots=True)
class _Block:
    """A top-level CommonMark block: the line it starts on and what it holds.

    Lines are 0-based indexes into `LineIndex.starts`, so that the cutter reads a line's
    text without looking its number up again.
    """

    tag: str  # Heading, Paragraph, List, Table, CodeBlock, HtmlBlock, BlockQuote, Rule, ...
    line: int
    start: int  # where that line starts (a character offset)
    level: int = 0  # a heading's level
    title: str = ""  # a heading's text, inline markup resolved
    ordered: bool = False  # a list's kind
    parts: list[int] | None = None  # lines of a list's items; of a table's head and rows
    last_line: int = 0  # a paragraph's last line (its lines may be clauses)


class _Offsets:
    """CommonMark ranges are UTF-8 byte offsets into the body; chunks want lines (and
    character offsets) of the document: the line a block begins on.

    The line of body byte b is `bisect_right(table, b + shift) + delta`: with an ASCII body
    the table is the document's line starts (bytes are characters), otherwise the starts of
    the body's lines in bytes, computed once.
    """

    def __init__(self, text: str, body_start: int, index: LineIndex) -> None:
        self.starts = index.starts
        body = text[body_start:]
        if body.isascii():
            self.table, self.shift, self.delta = self.starts, body_start, -1
        else:
            first = bisect.bisect_right(self.starts, body_start) - 1
            self.table, self.shift, self.delta = _byte_line_starts(body.encode()), 0, first - 1


def _byte_line_starts(data: bytes) -> list[int]:
    """Where the lines of UTF-8 `data` start; LF-only text is split rather than matched."""
    if b"\r" in data:
        return [0, *(m.end() for m in _BYTE_NEWLINE.finditer(data))]
    starts = list(accumulate(map((1).__add__, map(len, data.split(b"\n"))), initial=0))
    starts.pop()  # one past the end
    return starts


def _outline(body: str, at: _Offsets) -> list[_Block]:
    """The document's top-level blocks, from a CommonMark event stream (one pass).

    Headings inside block quotes, list items or HTML blocks are content, not sections;
    setext headings, indented and fenced code, nested lists are CommonMark's, exactly.
    Inside a block, only a heading's text and a list's or table's parts are kept. Python
    sees every event, so the loop tests the common case (an event inside a block) first,
    and looks lines up inline (`_Offsets`).
    """
    blocks: list[_Block] = []
    starts, table, shift, delta = at.starts, at.table, at.shift, at.delta
    line_of = bisect.bisect_right
    depth = 0
    block: _Block | None = None
    parts: list[int] | None = None  # the open block's, if it is a list or a table
    title: list[str] | None = None  # the open block's text, if it is a heading
    events: Iterator[tuple[Any, Range]] = pyromark.events_with_range(body, options=OPTIONS)
    for event, where in events:
        if depth:
            # An event is a dict, or a str (SoftBreak, HardBreak, Rule) that contains
            # neither "Start" nor "End": `in` tests both kinds without a type check.
            if "Start" in event:
                if parts is not None and depth == 1:
                    opened = event["Start"]
                    if opened.__class__ is str and opened in _PARTS:
                        parts.append(line_of(table, where["start"] + shift) + delta)
                depth += 1
            elif "End" in event:
                depth -= 1
                if title is not None and not depth and block is not None:
                    block.title = "".join(title).strip()
                    title = None
            elif title is not None:  # a heading's text and code; its line breaks as spaces
                piece = (
                    " " if event.__class__ is not dict else event.get("Text") or event.get("Code")
                )
                if piece is not None:
                    title.append(piece)
            continue
        line = line_of(table, where["start"] + shift) + delta
        if event.__class__ is not dict:  # Rule: the only top-level event that is no block
            blocks.append(_Block("Rule", line, starts[line]))
            continue
        opened = event.get("Start")
        if opened is None:  # never: every other top-level event opens a block
            continue
        depth = 1
        if opened.__class__ is str:  # Paragraph, HtmlBlock
            block = _Block(opened, line, starts[line])
            parts = None
            if opened == "Paragraph":
                block.last_line = line_of(table, max(where["end"] - 1, 0) + shift) + delta
        else:  # what a heading's, list's or table's Start says: level, kind, parts to come
            tag = next(iter(opened))
            block = _Block(tag, line, starts[line])
            parts = None
            if tag == "Heading":
                block.level = int(opened["Heading"]["level"][1])
                title = []
            elif tag == "List":
                block.ordered = opened["List"] is not None
                parts = block.parts = []
            elif tag == "Table":
                parts = block.parts = []
        blocks.append(block)
    return blocks


@dataclass(slots=True)
class _Cutter:
    """Cuts a section's body into steps, entries, clauses, row groups and paragraphs.

    The section keeps its heading and lead text; every block after the first structural
    one (a step, entry, clause or table) is a child of the section. One cutter serves a
    document's sections in turn (`begin`): most sections open no block at all.
    """

    text: str
    starts: list[int]  # LineIndex.starts
    ends: list[int]  # where each line ends: the next one's start, len(text) for the last
    section: Segment
    role: str | None = None
    blocks: list[Segment] = field(default_factory=list)
    clauses: list[tuple[str, Segment]] = field(default_factory=list)

    def begin(self, section: Segment, role: str | None) -> None:
        """Start cutting `section` (the previous one is closed)."""
        self.section, self.role = section, role
        if self.blocks:
            self.blocks = []
        if self.clauses:  # a clause's parent is a clause of its own section
            self.clauses = []

    def add(self, block: _Block) -> None:
        if block.tag == "List":
            self._list(block)
        elif block.tag == "Table":
            self._table(block)
        elif block.tag == "Paragraph":
            self._paragraph(block)
        elif block.tag != "CodeBlock" and self.blocks:  # code stays with what it follows
            self._open(block.start, ChunkKind.PARAGRAPH)

    def close(self, end: int) -> list[Segment]:
        """Give the section and its blocks their ends; the blocks, in document order."""
        blocks = self.blocks
        if not blocks:
            self.section.end = end
            return blocks
        for k in range(len(blocks) - 1):
            blocks[k].end = blocks[k + 1].start
        blocks[-1].end = end
        self.section.end = blocks[0].start
        return blocks

    def _open(
        self,
        start: int,
        kind: ChunkKind,
        *,
        parent: Segment | None = None,
        labels: tuple[str, ...] = (),
        context: str = "",
        atomic: bool = False,
    ) -> Segment:
        section = self.section
        seg = Segment(
            start, start, kind, section.heading_path, "", parent or section, labels, context, atomic
        )
        self.blocks.append(seg)
        return seg

    def _list(self, block: _Block) -> None:
        entry = ENTRY_KIND.get(self.role or "")
        if not (block.ordered or entry):  # a plain bullet list is prose
            if self.blocks:
                self._open(block.start, ChunkKind.PARAGRAPH)
            return
        kind = entry or ChunkKind.STEP
        text, starts, ends = self.text, self.starts, self.ends
        path, section, opened = self.section.heading_path, self.section, self.blocks
        for line in block.parts or ():
            start = starts[line]
            item = _ITEM.match(text[start : ends[line]].rstrip("\r\n"))
            if item is None:
                labels: tuple[str, ...] = ()
            elif kind is ChunkKind.STEP:  # the common case: a step's number is all it carries
                marker = item.group(2)
                labels = (f"step:{marker[:-1]}",) if marker[0].isdigit() else ()
            else:
                labels = _entry_labels(kind, item)
            opened.append(Segment(start, start, kind, path, "", section, labels, "", True))

    def _paragraph(self, block: _Block) -> None:
        first = block.line
        text, starts, ends = self.text, self.starts, self.ends
        for n in range(first, max(first, block.last_line) + 1):
            start = starts[n]
            line = text[start : ends[n]].rstrip("\r\n")
            head = line.lstrip(" ")[:1]  # `_may_be_clause`, inline: every line is tested
            clause = _CLAUSE.match(line) if head in _CLAUSE_HEADS or head.isdigit() else None
            if clause is not None:
                number = _clause_id(clause.group(1))
                parent = _clause_parent(number, self.clauses)
                labels = (f"clause:{number}",)
                seg = self._open(start, ChunkKind.CLAUSE, parent=parent, labels=labels, atomic=True)
                self.clauses.append((number, seg))
            elif n == first and self.blocks:
                self._open(start, ChunkKind.PARAGRAPH)

    def _table(self, block: _Block) -> None:
        """Row groups of ROW_GROUP_ROWS rows; every group after the first carries the
        header (its line and the delimiter line) as context."""
        starts = self.starts
        head, rows = block.start, (block.parts or [])[1:]
        header = self.text[head : starts[rows[0]]] if rows else ""
        text, ends = self.text, self.ends
        for g in range(0, max(1, len(rows)), ROW_GROUP_ROWS):
            group = rows[g : g + ROW_GROUP_ROWS]
            keys = tuple(
                [
                    f"key:{cell}"
                    for r in group
                    if (cell := _first_cell(text[starts[r] : ends[r]]))  # strips the line end
                ]
            )
            self._open(
                head if g == 0 else starts[group[0]],
                ChunkKind.ROW_GROUP,
                labels=keys[:50],
                context="" if g == 0 else header,
                atomic=True,
            )


class MarkdownParser:
    name = "markdown"
    version = "3.0.0"

    def __init__(self, policy: SizePolicy | None = None) -> None:
        self.policy = policy or SizePolicy()

    def parse(self, text: str) -> ParsedDocument:
        frontmatter, body_start = split_frontmatter(text)
        index = LineIndex(text)
        at = _Offsets(text, body_start, index)
        segments: list[Segment] = []
        stack: list[tuple[int, Segment]] = []
        outline = _outline(text[body_start:], at)
        starts = index.starts
        cutter: _Cutter | None = None
        defines = False
        if outline and outline[0].tag != "Heading":  # text before the first heading
            preamble = Segment(body_start, len(text), ChunkKind.PREAMBLE)
            segments.append(preamble)
            cutter = _Cutter(text, starts, [*starts[1:], len(text)], preamble)
        for block in outline:
            if block.tag != "Heading":
                assert cutter is not None  # the preamble or a section is always open
                cutter.add(block)
                continue
            if cutter is not None and (blocks := cutter.close(block.start)):
                segments.extend(blocks)
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            role, kind, labels = _heading(block.title)
            defines = defines or role == "definitions"
            section = _section(block, kind, labels, stack[-1][1] if stack else None, len(text))
            stack.append((block.level, section))
            segments.append(section)
            if cutter is None:
                cutter = _Cutter(text, starts, [*starts[1:], len(text)], section, role)
            else:
                cutter.begin(section, role)
        if cutter is not None:
            segments.extend(cutter.close(len(text)))
        if defines:  # only a definitions section defines terms
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


def _section(
    block: _Block, kind: ChunkKind, labels: tuple[str, ...], parent: Segment | None, end: int
) -> Segment:
    title = block.title
    return Segment(
        block.start,
        end,
        kind,
        (*parent.heading_path, title) if parent else (title,),
        title or "section",
        parent,
        labels,
        "",
        True,  # atomic: a heading is an address
    )


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
