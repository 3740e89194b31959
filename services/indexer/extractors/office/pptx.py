"""PowerPoint presentations (.pptx) as canonical Markdown, located by slide.

One `## Slide N: <title>` section per slide, the title taken from the title placeholder
(else the slide's first line of text); then its text frames top to bottom, left to right,
bullets as `- ` items by level, tables as pipe tables, and the speaker notes last, as a
`> Notes: ` block quote. `pages` gives each slide's heading offset, so chunks are located
by slide. The notes are a chunk of their own (so a search finds them) and the context of
every other chunk of their slide (so a reader of a slide's bullet sees what the speaker
said of it); the context is cut at `NOTES_CONTEXT` characters.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from typing import Any

import pptx

from govindex.core.errors import TooLarge
from indexer.extractors.base import Extracted, Limits, Page, Region, check_text
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

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_PML = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_TITLES = frozenset(("title", "ctrTitle"))
NOTES_CONTEXT = 2_000  # characters of a slide's notes its chunks carry as context
# Shapes in a slide's tree, as PowerPoint nests them; pictures, connectors and the content
# parts hold no text of the slide's.
_SHAPES = frozenset((_PML + "sp", _PML + "grpSp", _PML + "graphicFrame"))
# The master placeholder a layout placeholder of each type inherits from, as PowerPoint has it.
_MASTER_TYPE = {"ctrTitle": "title", "title": "title", "dt": "dt", "ftr": "ftr", "sldNum": "sldNum"}


def _a_text(p: Any) -> str:
    """A DrawingML paragraph's text: runs and fields, line breaks as newlines."""
    out = []
    for child in p:
        if child.tag in (_A + "r", _A + "fld"):
            t = child.find(_A + "t")
            out.append((t.text or "") if t is not None else "")
        elif child.tag == _A + "br":
            out.append("\n")
    return "".join(out)


def _placeholder(element: Any) -> tuple[str, str] | None:
    """A shape's placeholder (type, idx), or None when it is not one."""
    for nv in element:
        nvpr = nv.find(_PML + "nvPr")
        if nvpr is not None:
            ph = nvpr.find(_PML + "ph")
            return (ph.get("type", "obj"), ph.get("idx", "0")) if ph is not None else None
    return None


def _placeholders(tree: Any) -> Iterator[tuple[tuple[str, str], Any]]:
    for sp in tree.iter(_PML + "sp"):
        ph = _placeholder(sp)
        if ph is not None:
            yield ph, sp


def _list_style(sp: Any) -> Any:
    body = sp.find(_PML + "txBody") if sp is not None else None
    return body.find(_A + "lstStyle") if body is not None else None


def _offset(element: Any) -> tuple[int, int] | None:
    """A shape's (top, left) as its XML gives it, or None when it inherits its place."""
    for props in (_PML + "spPr", _PML + "grpSpPr", None):
        holder = element.find(props) if props else element
        xfrm = holder.find((_A if props else _PML) + "xfrm") if holder is not None else None
        off = xfrm.find(_A + "off") if xfrm is not None else None
        if off is not None:
            return as_int(off.get("y"), 0), as_int(off.get("x"), 0)
    return None


@dataclass(frozen=True)
class _Layout:
    """What a slide's placeholders inherit: the layout's placeholders by idx, the master's
    by type, and the master's text styles."""

    by_idx: dict[str, Any]
    kinds: dict[str, str]  # idx -> type, where the slide's placeholder does not say
    by_type: dict[str, Any]
    styles: Any

    @classmethod
    def of(cls, slide: Any) -> _Layout:
        layout = slide.slide_layout
        master = layout.slide_master
        by_idx: dict[str, Any] = {}
        kinds: dict[str, str] = {}
        for (kind, idx), sp in _placeholders(layout.element):
            by_idx.setdefault(idx, sp)
            kinds.setdefault(idx, kind)
        by_type: dict[str, Any] = {}
        for (kind, _), sp in _placeholders(master.element):
            by_type.setdefault(kind, sp)
        return cls(by_idx, kinds, by_type, master.element.find(_PML + "txStyles"))

    def base(self, ph: tuple[str, str]) -> list[Any]:
        """The layout's then the master's placeholder a slide placeholder inherits from."""
        kind, idx = ph
        kind = self.kinds.get(idx, kind) if kind == "obj" else kind
        return [self.by_idx.get(idx), self.by_type.get(_MASTER_TYPE.get(kind, "body"))]

    def chain(self, element: Any) -> list[Any]:
        """The list styles a shape's paragraphs inherit from, nearest first."""
        chain = [_list_style(element)]
        ph = _placeholder(element)
        if ph is None:
            return chain
        chain.extend(_list_style(sp) for sp in self.base(ph))
        if self.styles is not None:
            kind = self.kinds.get(ph[1], ph[0]) if ph[0] == "obj" else ph[0]
            chain.append(
                self.styles.find(_PML + ("titleStyle" if kind in _TITLES else "bodyStyle"))
            )
        return chain

    def offset(self, element: Any) -> tuple[int, int]:
        own = _offset(element)
        if own is not None:
            return own
        ph = _placeholder(element)
        for base in self.base(ph) if ph is not None else ():
            inherited = _offset(base) if base is not None else None
            if inherited is not None:
                return inherited
        return (0, 0)


class _Presentation:
    def __init__(self, presentation: Any, limits: Limits, what: str) -> None:
        self.presentation = presentation
        self.limits = limits
        self.what = what
        self.out = Writer(limits, what)
        self.cells = Cells(limits, what)
        self.first_line = ""

    def render(self) -> Extracted:
        slides = self.presentation.slides
        if len(slides) > self.limits.max_pages:
            raise TooLarge(
                f"{self.what} has {len(slides):,} slides, over the "
                f"{self.limits.max_pages:,}-slide limit; split it"
            )
        pages = []
        regions = []
        for number, slide in enumerate(slides, 1):
            tree = slide.element.find(f"{_PML}cSld/{_PML}spTree")
            title_element = next(
                (sp for (kind, _), sp in _placeholders(tree) if kind in _TITLES), None
            )
            self.first_line = ""
            blocks = (
                self._shapes(tree, _Layout.of(slide), title_element) if tree is not None else []
            )
            title = ""
            if title_element is not None:
                title = " ".join(
                    t for p in title_element.iter(_A + "p") if (t := _a_text(p)).strip()
                )
            title = title.strip() or self.first_line
            heading = f"Slide {number}: {title}" if title else f"Slide {number}"
            start = self.out.add(atx_heading(2, heading))
            pages.append(Page(start, number))
            for block in blocks:
                self.out.add(block)
            lines = self._notes(slide)
            if lines:
                end = self.out.size
                self.out.add("\n".join(["> Notes: " + lines[0], *("> " + ln for ln in lines[1:])]))
                regions.append(Region(start, end, "markdown", _context(lines)))
        text = check_text(self.out.text(), self.limits, self.what)
        return Extracted(text, pages=tuple(pages), regions=tuple(regions))

    def _shapes(self, tree: Any, layout: _Layout, skip: Any) -> list[str]:
        """Blocks of a slide's (or group's) shapes, top to bottom, then left to right."""
        shapes = [child for child in tree if child.tag in _SHAPES]
        ordered = sorted(enumerate(shapes), key=lambda s: (layout.offset(s[1]), s[0]))
        blocks: list[str] = []
        for _, shape in ordered:
            if shape.tag == _PML + "grpSp":
                blocks.extend(self._shapes(shape, layout, skip))
            elif shape.tag == _PML + "graphicFrame":
                tbl = shape.find(f"{_A}graphic/{_A}graphicData/{_A}tbl")
                grid = self._grid(tbl) if tbl is not None else []
                if grid and grid_text(grid):
                    blocks.append(table(grid, max(len(row) for row in grid)))
            elif shape.tag == _PML + "sp" and shape is not skip:
                blocks.extend(self._text_frame(shape, layout))
        return blocks

    def _text_frame(self, element: Any, layout: _Layout) -> list[str]:
        body = element.find(_PML + "txBody")
        if body is None:
            return []
        chain = layout.chain(element)
        lists = Lists()
        numbers: dict[int, int] = {}
        blocks: list[str] = []
        for p in body.iterfind(_A + "p"):
            text = _a_text(p)
            lines = text_lines(text)
            if not lines:
                continue
            ppr = p.find(_A + "pPr")
            level = max(0, min(as_int(ppr.get("lvl") if ppr is not None else None, 0), MAX_LEVEL))
            bullet = _bullet(ppr, level, chain)
            for deeper in [n for n in numbers if n > level or (n == level and not bullet)]:
                del numbers[deeper]
            self.first_line = self.first_line or lines[0]
            if bullet is None:
                lists.close()
                blocks.append("\n".join(lines))
                continue
            kind, start = bullet
            if kind == "number":
                numbers[level] = numbers[level] + 1 if level in numbers else start
                marker = f"{numbers[level]}."
            else:
                numbers.pop(level, None)
                marker = "-"
            blocks.append(lists.item(level, marker, text))
        return blocks

    def _grid(self, tbl: Any) -> list[list[str]]:
        """The table as rows of grid cells; merged cells repeat their text."""
        grid: list[list[str]] = []
        for tr in tbl.iterfind(_A + "tr"):
            row: list[str] = []
            for tc in tr.iterfind(_A + "tc"):
                col = len(row)
                if tc.get("vMerge") in ("1", "true") and grid:
                    text = grid[-1][col] if col < len(grid[-1]) else ""
                elif tc.get("hMerge") in ("1", "true") and row:
                    text = row[-1]
                else:
                    text = " ".join(
                        t.strip() for p in tc.iter(_A + "p") if (t := _a_text(p)).strip()
                    )
                row.append(text)
            self.cells.add(len(row))
            grid.append(row)
        return grid

    def _notes(self, slide: Any) -> list[str]:
        """The speaker notes' lines (none when the slide has no notes)."""
        if not slide.has_notes_slide:
            return []
        frame = slide.notes_slide.notes_text_frame
        return text_lines(frame.text.replace("\v", "\n")) if frame is not None else []


def _context(lines: list[str]) -> str:
    """The notes as the context of their slide's chunks, cut at `NOTES_CONTEXT`."""
    context = "Notes: " + " ".join(lines)
    return context if len(context) <= NOTES_CONTEXT else context[: NOTES_CONTEXT - 1] + "…"


def _bullet(ppr: Any, level: int, chain: list[Any]) -> tuple[str, int] | None:
    """("bullet", 1), ("number", start) or None: the paragraph's own properties decide,
    else the nearest list style that says."""
    candidates = [ppr, *(s.find(f"{_A}lvl{level + 1}pPr") for s in chain if s is not None)]
    for props in candidates:
        if props is None:
            continue
        for child in props:
            if child.tag == _A + "buNone":
                return None
            if child.tag == _A + "buAutoNum":
                return ("number", max(1, as_int(child.get("startAt"), 1)))
            if child.tag in (_A + "buChar", _A + "buBlip"):
                return ("bullet", 1)
    return None


class PptxExtractor:
    """PowerPoint presentations (.pptx) through python-pptx."""

    name = "pptx"
    version = "1.1.0"
    suffixes: tuple[str, ...] = (".pptx",)
    binary = True

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        what = "the presentation"
        check_file(data, limits, what, ".pptx")
        with reading(what):
            presentation = pptx.Presentation(BytesIO(data))
            return _Presentation(presentation, limits, what).render()


PPTX = PptxExtractor()
