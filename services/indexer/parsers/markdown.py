"""Markdown, runbooks, policies and incident reports: cut the way their authors think.

The block structure is CommonMark's (pulldown-cmark through pyromark, with GFM tables):
setext and ATX headings, block quotes, nested lists, fenced and indented code and HTML
blocks are what a CommonMark renderer sees, and every chunk is an exact span of the
source. Sections follow the top-level heading hierarchy (a heading inside a quote, a
list item, code or HTML is content). Inside a section: the items of a numbered list are
steps; list items under Timeline / Findings / Action items are entries of those kinds;
paragraph lines numbered like `§ 4`, `4.1.2` or `(a)` are clauses (children of the clause
they refine); tables are cut into row groups that carry the header as context.
Frontmatter is metadata, not a chunk: read by the product's YAML loader (no aliases) and
type-checked field by field (`Frontmatter`) before anything uses it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Annotated, Any, Literal

import pyromark
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StrictStr,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from govindex.core import yamlsafe
from govindex.core.errors import InvalidFrontmatter
from govindex.core.inputs import has_control, quote
from govindex.core.records import ChunkKind, Principal
from indexer.parsers.base import LineIndex, ParsedDocument, Segment, SizePolicy, finalize

_FRONTMATTER_OPEN = re.compile(r"\A---[ \t]*(?:\r\n|\r|\n)")
_FRONTMATTER_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r\n|\r|\n|\Z)", re.MULTILINE)
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


FRONTMATTER_NODES = 10_000  # values in a frontmatter block: a few dozen fields at most
LABEL_CHARS = 256  # a title, a type, the name of a service, team or alert
TEXT_CHARS = 1024  # any other field kept as metadata (a summary, a description)
DOC_ID_CHARS = 1024  # a document named by `supersedes` (as long as a doc_id may be)
KEY_CHARS = 64  # a field's name
MAX_FIELDS = 64
MAX_NAMES = 64  # entries of a list of names (services, owners, alerts, superseded ids)
MAX_PRINCIPALS = 256  # entries of `acl`
_FIX = "fix the block between the leading '---' lines"


def split_frontmatter(text: str) -> tuple[dict[str, Any], int]:
    """YAML frontmatter as a dict and the offset where the body starts.

    Frontmatter that is not a YAML mapping is rejected, not ignored: it may carry the ACL,
    and ignoring it would index the document with the wrong access. It is read by the
    product's YAML loader (no anchors or aliases, bounded size and depth); its fields are
    type-checked by `Frontmatter.of` where they are used. Raises InvalidFrontmatter.
    """
    opening = _FRONTMATTER_OPEN.match(text)
    if opening is None:
        return {}, 0
    closing = _FRONTMATTER_CLOSE.search(text, opening.end())
    if closing is None:
        return {}, 0
    raw = text[opening.end() : closing.start()]
    try:
        data = yamlsafe.load(raw, max_nodes=FRONTMATTER_NODES) if raw.strip() else {}
    except yamlsafe.YamlRefused as exc:
        if exc.path:  # refused where it stands: name the field
            line = f" (line {exc.line})" if exc.line else ""
            raise InvalidFrontmatter(
                f"frontmatter field {quote(exc.path)}{line}: {exc.problem}; {_FIX}"
            ) from None
        raise InvalidFrontmatter(f"the YAML frontmatter does not parse: {exc}; {_FIX}") from None
    if not isinstance(data, dict):
        raise InvalidFrontmatter("the frontmatter must be a YAML mapping (key: value lines)")
    return data, closing.end()


# The classifications a source manifest allows (`SourceManifest.classification`).
Classification = Literal["public", "internal", "confidential", "restricted"]


def _one_line(value: str) -> str:
    if has_control(value):
        raise ValueError("holds a line break or a control character; write it on one line")
    return value


def _no_control(value: str) -> str:
    if has_control(value, single_line=False):
        raise ValueError("holds a control character")
    return value


def _listed(limit: int, *, numbers: bool = True) -> BeforeValidator:
    """A field that takes one value or a list of them: one value is a list of one, null an
    empty list, a number a name when `numbers` (`owner: 42`); a list longer than `limit` is
    refused before its items are looked at."""

    def listed(value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str) or (numbers and type(value) is int):
            value = [value]
        if not isinstance(value, list):
            raise ValueError("must be a string or a list of strings")
        if len(value) > limit:
            raise ValueError(f"at most {limit} entries")
        return [str(v) if numbers and type(v) is int else v for v in value]

    return BeforeValidator(listed)


def _not_text(value: Any) -> Any:
    """`title: 1984` or `type: 2` is not a title or a type: left to the heading or the
    path, as it always was (a list or a mapping is refused)."""
    return None if isinstance(value, bool | int | float | date) else value


Label = Annotated[StrictStr, Field(max_length=LABEL_CHARS), AfterValidator(_one_line)]
_Heading = Annotated[Label | None, BeforeValidator(_not_text)]
_DocRef = Annotated[StrictStr, Field(max_length=DOC_ID_CHARS), AfterValidator(_one_line)]
_Principal = Annotated[Principal, Strict(), AfterValidator(_one_line)]
Names = Annotated[tuple[Label, ...], _listed(MAX_NAMES)]
DocRefs = Annotated[tuple[_DocRef, ...], _listed(MAX_NAMES)]
Principals = Annotated[tuple[_Principal, ...], _listed(MAX_PRINCIPALS, numbers=False)]
Scalar = str | bool | int | float | date | None  # datetime is a date


def _when(value: Any) -> datetime | date | str:
    if isinstance(value, date):
        return value
    if isinstance(value, str) and len(value) <= 64:
        return _one_line(value)
    raise ValueError("must be a date-time with a time zone, e.g. 2025-03-01T00:00:00Z")


def _scalar(value: Any) -> Scalar:
    if isinstance(value, str):
        if len(value) > TEXT_CHARS:
            raise ValueError(f"at most {TEXT_CHARS} characters")
        return _no_control(value)
    if value is None or isinstance(value, bool | int | float | date):
        return value
    raise ValueError("must be text, a number, a boolean or a date")


When = Annotated[datetime | date | str, PlainValidator(_when)]
_AWARE: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)


def _is_container(value: object) -> bool:
    return isinstance(value, dict | list | set | tuple)


class Frontmatter(BaseModel):
    """What a document says about itself, type-checked once: every consumer (stamping,
    graph, metadata) reads these fields, never the raw YAML.

    Known fields have their own types; any other field is kept, as written, when it is a
    scalar (`scalars` holds every scalar field, the known ones included: it is what becomes
    document metadata). A list or mapping under another name is left out, as it always
    was (nothing reads it, and the loader bounded its size); `left_out` names it, so that a
    source whose `valid_time_field` points there is told so rather than ignored.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: _Heading = None
    type: _Heading = None
    classification: Classification | None = None
    acl: Principals | None = None  # None: not said; () said empty, which is refused later
    valid_from: When | None = None
    valid_to: When | None = None
    service: Names = ()
    services: Names = ()
    applies_to: Names = ()
    owner: Names = ()
    alerts: Names = ()
    supersedes: DocRefs = ()
    scalars: dict[str, Annotated[Scalar, PlainValidator(_scalar)]] = Field(default_factory=dict)
    left_out: tuple[str, ...] = ()  # other fields holding a list or a mapping

    @model_validator(mode="before")
    @classmethod
    def _spread(cls, raw: Any) -> Any:
        if not isinstance(raw, Mapping):
            return raw
        if len(raw) > MAX_FIELDS:
            raise ValueError(f"{len(raw)} fields, at most {MAX_FIELDS}")
        fields: dict[str, Any] = {}
        for key, value in raw.items():
            name = str(key)
            if len(name) > KEY_CHARS or has_control(name):
                raise ValueError(
                    f"field name {quote(name, KEY_CHARS)} is not a short one-line name"
                )
            fields[name] = value
        known = {k: v for k, v in fields.items() if k in _KNOWN}
        if "acl" in known and known["acl"] is None:
            known["acl"] = []  # `acl:` with nothing after it says empty, not absent
        scalars = {k: v for k, v in fields.items() if not _is_container(v)}
        left_out = tuple(k for k, v in fields.items() if _is_container(v) and k not in _KNOWN)
        return {**known, "scalars": scalars, "left_out": left_out}

    @classmethod
    def of(cls, raw: Frontmatter | Mapping[str, Any]) -> Frontmatter:
        """Frontmatter from a parsed mapping (itself if it already is); InvalidFrontmatter
        naming each refused field."""
        if isinstance(raw, Frontmatter):
            return raw
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise _refusal(exc) from None

    def time(self, name: str) -> datetime | None:
        """Field `name` as a time-zone-aware date-time (None when absent or null); a
        source's `valid_time_field` may name any field, so any field may be asked for."""
        if name in self.left_out:
            got = "a list or a mapping"
        else:
            raw: Any = getattr(self, name) if name in _TIMES else self.scalars.get(name)
            if raw is None:
                return None
            try:
                return _AWARE.validate_python(raw if isinstance(raw, datetime) else str(raw))
            except ValidationError:
                got = yamlsafe.shown(raw)
        raise InvalidFrontmatter(
            f"frontmatter field {quote(name)} must be a date-time with a time zone, e.g. "
            f"2025-03-01T00:00:00Z; got {got}"
        )

    def metadata(self) -> dict[str, str]:
        """Scalar fields as document metadata (ACL and dates are stamped apart)."""
        return {
            k: str(v)
            for k, v in self.scalars.items()
            if k not in _STAMPED and isinstance(v, str | int | float | bool)
        }


# What consumers take: the model, or a parsed mapping they check through `Frontmatter.of`.
FrontmatterLike = Frontmatter | Mapping[str, Any]
_KNOWN = frozenset(Frontmatter.model_fields) - {"scalars", "left_out"}
_TIMES = frozenset(("valid_from", "valid_to"))
_STAMPED = frozenset(("acl", "valid_from", "valid_to"))
_SHOWN_PROBLEMS = 5


def _refusal(exc: ValidationError) -> InvalidFrontmatter:
    """Field and problem for each refusal (the first few), each value quoted short."""
    problems: dict[str, str] = {}  # one per field: a known field is also checked as a scalar
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        if loc[:1] == ["scalars"]:
            loc = loc[1:]
        message = err["msg"].removeprefix("Value error, ")
        if not loc:  # the block as a whole (too many fields, a field name too long)
            problems.setdefault("", message)
            continue
        field = loc[0] + "".join(f"[{p}]" for p in loc[1:])
        got = yamlsafe.shown(err["input"])
        problems.setdefault(loc[0], f"field {quote(field)}: {message} (got {got})")
    shown = list(problems.values())[:_SHOWN_PROBLEMS]
    more = len(problems) - len(shown)
    return InvalidFrontmatter(
        f"frontmatter {'; '.join(shown)}{f'; and {more} more' if more else ''}; {_FIX}"
    )


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
