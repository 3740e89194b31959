"""Word documents (.docx) as canonical Markdown, in the terms the Markdown parser reads.

Body paragraphs and tables come in document order; heading styles become `#` levels
(Title is level 1 when the document uses it, Heading N follows below it), numbered
paragraphs become `1.` list items and bulleted ones `- ` items, indented by their list
level, so numbered procedures are steps; clause numbers typed in the text (`§ 4`,
`4.1.2`, `(a)`) stay at the start of their line, so policies keep their clauses.
Headings numbered by Word carry their number (`## 4.1 Access`). Tables become pipe
tables whose first row is the header; a merged cell repeats its text in every grid cell
it covers, so each row group still reads whole. Headers, footers, footnotes, comments,
text boxes and deleted revisions are left out: they are page furniture or side notes,
not the body.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from typing import Any

import docx
from docx.opc.constants import RELATIONSHIP_TYPE as RT

from indexer.extractors.base import Extracted, Limits, check_text
from indexer.extractors.office.common import (
    MAX_LEVEL,
    Cells,
    Lists,
    Writer,
    as_int,
    atx_heading,
    check_file,
    grid_text,
    reading,
    table,
    text_lines,
)

_MAX_SPAN = 1_024  # grid columns one table cell may span (Word allows 63, PowerPoint fewer)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_W_VAL = _W + "val"
_P, _TBL, _TR, _TC = _W + "p", _W + "tbl", _W + "tr", _W + "tc"
_SDT, _SDT_CONTENT, _CUSTOM_XML = _W + "sdt", _W + "sdtContent", _W + "customXml"
_CONTAINERS = frozenset((_SDT, _SDT_CONTENT, _CUSTOM_XML, _W + "ins", _W + "moveTo"))
# Subtrees of a paragraph holding no body text: properties, deleted revisions, text boxes
# (drawn objects), and the fallback copy of an alternate content block.
_NOT_TEXT = frozenset(
    (
        _W + "pPr",
        _W + "rPr",
        _W + "del",
        _W + "moveFrom",
        _W + "txbxContent",
        _W + "instrText",
        _MC + "Fallback",
    )
)
_LABEL = re.compile(r"%([1-9])")
_HEADING_NAME = re.compile(r"heading ([1-9])")
_LIST_NAME = re.compile(r"list (number|bullet)(?: ([2-9]))?")
_ROMAN = (
    (1000, "m"),
    (900, "cm"),
    (500, "d"),
    (400, "cd"),
    (100, "c"),
    (90, "xc"),
    (50, "l"),
    (40, "xl"),
    (10, "x"),
    (9, "ix"),
    (5, "v"),
    (4, "iv"),
    (1, "i"),
)


def _roman(n: int) -> str:
    out = []
    for value, letters in _ROMAN:
        count, n = divmod(n, value)
        out.append(letters * count)
    return "".join(out)


def _letter(n: int) -> str:
    return chr(ord("a") + (n - 1) % 26) * ((n - 1) // 26 + 1) if n > 0 else ""


def _format_number(n: int, fmt: str) -> str:
    if n > 10_000:  # no list shows letters or numerals this long; digits stay short
        return str(n)
    if fmt == "lowerRoman":
        return _roman(n)
    if fmt == "upperRoman":
        return _roman(n).upper()
    if fmt == "lowerLetter":
        return _letter(n)
    if fmt == "upperLetter":
        return _letter(n).upper()
    if fmt == "decimalZero":
        return f"{n:02d}"
    return str(n)


@dataclass(frozen=True)
class _Level:
    fmt: str  # decimal, bullet, none, lowerLetter, ...
    start: int
    text: str  # Word's label pattern, e.g. "%1.%2."


_DECIMAL = _Level("decimal", 1, "")


class _Numbering:
    """Word's list definitions, and the counters a reader of the document would see."""

    def __init__(self, root: Any) -> None:
        nodes = list(root) if root is not None else []
        abstract: dict[str, dict[int, _Level]] = {}
        for node in nodes:
            if node.tag == _W + "abstractNum":
                abstract[node.get(_W + "abstractNumId", "")] = _levels(node)
        self.nums: dict[str, dict[int, _Level]] = {}
        for node in (n for n in nodes if n.tag == _W + "num"):
            ref = node.find(_W + "abstractNumId")
            levels = dict(abstract.get(ref.get(_W_VAL, "") if ref is not None else "", {}))
            for override in node.iterfind(_W + "lvlOverride"):
                ilvl = as_int(override.get(_W + "ilvl"), 0)
                if (lvl := override.find(_W + "lvl")) is not None:
                    levels[ilvl] = _level(lvl)
                if (start := override.find(_W + "startOverride")) is not None:
                    base = levels.get(ilvl, _DECIMAL)
                    levels[ilvl] = _Level(base.fmt, _start(start.get(_W_VAL)), base.text)
            self.nums[node.get(_W + "numId", "")] = levels
        self.shown: dict[str, list[int | None]] = {}

    def level(self, num_id: str, ilvl: int) -> _Level:
        return self.nums.get(num_id, {}).get(ilvl, _DECIMAL)

    def advance(self, num_id: str, ilvl: int) -> list[int]:
        """Count one item at `ilvl` (deeper levels start again): the numbers of levels
        0..ilvl that its label shows."""
        shown = self.shown.setdefault(num_id, [None] * (MAX_LEVEL + 1))
        for deeper in range(ilvl + 1, MAX_LEVEL + 1):
            shown[deeper] = None
        for upper in range(ilvl):
            if shown[upper] is None:
                shown[upper] = self.level(num_id, upper).start
        last = shown[ilvl]
        shown[ilvl] = self.level(num_id, ilvl).start if last is None else last + 1
        return [n if n is not None else 0 for n in shown[: ilvl + 1]]

    def label(self, num_id: str, ilvl: int, numbers: list[int]) -> str:
        """The label Word shows, e.g. `4.1` for the pattern `%1.%2`."""

        def number(m: re.Match[str]) -> str:
            k = int(m.group(1)) - 1
            return _format_number(numbers[k], self.level(num_id, k).fmt) if k <= ilvl else ""

        return _LABEL.sub(number, self.level(num_id, ilvl).text).strip()


def _start(value: str | None) -> int:
    return max(0, min(as_int(value, 1), 32_767))  # Word's own range


def _levels(node: Any) -> dict[int, _Level]:
    return {as_int(lvl.get(_W + "ilvl"), 0): _level(lvl) for lvl in node.iterfind(_W + "lvl")}


def _level(lvl: Any) -> _Level:
    fmt = lvl.find(_W + "numFmt")
    start = lvl.find(_W + "start")
    text = lvl.find(_W + "lvlText")
    return _Level(
        fmt.get(_W_VAL, "decimal") if fmt is not None else "decimal",
        _start(start.get(_W_VAL) if start is not None else None),
        text.get(_W_VAL, "") if text is not None else "",
    )


@dataclass(frozen=True)
class _Style:
    """What a paragraph style says about structure, resolved along its `basedOn` chain."""

    heading: int | None = None  # 0 for Title, N for Heading N, None for body text
    num_id: str | None = None
    ilvl: int | None = None
    named_list: str | None = None  # "number" or "bullet", from a List Number/Bullet name
    named_level: int = 0  # "List Number 2" is the second level


_PLAIN = _Style()


@dataclass(frozen=True)
class _Item:
    num_id: str
    ilvl: int  # the numbering level
    indent: int  # the level shown: "List Number 2" is indented though its ilvl is 0
    level: _Level
    numbers: list[int]


class _Styles:
    def __init__(self, root: Any) -> None:
        self.nodes: dict[str, Any] = {}
        self.default: str | None = None
        for node in root.iterfind(_W + "style"):
            if node.get(_W + "type", "paragraph") != "paragraph":
                continue
            style_id = node.get(_W + "styleId", "")
            self.nodes.setdefault(style_id, node)
            if self.default is None and node.get(_W + "default") in ("1", "true", "on"):
                self.default = style_id
        self.resolved: dict[str, _Style] = {}

    def of(self, style_id: str | None) -> _Style:
        if style_id is None or style_id not in self.nodes:
            style_id = self.default
        if style_id is None:
            return _PLAIN
        if style_id not in self.resolved:
            self.resolved[style_id] = self._resolve(style_id)
        return self.resolved[style_id]

    def _resolve(self, style_id: str) -> _Style:
        heading: int | None = None
        decided = False  # the nearest style that says anything about headings decides
        num_id: str | None = None
        ilvl: int | None = None
        named: tuple[str, int] | None = None
        seen: set[str] = set()
        current: str | None = style_id
        while current is not None and current in self.nodes and current not in seen:
            seen.add(current)
            node = self.nodes[current]
            name = _val(node.find(_W + "name")).strip().lower()
            ppr = node.find(_W + "pPr")
            if not decided:
                outline = ppr.find(_W + "outlineLvl") if ppr is not None else None
                if name == "title":
                    heading, decided = 0, True
                elif found := _HEADING_NAME.fullmatch(name):
                    heading, decided = int(found.group(1)), True
                elif outline is not None:
                    level = as_int(_val(outline), 9)
                    heading, decided = (level + 1 if 0 <= level < 9 else None), True
            numpr = ppr.find(_W + "numPr") if ppr is not None else None
            if numpr is not None:
                if num_id is None and (node_num := numpr.find(_W + "numId")) is not None:
                    num_id = _val(node_num)
                if ilvl is None and (node_lvl := numpr.find(_W + "ilvl")) is not None:
                    ilvl = as_int(_val(node_lvl), 0)
            if named is None and (listed := _LIST_NAME.fullmatch(name)):
                named = (listed.group(1), int(listed.group(2) or 1) - 1)
            current = _val(node.find(_W + "basedOn")) or None
        return _Style(
            heading,
            num_id,
            ilvl,
            named[0] if named else None,
            named[1] if named else 0,
        )


def _val(node: Any) -> str:
    return str(node.get(_W_VAL, "")) if node is not None else ""


def _blocks(container: Any) -> Iterator[Any]:
    """Paragraphs and tables in document order, through content controls and custom XML."""
    for child in container:
        if child.tag in (_P, _TBL):
            yield child
        elif child.tag in _CONTAINERS:
            yield from _blocks(child)


def _children(parent: Any, tag: str) -> Iterator[Any]:
    """Rows of a table or cells of a row, through content controls around them."""
    for child in parent:
        if child.tag == tag:
            yield child
        elif child.tag in _CONTAINERS:
            yield from _children(child, tag)


def _run_text(node: Any, out: list[str]) -> None:
    """A paragraph's text as a reader sees it: runs, hyperlinks, fields' results, inserted
    revisions; not deleted text, field codes or text boxes."""
    for child in node:
        tag = child.tag
        if tag == _W + "t":
            out.append(child.text or "")
        elif tag == _W + "tab" or tag == _W + "ptab":
            out.append("\t")
        elif tag == _W + "br":
            out.append(" " if child.get(_W + "type") in ("page", "column") else "\n")
        elif tag == _W + "cr":
            out.append("\n")
        elif tag == _W + "noBreakHyphen":
            out.append("-")
        elif isinstance(tag, str) and tag not in _NOT_TEXT:
            _run_text(child, out)


def _paragraph_text(p: Any) -> str:
    out: list[str] = []
    _run_text(p, out)
    return "".join(out)


def _flat_text(container: Any) -> str:
    """All the text of a table cell on one line, nested tables included."""
    parts: list[str] = []
    for block in _blocks(container):
        if block.tag == _P:
            parts.append(_paragraph_text(block))
        else:
            parts.extend(
                _flat_text(tc) for tr in _children(block, _TR) for tc in _children(tr, _TC)
            )
    return " ".join(part.strip() for part in parts if part.strip())


class _WordDocument:
    def __init__(self, document: Any, limits: Limits, what: str) -> None:
        body = document.element.body
        self.body = body if body is not None else ()  # a document may have no body at all
        self.styles = _Styles(document.styles.element)
        self.numbering = _Numbering(_numbering(document))
        self.out = Writer(limits, what)
        self.cells = Cells(limits, what)
        self.lists = Lists()

    def render(self) -> str:
        # Title is level 1 when the document has one; its headings follow below it.
        shift = 1 if any(self._style(p).heading == 0 for p in self._paragraphs()) else 0
        for block in _blocks(self.body):
            if block.tag == _TBL:
                self.lists.close()
                grid = self._grid(block)
                if grid and grid_text(grid):
                    self.out.add(table(grid, max(len(row) for row in grid)))
            else:
                self._paragraph(block, shift)
        return self.out.text()

    def _paragraphs(self) -> Iterator[Any]:
        return (b for b in _blocks(self.body) if b.tag == _P)

    def _style(self, p: Any) -> _Style:
        ppr = p.find(_W + "pPr")
        style = self.styles.of(_val(ppr.find(_W + "pStyle")) or None if ppr is not None else None)
        if ppr is None:
            return style
        outline = ppr.find(_W + "outlineLvl")
        numpr = ppr.find(_W + "numPr")
        if outline is None and numpr is None:
            return style
        heading = style.heading
        if outline is not None:
            level = as_int(_val(outline), 9)
            heading = level + 1 if 0 <= level < 9 else None
        num_id, ilvl = style.num_id, style.ilvl
        if numpr is not None:
            if (node_num := numpr.find(_W + "numId")) is not None:
                num_id = _val(node_num)
            if (node_lvl := numpr.find(_W + "ilvl")) is not None:
                ilvl = as_int(_val(node_lvl), 0)
        return _Style(heading, num_id, ilvl, style.named_list, style.named_level)

    def _paragraph(self, p: Any, shift: int) -> None:
        style = self._style(p)
        item = self._item(style)  # counted even when empty: Word numbers empty items too
        text = _paragraph_text(p)
        if not text.strip():
            return
        if style.heading is not None:
            self.lists.close()
            label = ""
            if item is not None and item.level.fmt not in ("bullet", "none"):
                label = self.numbering.label(item.num_id, item.ilvl, item.numbers)
            title = f"{label} {text}" if label else text
            self.out.add(atx_heading(style.heading + shift if style.heading else 1, title))
        elif item is not None and item.level.fmt != "none":
            marker = "-" if item.level.fmt == "bullet" else f"{item.numbers[-1]}."
            self.out.add(self.lists.item(item.indent, marker, text))
        else:
            self.lists.close()
            self.out.add("\n".join(text_lines(text)))

    def _item(self, style: _Style) -> _Item | None:
        """The list item a paragraph is, numbered as Word shows it; None for body text."""
        if style.num_id == "0":  # numbering switched off on the paragraph
            return None
        if style.num_id is not None:
            num_id = style.num_id
        elif style.named_list is not None:  # a List Number/Bullet style without numbering
            num_id = "~" + style.named_list
        else:
            return None
        ilvl = max(0, min(style.ilvl or 0, MAX_LEVEL))
        indent = style.ilvl if style.ilvl is not None else style.named_level
        numbers = self.numbering.advance(num_id, ilvl)
        level = self.numbering.level(num_id, ilvl)
        if style.num_id is None and style.named_list == "bullet":
            level = _Level("bullet", 1, "")
        return _Item(num_id, ilvl, max(0, min(indent, MAX_LEVEL)), level, numbers)

    def _grid(self, tbl: Any) -> list[list[str]]:
        """The table as rows of grid cells; merged cells repeat their text."""
        grid: list[list[str]] = []
        for tr in _children(tbl, _TR):
            trpr = tr.find(_W + "trPr")
            before = trpr.find(_W + "gridBefore") if trpr is not None else None
            row = [""] * max(0, min(as_int(_val(before), 0), _MAX_SPAN))
            for tc in _children(tr, _TC):
                tcpr = tc.find(_W + "tcPr")
                span = max(1, min(as_int(_val(_find(tcpr, "gridSpan")), 1), _MAX_SPAN))
                vmerge = _find(tcpr, "vMerge")
                hmerge = _find(tcpr, "hMerge")
                col = len(row)
                if vmerge is not None and _val(vmerge) in ("", "continue") and grid:
                    above = grid[-1]
                    text = above[col] if col < len(above) else ""
                elif hmerge is not None and _val(hmerge) in ("", "continue") and row:
                    text = row[-1]
                else:
                    text = _flat_text(tc)
                row.extend([text] * span)
            self.cells.add(len(row))
            grid.append(row)
        return grid


def _numbering(document: Any) -> Any:
    """The numbering definitions' XML, or None for a document without lists."""
    try:
        part = document.part.part_related_by(RT.NUMBERING)
    except KeyError:
        return None
    return getattr(part, "element", None)


def _find(node: Any, tag: str) -> Any:
    return node.find(_W + tag) if node is not None else None


class DocxExtractor:
    """Word documents (.docx) through python-docx."""

    name = "docx"
    version = "1.0.0"
    suffixes: tuple[str, ...] = (".docx",)
    binary = True

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        what = "the Word document"
        check_file(data, limits, what, ".docx")
        with reading(what):
            document = docx.Document(BytesIO(data))
            text = _WordDocument(document, limits, what).render()
        return Extracted(check_text(text, limits, what))


DOCX = DocxExtractor()
