"""Ruled tables on a PDF page, rebuilt as pipe tables where the ruling makes them certain.

A table drawn with its cell borders (as Word, LibreOffice or reportlab's grid styles draw
them) says where its cells are: the rulings are path objects, line segments or thin
rectangles, or the edges of stroked and filled rectangles. `rulings` reads them from the
page, `grids` finds the lattices they form, and `tables` sorts a page's text lines into
their cells. Only a complete lattice is taken: every row edge runs the whole width and
every column edge the whole height, with at least two rows and two columns, so a box
around a note, a rule under a heading, a table with merged cells or one ruled only by
horizontal lines (no column edges) is left as text. A grid is rebuilt only when each text
line in it sits inside one row (a line PDFium joined over rows at a hyphen is cut back
there), and a line that runs over column edges is cut at them by where its words' glyphs
are; a glyph printed across an edge leaves the grid as text.

Reading the ruling is bounded, since a page can hold any number of paths: a page with more
than `MAX_OBJECTS` objects, or paths of more than `MAX_SEGMENTS` segments, is not searched,
and neither is one whose rulings cross more than `MAX_CHECKS` times; of a page's grids
the `MAX_GRIDS` largest are looked at.
"""

from __future__ import annotations

import bisect
import ctypes
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import pypdfium2.raw as pdfium_c  # type: ignore[import-untyped, unused-ignore]

from indexer.extractors.base import Box
from indexer.extractors.office.common import table

MAX_OBJECTS = 5_000  # page objects (form contents included) read for rulings on one page
MAX_SEGMENTS = 20_000  # path segments read on one page
MAX_CHECKS = 200_000  # crossings of rulings tested on one page
MAX_GRIDS = 50  # grids on one page looked at for a table, the largest first
_MAX_DEPTH = 8  # forms nested in forms
_THIN = 4.0  # a path no wider than this across, in points, is a line along its length
_NEAR = 2.5  # rulings this close are one; a ruling ending this close to another meets it
_FLAT = 0.5  # a segment whose ends differ less than this across runs along an axis
_OVER = 0.5  # how far a glyph may reach over a column edge
_GAP = 6.0  # a band narrower than this holds no text: the space in a double rule
_WORD = re.compile("[^\\s\ufffe]+")  # glyphs between spaces (U+FFFE: PDFium's hyphen mark)

Matrix = tuple[float, float, float, float, float, float]
_IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class Rule:
    """A ruling: horizontal at height `at` from x `lo` to `hi`, or vertical at x `at`
    from y `lo` to `hi` (page space, points, y upwards)."""

    vertical: bool
    at: float
    lo: float
    hi: float


@dataclass(frozen=True, slots=True)
class Grid:
    """A complete lattice: column edges left to right, row edges top to bottom."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]

    def overlaps(self, other: Grid) -> bool:
        return (
            self.xs[0] < other.xs[-1]
            and other.xs[0] < self.xs[-1]
            and self.ys[-1] < other.ys[0]
            and other.ys[-1] < self.ys[0]
        )


class Line(Protocol):
    """What a table needs of a text line (`pdf._Line`)."""

    @property
    def text(self) -> str: ...
    @property
    def size(self) -> float: ...
    @property
    def x0(self) -> float: ...
    @property
    def x1(self) -> float: ...
    @property
    def y0(self) -> float: ...
    @property
    def y1(self) -> float: ...
    @property
    def placed(self) -> bool: ...
    @property
    def start(self) -> int: ...  # where its text is in the page's text
    @property
    def end(self) -> int: ...


L = TypeVar("L", bound=Line)


@dataclass(frozen=True, slots=True)
class Text:
    """A page's text as PDFium reads it, with what a cell's text is made with: the left
    and right edges of the glyph at an index of it, and its size, origin and baseline
    (either None where PDFium has none), how a piece of a line is cleaned and how a
    cell's lines are joined (as `pdf` does a paragraph's)."""

    raw: str
    edges: Callable[[int], tuple[float, float] | None]
    glyph: Callable[[int], tuple[float, float, float] | None]
    clean: Callable[[str], str]
    join: Callable[[list[str]], str]


@dataclass(frozen=True, slots=True)
class Table:
    """A rebuilt table: its cells row by row (the first row is the header), the grid it
    was drawn in, and the page's lines it holds, by index, in reading order."""

    rows: tuple[tuple[str, ...], ...]
    grid: Grid
    lines: tuple[int, ...]

    @property
    def text(self) -> str:
        return table(self.rows, len(self.rows[0]))

    def box(self, start: int, end: int, page: int, height: float) -> Box:
        """Where the grid was printed, from the page's top-left corner, in points."""

        def down(y: float) -> float:
            return round(min(height, max(0.0, height - y)), 1)

        xs, ys = self.grid.xs, self.grid.ys
        return Box(
            start, end, page, round(max(0.0, xs[0]), 1), down(ys[0]), round(xs[-1], 1), down(ys[-1])
        )


def rulings(page: Any) -> list[Rule] | None:
    """The rulings drawn on a page (its raw PDFium handle), or None when the page holds
    too many objects or path segments to look for tables on."""
    count = int(pdfium_c.FPDFPage_CountObjects(page))
    if count > MAX_OBJECTS:
        return None
    reader = _Reader()
    if not reader.objects(
        [pdfium_c.FPDFPage_GetObject(page, k) for k in range(count)], _IDENTITY, 0
    ):
        return None
    return reader.rules


class _Reader:
    """Walks a page's objects (into forms), keeping the rulings of visible paths."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.seen = 0
        self.segments = 0
        self.box = [ctypes.c_float() for _ in range(4)]
        self.point = (ctypes.c_float(), ctypes.c_float())
        self.fill = ctypes.c_int()
        self.stroke = ctypes.c_int()
        self.matrix = pdfium_c.FS_MATRIX()

    def objects(self, handles: list[Any], outer: Matrix, depth: int) -> bool:
        """Read `handles` (objects placed by `outer`); False when past a bound."""
        for obj in handles:
            self.seen += 1
            if self.seen > MAX_OBJECTS:
                return False
            kind = pdfium_c.FPDFPageObj_GetType(obj)
            if kind == pdfium_c.FPDF_PAGEOBJ_PATH:
                if not self.path(obj, outer):
                    return False
            elif kind == pdfium_c.FPDF_PAGEOBJ_FORM and depth < _MAX_DEPTH:
                inner = int(pdfium_c.FPDFFormObj_CountObjects(obj))
                if inner < 0 or self.seen + inner > MAX_OBJECTS:
                    return False
                placed = _compose(outer, self.matrix_of(obj))
                kids = [pdfium_c.FPDFFormObj_GetObject(obj, k) for k in range(inner)]
                if not self.objects(kids, placed, depth + 1):
                    return False
        return True

    def matrix_of(self, obj: Any) -> Matrix:
        m = self.matrix
        if not pdfium_c.FPDFPageObj_GetMatrix(obj, m):
            return _IDENTITY
        return (m.a, m.b, m.c, m.d, m.e, m.f)

    def path(self, obj: Any, outer: Matrix) -> bool:
        if not pdfium_c.FPDFPath_GetDrawMode(obj, self.fill, self.stroke):
            return True
        if self.fill.value == pdfium_c.FPDF_FILLMODE_NONE and not self.stroke.value:
            return True  # drawn with neither fill nor stroke: invisible
        left, bottom, right, top = self.box
        if not pdfium_c.FPDFPageObj_GetBounds(obj, left, bottom, right, top):
            return True
        x0, y0, x1, y1 = _rect(outer, left.value, bottom.value, right.value, top.value)
        if y1 - y0 <= _THIN and x1 - x0 > _THIN:  # a line, or a rectangle as thin as one
            self.rules.append(Rule(False, (y0 + y1) / 2, x0, x1))
        elif x1 - x0 <= _THIN and y1 - y0 > _THIN:
            self.rules.append(Rule(True, (x0 + x1) / 2, y0, y1))
        elif x1 - x0 > _THIN and y1 - y0 > _THIN:
            return self.edges(obj, _compose(outer, self.matrix_of(obj)))
        return True

    def edges(self, obj: Any, matrix: Matrix) -> bool:
        """The straight, axis-aligned edges of a larger path (a rectangle, a grid drawn as
        one path), from its segments."""
        count = int(pdfium_c.FPDFPath_CountSegments(obj))
        self.segments += max(count, 0)
        if self.segments > MAX_SEGMENTS:
            return False
        x, y = self.point
        start = here = (0.0, 0.0)
        for k in range(count):
            segment = pdfium_c.FPDFPath_GetPathSegment(obj, k)
            if not segment or not pdfium_c.FPDFPathSegment_GetPoint(segment, x, y):
                continue
            point = _apply(matrix, x.value, y.value)
            kind = pdfium_c.FPDFPathSegment_GetType(segment)
            if kind == pdfium_c.FPDF_SEGMENT_MOVETO:
                start = point
            elif kind == pdfium_c.FPDF_SEGMENT_LINETO:
                self.edge(here, point)
            if pdfium_c.FPDFPathSegment_GetClose(segment):
                self.edge(point, start)
                point = start
            here = point
        return True

    def edge(self, a: tuple[float, float], b: tuple[float, float]) -> None:
        (ax, ay), (bx, by) = a, b
        if abs(ay - by) < _FLAT and abs(ax - bx) > _THIN:
            self.rules.append(Rule(False, (ay + by) / 2, min(ax, bx), max(ax, bx)))
        elif abs(ax - bx) < _FLAT and abs(ay - by) > _THIN:
            self.rules.append(Rule(True, (ax + bx) / 2, min(ay, by), max(ay, by)))


def _compose(outer: Matrix, inner: Matrix) -> Matrix:
    """The matrix that applies `inner`, then `outer`."""
    a, b, c, d, e, f = inner
    p, q, r, s, t, u = outer
    return (
        a * p + b * r,
        a * q + b * s,
        c * p + d * r,
        c * q + d * s,
        e * p + f * r + t,
        e * q + f * s + u,
    )


def _apply(m: Matrix, x: float, y: float) -> tuple[float, float]:
    return m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5]


def _rect(
    m: Matrix, x0: float, y0: float, x1: float, y1: float
) -> tuple[float, float, float, float]:
    if m == _IDENTITY:
        return x0, y0, x1, y1
    corners = [_apply(m, x, y) for x in (x0, x1) for y in (y0, y1)]
    xs, ys = [p[0] for p in corners], [p[1] for p in corners]
    return min(xs), min(ys), max(xs), max(ys)


def grids(rules: Sequence[Rule]) -> list[Grid]:
    """The complete lattices the rulings form, or none when they cross too often to
    look at: rulings that meet are one figure, and a figure is a grid when each of its
    row edges spans its whole width and each column edge its whole height."""
    across = _merged([r for r in rules if not r.vertical])
    down = _merged([r for r in rules if r.vertical])
    if len(across) < 3 or len(down) < 3:
        return []
    figures = _figures(across, down)
    if figures is None:
        return []
    found = [_lattice(h, v) for h, v in figures if len(h) >= 3 and len(v) >= 3]
    return [grid for grid in found if grid is not None]


def _merged(rules: list[Rule]) -> list[Rule]:
    """Rulings at nearly one position put at one position, and those that overlap or
    nearly touch along it joined (a border drawn cell by cell is one ruling)."""
    out: list[Rule] = []
    rules.sort(key=lambda r: r.at)
    k = 0
    while k < len(rules):
        end = k + 1
        while end < len(rules) and rules[end].at - rules[end - 1].at <= _NEAR:
            end += 1
        group = sorted(rules[k:end], key=lambda r: r.lo)
        at = round((rules[k].at + rules[end - 1].at) / 2, 2)
        lo, hi = group[0].lo, group[0].hi
        for rule in group[1:]:
            if rule.lo <= hi + _NEAR:
                hi = max(hi, rule.hi)
            else:
                out.append(Rule(group[0].vertical, at, lo, hi))
                lo, hi = rule.lo, rule.hi
        out.append(Rule(group[0].vertical, at, lo, hi))
        k = end
    return out


def _figures(across: list[Rule], down: list[Rule]) -> list[tuple[list[Rule], list[Rule]]] | None:
    """The rulings grouped by which meet which (horizontal, vertical), or None past
    `MAX_CHECKS` tests."""
    down = sorted(down, key=lambda r: r.at)
    at = [r.at for r in down]
    parent = list(range(len(across) + len(down)))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    checks = 0
    for h, rule in enumerate(across):
        lo = bisect.bisect_left(at, rule.lo - _NEAR)
        hi = bisect.bisect_right(at, rule.hi + _NEAR)
        checks += hi - lo
        if checks > MAX_CHECKS:
            return None
        for v in range(lo, hi):
            if down[v].lo - _NEAR <= rule.at <= down[v].hi + _NEAR:
                parent[root(h)] = root(len(across) + v)
    groups: dict[int, tuple[list[Rule], list[Rule]]] = {}
    for k in range(len(parent)):
        horizontal, vertical = groups.setdefault(root(k), ([], []))
        if k < len(across):
            horizontal.append(across[k])
        else:
            vertical.append(down[k - len(across)])
    return list(groups.values())


def _lattice(across: list[Rule], down: list[Rule]) -> Grid | None:
    xs = sorted({r.at for r in down})
    ys = sorted({r.at for r in across}, reverse=True)
    left, right, top, bottom = xs[0], xs[-1], ys[0], ys[-1]
    if not all(
        any(r.at == x and r.lo <= bottom + _NEAR and r.hi >= top - _NEAR for r in down) for x in xs
    ) or not all(
        any(r.at == y and r.lo <= left + _NEAR and r.hi >= right - _NEAR for r in across)
        for y in ys
    ):
        return None
    return Grid(tuple(xs), tuple(ys))


def tables(found: Sequence[Grid], lines: Sequence[Line], text: Text) -> list[Table]:
    """The tables the grids hold of a page's lines, in reading order. Where grids overlap
    the larger is taken (a table inside a table's cell is text of that cell); the
    `MAX_GRIDS` largest are looked at, each at the lines whose baselines reach it."""
    placed = sorted((min(ln.y0, ln.y1), k) for k, ln in enumerate(lines) if ln.placed)
    lows = [low for low, _ in placed]
    reach = max((abs(ln.y1 - ln.y0) + ln.size for ln in lines if ln.placed), default=0.0)
    taken: list[Table] = []
    for grid in sorted(found, key=_area, reverse=True)[:MAX_GRIDS]:
        if any(grid.overlaps(t.grid) for t in taken):
            continue
        lo = bisect.bisect_left(lows, grid.ys[-1] - reach)
        near = sorted(k for _, k in placed[lo : bisect.bisect_left(lows, grid.ys[0])])
        rebuilt = _fill(grid, lines, near, text)
        if rebuilt is not None:
            taken.append(rebuilt)
    return sorted(taken, key=lambda t: t.lines[0])


def _area(grid: Grid) -> float:
    return (grid.xs[-1] - grid.xs[0]) * (grid.ys[0] - grid.ys[-1])


def placed(
    lines: list[L], found: Sequence[Table], line: Callable[[Table, tuple[L, ...]], L]
) -> list[L]:
    """A page's lines with each table's lines replaced by the table where the first of
    them was, as `line` makes it of the table and its lines."""
    if not found:
        return lines
    held = {k for t in found for k in t.lines}
    first = {t.lines[0]: t for t in found}
    return [
        line(first[k], tuple(lines[j] for j in first[k].lines)) if k in first else kept
        for k, kept in enumerate(lines)
        if k not in held or k in first
    ]


def _fill(grid: Grid, lines: Sequence[Line], near: list[int], text: Text) -> Table | None:
    """The grid's table of the lines (`near`, by index, in order, those that may be in
    it), or None when a line in it is not inside one row and one cell (or split at a
    column edge, not across one), or fewer than two cells hold text."""
    xs, ys = grid.xs, grid.ys
    columns = len(xs) - 1
    cells: list[list[list[tuple[float, float, str]]]] = [
        [[] for _ in range(columns)] for _ in range(len(ys) - 1)
    ]
    held: list[int] = []
    for k in near:
        line = lines[k]
        low, high = min(line.y0, line.y1), max(line.y0, line.y1)
        left, right = min(line.x0, line.x1), max(line.x0, line.x1)
        middle = high + 0.5 * line.size  # halfway up its lower-case letters
        if middle <= ys[-1] or low >= ys[0] or right <= xs[0] + _NEAR or left >= xs[-1] - _NEAR:
            continue  # outside the grid
        if left < xs[0] - _NEAR or right > xs[-1] + _NEAR:
            return None
        first, last = _column(xs, left + _NEAR), _column(xs, right - _NEAR)
        row = _row(ys, low, middle)
        if row is not None and first == last:
            cells[row][first].append((line.y0, left, line.text))
        elif row is not None:
            pieces = _split(xs, line.start, line.end, left, text)
            if pieces is None:
                return None
            for column, x, piece in pieces:
                cells[row][column].append((line.y0, x, piece))
        elif not _unjoin(xs, ys, line, text, cells):
            return None
        held.append(k)
    texts = [[_cell(parts, text.join) for parts in row] for row in cells]
    rows = [k for k, row in enumerate(texts) if any(row) or ys[k] - ys[k + 1] >= _GAP]
    kept = [j for j in range(columns) if any(row[j] for row in texts) or xs[j + 1] - xs[j] >= _GAP]
    if len(rows) < 2 or len(kept) < 2 or sum(1 for row in texts for cell in row if cell) < 2:
        return None
    return Table(tuple(tuple(texts[i][j] for j in kept) for i in rows), grid, tuple(held))


def _row(ys: tuple[float, ...], low: float, middle: float) -> int | None:
    """The row a line is printed in: its baselines above the row's lower edge and its
    letters' middle below the upper edge; None when it sits across an edge."""
    for k in range(len(ys) - 1):
        if ys[k + 1] - 1.0 <= low < ys[k]:
            return k if middle <= ys[k] + 1.0 else None
    return None


def _column(xs: tuple[float, ...], x: float) -> int:
    return min(max(bisect.bisect_right(xs, x) - 1, 0), len(xs) - 2)


def _unjoin(
    xs: tuple[float, ...],
    ys: tuple[float, ...],
    line: Line,
    text: Text,
    cells: list[list[list[tuple[float, float, str]]]],
) -> bool:
    """Put in its cells a line over rows that PDFium joined at hyphens (a cell ending in
    `a-` above the next row's text): each part in the row of its first glyph's baseline.
    False when the line is not that, or a part is not inside a row."""
    cuts = [line.start]
    cuts.extend(k + 1 for k in range(line.start, line.end - 1) if text.raw[k] == "\ufffe")
    if len(cuts) < 2:
        return False
    for start, end in zip(cuts, [*cuts[1:], line.end], strict=True):
        part = text.raw[start:end]
        first = start + len(part) - len(part.lstrip())  # its first glyph
        glyph, edges = text.glyph(first), text.edges(first)
        if glyph is None or edges is None:
            return False
        size, _, y = glyph
        row = _row(ys, y, y + 0.5 * size)
        pieces = _split(xs, start, end, edges[0], text)
        if row is None or pieces is None:
            return False
        for column, x, piece in pieces:
            cells[row][column].append((y, x, piece))
    return True


def _split(
    xs: tuple[float, ...], start: int, end: int, left: float, text: Text
) -> list[tuple[int, float, str]] | None:
    """Text printed over several cells (`start` to `end` of the page's text, from x
    `left`), cut at the column edges by where its words are (the boxes of a word's first
    and last glyphs; of each of its glyphs when it reaches over an edge, as cells' texts
    run together without a space). None when a glyph lies across an edge. Each piece: its
    column, the left of its first glyph, its text."""
    inner = xs[1:-1]

    def over(left: float, right: float) -> bool:
        edge = bisect.bisect_left(inner, left + _OVER)
        return edge < len(inner) and inner[edge] < right - _OVER

    runs: list[tuple[int, float, list[str]]] = [(_column(xs, left + _NEAR), left, [])]
    at = start
    for word in _WORD.finditer(text.raw, start, end):
        runs[-1][2].append(text.raw[at : word.start()])  # the spaces before it
        first, last = text.edges(word.start()), text.edges(word.end() - 1)
        glyphs: list[tuple[str, tuple[float, float] | None]] = []
        if first is not None and last is not None:
            lo, hi = min(first[0], last[0]), max(first[1], last[1])
            if not over(lo, hi):
                glyphs = [(word.group(), (lo, hi))]
        if not glyphs:
            glyphs = [(ch, text.edges(k)) for k, ch in enumerate(word.group(), word.start())]
        for piece, box in glyphs:
            if box is not None:
                if over(*box):
                    return None
                column = _column(xs, (box[0] + box[1]) / 2)
                if column != runs[-1][0]:
                    runs.append((column, box[0], []))
            runs[-1][2].append(piece)
        at = word.end()
    runs[-1][2].append(text.raw[at:end])  # and after the last word (a hyphen mark)
    pieces = [(column, x, text.clean("".join(parts))) for column, x, parts in runs]
    return [piece for piece in pieces if piece[2]]


def _cell(parts: list[tuple[float, float, str]], join: Callable[[list[str]], str]) -> str:
    """A cell's text: its pieces top to bottom, those on one baseline left to right,
    joined as a paragraph's lines are."""
    if not parts:
        return ""
    parts.sort(key=lambda p: -p[0])
    lines: list[list[tuple[float, float, str]]] = [[parts[0]]]
    for part in parts[1:]:
        if lines[-1][0][0] - part[0] <= 2.0:
            lines[-1].append(part)
        else:
            lines.append([part])
    return join([text for line in lines for _, _, text in sorted(line, key=lambda p: p[1])])
