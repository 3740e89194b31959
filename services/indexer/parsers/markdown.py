"""Markdown, runbooks, policies and incident reports: cut the way their authors think.

Sections follow the heading hierarchy. Inside a section: numbered list items are steps;
list items under Timeline / Findings / Action items are entries of those kinds; lines
numbered like `§ 4`, `4.1.2` or `(a)` are clauses (children of the clause they refine);
tables are cut into row groups that carry the header as context. Headings inside fenced
code are text. Frontmatter is metadata, not a chunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from govindex.core.errors import InvalidEvent
from govindex.core.records import ChunkKind
from indexer.parsers.base import LineIndex, ParsedDocument, Segment, SizePolicy, finalize

_FRONTMATTER_OPEN = re.compile(r"\A---[ \t]*(?:\r\n|\r|\n)")
_FRONTMATTER_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r\n|\r|\n|\Z)", re.MULTILINE)
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ITEM = re.compile(r"^( {0,3})(\d{1,9}[.)]|[-*+])[ \t]+(.*)$")
_CLAUSE = re.compile(
    r"^ {0,3}(?:\*\*)?(§[ \t]*\d+(?:\.\d+)*|\d+(?:\.\d+)+\.?|\([a-z]{1,3}\))(?=[ \t])"
)
_TABLE_SEPARATOR = re.compile(
    r"^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)*\|?[ \t]*$"
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
_ITEM_HEADS = frozenset("-*+")
_CLAUSE_HEADS = frozenset("§(*")


def split_frontmatter(text: str) -> tuple[dict[str, Any], int]:
    """YAML frontmatter as a dict and the offset where the body starts.

    Frontmatter that is not a YAML mapping is rejected, not ignored: it may carry the ACL,
    and ignoring it would index the document with the wrong access.
    """
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


def role_of(title: str) -> str | None:
    words = re.sub(r"^[§\d.\s]+", "", title).strip().lower().rstrip(":")
    return ROLES.get(words)


@dataclass(slots=True)
class _Line:
    offset: int
    text: str
    in_fence: bool


class MarkdownParser:
    name = "markdown"
    version = "2.0.0"

    def __init__(self, policy: SizePolicy | None = None) -> None:
        self.policy = policy or SizePolicy()

    # Long: one pass over the blocks; the heading stack and roles are its shared state.
    def parse(self, text: str) -> ParsedDocument:
        frontmatter, body_start = split_frontmatter(text)
        index = LineIndex(text)
        lines = self._lines(index, body_start)
        segments: list[Segment] = []
        stack: list[tuple[int, Segment]] = []
        heading_rows = [
            i
            for i, ln in enumerate(lines)
            if not ln.in_fence and ln.text.lstrip(" ")[:1] == "#" and _HEADING.match(ln.text)
        ]
        bounds = (
            [0, *heading_rows, len(lines)]
            if heading_rows[:1] != [0]
            else [*heading_rows, len(lines)]
        )
        for b in range(len(bounds) - 1):
            first, last = bounds[b], bounds[b + 1]
            if first >= last:
                continue
            end = lines[last].offset if last < len(lines) else len(text)
            heading = _HEADING.match(lines[first].text) if not lines[first].in_fence else None
            if heading is None:  # text before the first heading
                pre = Segment(lines[first].offset, end, ChunkKind.PREAMBLE)
                segments.append(pre)
                self._blocks(text, lines[first:last], end, pre, None, segments)
                continue
            level, title = len(heading.group(1)), (heading.group(2) or "").strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            parent = stack[-1][1] if stack else None
            role = role_of(title)
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
            heading_path = (*(parent.heading_path if parent else ()), title)
            section = Segment(
                lines[first].offset,
                end,
                kind,
                heading_path,
                title or "section",
                parent,
                labels,
                atomic=True,
            )  # a heading is an address
            stack.append((level, section))
            segments.append(section)
            self._blocks(text, lines[first + 1 : last], end, section, role, segments)
        _link_definitions(text, segments)
        return finalize(
            text,
            segments,
            frontmatter=frontmatter,
            body_start=body_start,
            policy=self.policy,
            lines=index,
        )

    @staticmethod
    def _lines(index: LineIndex, start: int) -> list[_Line]:
        out: list[_Line] = []
        fence: str | None = None
        for offset, line in index.lines(start):
            # Most lines are prose: test the first character before running a regex.
            head = line.lstrip(" ")[:1]
            opened = _FENCE.match(line) if head in ("`", "~") else None
            inside = fence is not None
            if opened:
                marker = opened.group(1)
                if fence is None:
                    fence = marker
                elif marker[0] == fence[0] and len(marker) >= len(fence):
                    fence = None
                inside = True
            out.append(_Line(offset, line, inside))
        return out

    # Long: the per-line block scanner; fences, tables and lists share its state.
    def _blocks(
        self,
        text: str,
        body: list[_Line],
        end: int,
        section: Segment,
        role: str | None,
        out: list[Segment],
    ) -> None:
        """Cut a section's body into steps, entries, clauses, row groups and paragraphs.

        The section keeps its heading and lead text; every block after it is a child.
        """
        blocks: list[Segment] = []
        clauses: list[tuple[str, Segment]] = []
        current: Segment | None = None  # the open block, if any
        item_indent = -1
        after_table = False
        entry_kind = ENTRY_KIND.get(role or "")
        i = 0
        while i < len(body):
            line = body[i]
            if line.in_fence or not line.text.strip():
                i += 1
                continue
            if self._table_at(body, i):
                i = self._table(text, body, i, end, section, blocks)
                current, item_indent, after_table = None, -1, True
                continue
            head = line.text.lstrip(" ")[:1]
            item = _ITEM.match(line.text) if head in _ITEM_HEADS or head.isdigit() else None
            clause = _CLAUSE.match(line.text) if head in _CLAUSE_HEADS or head.isdigit() else None
            indent = len(item.group(1)) if item else -1
            is_entry = item is not None and (item.group(2)[0].isdigit() or entry_kind)
            if is_entry and item is not None and (current is None or indent <= item_indent):
                kind = entry_kind or ChunkKind.STEP
                current = Segment(
                    line.offset,
                    end,
                    kind,
                    section.heading_path,
                    parent=section,
                    labels=_entry_labels(kind, item),
                    atomic=True,
                )
                item_indent = indent
            elif clause and (current is None or current.kind is not ChunkKind.STEP):
                number = _clause_id(clause.group(1))
                current = Segment(
                    line.offset,
                    end,
                    ChunkKind.CLAUSE,
                    section.heading_path,
                    parent=_clause_parent(number, clauses) or section,
                    labels=(f"clause:{number}",),
                    atomic=True,
                )
                clauses.append((number, current))
                item_indent = -1
            elif after_table or (current is not None and self._ends_block(body, i, item_indent)):
                current = Segment(
                    line.offset, end, ChunkKind.PARAGRAPH, section.heading_path, parent=section
                )
                item_indent = -1
            else:
                i += 1
                continue
            blocks.append(current)
            after_table = False
            i += 1
        for k, block in enumerate(blocks):
            block.end = blocks[k + 1].start if k + 1 < len(blocks) else end
        if blocks:
            section.end = blocks[0].start
        out.extend(blocks)

    @staticmethod
    def _table(
        text: str, body: list[_Line], i: int, end: int, section: Segment, blocks: list[Segment]
    ) -> int:
        """Cut the table starting at body[i] into row groups; return the line after it."""
        j = i + 2
        while (
            j < len(body) and "|" in body[j].text and body[j].text.strip() and not body[j].in_fence
        ):
            j += 1
        header = text[body[i].offset : body[i + 2].offset if i + 2 < len(body) else end]
        table_end = body[j].offset if j < len(body) else end
        rows = body[i + 2 : j]
        for g in range(0, max(1, len(rows)), ROW_GROUP_ROWS):
            group = rows[g : g + ROW_GROUP_ROWS]
            start = body[i].offset if g == 0 else group[0].offset
            keys = tuple(f"key:{cell}" for r in group if (cell := _first_cell(r.text)))
            blocks.append(
                Segment(
                    start,
                    table_end,
                    ChunkKind.ROW_GROUP,
                    section.heading_path,
                    parent=section,
                    labels=keys[:50],
                    context="" if g == 0 else header,
                    atomic=True,
                )
            )
        return j

    @staticmethod
    def _table_at(body: list[_Line], i: int) -> bool:
        return (
            i + 1 < len(body)
            and "|" in body[i].text
            and not body[i + 1].in_fence
            and _TABLE_SEPARATOR.match(body[i + 1].text) is not None
            and "|" in body[i + 1].text
        )

    @staticmethod
    def _ends_block(body: list[_Line], i: int, item_indent: int) -> bool:
        """A non-indented line after a blank line ends a list item or clause paragraph."""
        line = body[i].text
        indent = len(line) - len(line.lstrip(" "))
        after_blank = i > 0 and not body[i - 1].text.strip()
        return after_blank and indent <= max(item_indent, 0) and not _ITEM.match(line)


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
