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
from dataclasses import dataclass, field

import pyromark

from govindex.core.records import ChunkKind
from indexer.frontmatter import split_frontmatter
from indexer.parsers.base import LineIndex, ParsedDocument, Segment, SizePolicy, finalize

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
    """A top-level CommonMark block: where it starts (a line start) and what it holds."""

    tag: str  # Heading, Paragraph, List, Table, CodeBlock, HtmlBlock, BlockQuote, Rule, ...
    start: int
    level: int = 0  # a heading's level
    title: str = ""  # a heading's text, inline markup resolved
    ordered: bool = False  # a list's kind
    parts: list[int] = field(default_factory=list)  # list items; table head, then rows
    last_line: int = 0  # where a paragraph's last line starts (its lines may be clauses)


class _Offsets:
    """CommonMark ranges are UTF-8 byte offsets into the body; chunks want character
    offsets into the document, at the start of the line a block begins on."""

    def __init__(self, text: str, body_start: int, index: LineIndex) -> None:
        self.starts = index.starts
        self.body_start = body_start
        body = text[body_start:]
        self.first = bisect.bisect_right(self.starts, body_start) - 1
        self.bytes: list[int] | None = None
        if not body.isascii():
            self.bytes = [0, *(m.end() for m in _BYTE_NEWLINE.finditer(body.encode()))]

    def line_start(self, byte: int) -> int:
        if self.bytes is None:
            return self.starts[bisect.bisect_right(self.starts, self.body_start + byte) - 1]
        return self.starts[self.first + bisect.bisect_right(self.bytes, byte) - 1]


def _outline(body: str, at: _Offsets) -> list[_Block]:
    """The document's top-level blocks, from a CommonMark event stream (one pass).

    Headings inside block quotes, list items or HTML blocks are content, not sections;
    setext headings, indented and fenced code, nested lists are CommonMark's, exactly.
    """
    blocks: list[_Block] = []
    depth = 0
    block: _Block | None = None
    title: list[str] | None = None
    for event, where in pyromark.events_with_range(body, options=OPTIONS):
        if event.__class__ is not dict:  # Rule, SoftBreak, HardBreak
            if depth == 0:
                blocks.append(_Block("Rule", at.line_start(where["start"])))
            elif title is not None:
                title.append(" ")
            continue
        opened = event.get("Start")
        if opened is not None:
            tag = opened if opened.__class__ is str else next(iter(opened))
            if depth == 0:
                block = _Block(tag, at.line_start(where["start"]))
                if tag == "Heading":
                    block.level = int(opened["Heading"]["level"][1])
                    title = []
                elif tag == "List":
                    block.ordered = opened["List"] is not None
                elif tag == "Paragraph":
                    block.last_line = at.line_start(max(where["end"] - 1, 0))
                blocks.append(block)
            elif depth == 1 and block is not None and tag in _PARTS:
                block.parts.append(at.line_start(where["start"]))
            depth += 1
        elif "End" in event:
            depth -= 1
            if depth == 0 and title is not None and block is not None:
                block.title = "".join(title).strip()
                title = None
        elif title is not None:
            piece = event.get("Text") or event.get("Code")
            if piece is not None:
                title.append(piece)
    return blocks


@dataclass(slots=True)
class _Cutter:
    """Cuts one section's body into steps, entries, clauses, row groups and paragraphs.

    The section keeps its heading and lead text; every block after the first structural
    one (a step, entry, clause or table) is a child of the section.
    """

    text: str
    section: Segment
    role: str | None
    index: LineIndex
    blocks: list[Segment] = field(default_factory=list)
    clauses: list[tuple[str, Segment]] = field(default_factory=list)

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
        for k, seg in enumerate(self.blocks):
            seg.end = self.blocks[k + 1].start if k + 1 < len(self.blocks) else end
        self.section.end = self.blocks[0].start if self.blocks else end
        return self.blocks

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
        seg = Segment(
            start,
            start,
            kind,
            self.section.heading_path,
            parent=parent or self.section,
            labels=labels,
            context=context,
            atomic=atomic,
        )
        self.blocks.append(seg)
        return seg

    def _line(self, start: int) -> str:
        line = self.index.line_of(start)
        return self.text[start : self.index.offset_of_line(line + 1)].rstrip("\r\n")

    def _list(self, block: _Block) -> None:
        entry = ENTRY_KIND.get(self.role or "")
        if not (block.ordered or entry):  # a plain bullet list is prose
            if self.blocks:
                self._open(block.start, ChunkKind.PARAGRAPH)
            return
        kind = entry or ChunkKind.STEP
        for start in block.parts:
            item = _ITEM.match(self._line(start))
            labels = _entry_labels(kind, item) if item else ()
            self._open(start, kind, labels=labels, atomic=True)

    def _paragraph(self, block: _Block) -> None:
        first = self.index.line_of(block.start)
        last = self.index.line_of(max(block.start, block.last_line))
        for n in range(first, last + 1):
            start = self.index.offset_of_line(n)
            line = self._line(start)
            head = line.lstrip(" ")[:1]
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
        head, rows = block.start, block.parts[1:]
        header = self.text[head : rows[0]] if rows else ""
        for g in range(0, max(1, len(rows)), ROW_GROUP_ROWS):
            group = rows[g : g + ROW_GROUP_ROWS]
            keys = tuple(f"key:{cell}" for r in group if (cell := _first_cell(self._line(r))))
            self._open(
                head if g == 0 else group[0],
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
        cutter: _Cutter | None = None
        if outline and outline[0].tag != "Heading":  # text before the first heading
            preamble = Segment(body_start, len(text), ChunkKind.PREAMBLE)
            segments.append(preamble)
            cutter = _Cutter(text, preamble, None, index)
        for block in outline:
            if block.tag != "Heading":
                assert cutter is not None  # the preamble or a section is always open
                cutter.add(block)
                continue
            if cutter is not None:
                segments.extend(cutter.close(block.start))
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            role = role_of(block.title)
            section = _section(block, role, stack[-1][1] if stack else None, len(text))
            stack.append((block.level, section))
            segments.append(section)
            cutter = _Cutter(text, section, role, index)
        if cutter is not None:
            segments.extend(cutter.close(len(text)))
        _link_definitions(text, segments)
        return finalize(
            text,
            segments,
            frontmatter=frontmatter,
            body_start=body_start,
            policy=self.policy,
            lines=index,
        )


def _section(block: _Block, role: str | None, parent: Segment | None, end: int) -> Segment:
    title = block.title
    clause = _CLAUSE.match(title + " ")
    kind = (
        ChunkKind.ROOT_CAUSE
        if role == "root_cause"
        else (ChunkKind.CLAUSE if clause else ChunkKind.SECTION)
    )
    labels = tuple(
        x
        for x in (
            f"role:{role}" if role else "",
            f"clause:{_clause_id(clause.group(1))}" if clause else "",
        )
        if x
    )
    return Segment(
        block.start,
        end,
        kind,
        (*(parent.heading_path if parent else ()), title),
        title or "section",
        parent,
        labels,
        atomic=True,  # a heading is an address
    )


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
    body = item.group(3)
    labels = []
    if item.group(2)[0].isdigit():
        labels.append(f"step:{item.group(2)[:-1]}")
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
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    return cells[0][:64] if cells and cells[0] else ""


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
