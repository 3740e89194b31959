"""PDF: the text layer, page by page, as Markdown with the structure its typography shows.

A PDF holds positioned glyphs, not paragraphs or headings; what a reader sees as structure
is type size, weight and spacing. This extractor reads the text layer with PDFium (through
pypdfium2, Apache-2.0 / BSD-3-Clause): PDFium is the engine Chrome renders PDFs with, so its
text (ToUnicode maps, ligatures, the reading order of the content) is what a reader of the
file in a browser would copy, and it reads a page in native code, many times faster than a
pure-Python parser. pdfplumber (on pdfminer.six) would add a table finder, but costs a
Python object per glyph; PDFium gives what headings need (each glyph's font, size and
transformation) on demand, so only a few glyphs per line are asked for (and, of a line
printed across a table's cells, the ends of each word).

From the lines PDFium finds, the canonical text is built so the Markdown parser can cut it:

- paragraphs: a block's lines are joined into one line (a word hyphenated across a line
  break is rejoined when the next line starts in lower case) and blocks are separated by a
  blank line. A block ends at a wider gap than the document's line spacing, a change of
  size or weight or indentation, a line that stops well short of the right margin, and
  before a line that starts with a list or clause number (`1.`, `1.1`, `§ 4`, `(a)`, a
  bullet), so numbered clauses stay at line starts;
- headings: the body size is the most common type size, by characters; a short block
  notably larger than that becomes a heading, levelled by size rank (the largest is `#`,
  down to `######`), and a short bold block at body size that does not end with a period
  comes one level below the sized ones. Text all in one size and weight gets no headings,
  and neither does a table of contents' line (dot leaders);
- pages: each page's blocks follow the previous page's after a blank line, and `pages`
  says where each page begins (an empty page is listed where the next one begins), so a
  paragraph running over a page break becomes two paragraphs;
- boxes: each block (paragraph, heading, item) keeps the rectangle its lines were printed
  in, from its glyphs' origins and right edges and its type size above and below the
  baselines, so a chunk's anchor can say where on the page it is;
- running headers and footers are dropped: lines set apart from the text at the top or
  bottom of a page that recur on at least 40% of the pages (numbers aside, in the same
  place: `Page 3 of 10`), and page numbers there (`3`, `- 3 -`, `iii`).

Ruled tables (cell borders drawn as a complete grid, as Word or reportlab draw them) are
rebuilt as pipe tables where their first line was, boxed by the grid, the first row as the
header (a table broken over pages is a table a page), when each line in the grid sits in one
row: `pdf_tables`. Other tables (unruled, ruled only across, with merged cells, on a page of
over `pdf_tables.MAX_OBJECTS` objects) come out as lines of text in reading order, as
nothing on the page says where their cells are. Text in annotations and form fields is not
part of a page's content and is not read. A PDF with no text on any page (a scan) is
refused as `NoTextLayer`: OCR is not built in.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pypdfium2 as pdfium  # type: ignore[import-untyped, unused-ignore]
import pypdfium2.raw as pdfium_c  # type: ignore[import-untyped, unused-ignore]

from govindex.core.errors import NoTextLayer, TooLarge, Unreadable
from indexer.extractors import pdf_tables
from indexer.extractors.base import Box, Extracted, Limits, Page, check_size, check_text

_WHAT = "the PDF"

_LINE = re.compile(r"[^\r\n]+")
_HYPHEN = re.compile("\ufffe\\s*")  # PDFium's mark of a hyphen it joined the next line at
_SPACES = re.compile(r"[ \t\f\v]+")
_UNICODE_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")  # Zs
# A line that starts with one of these begins a block of its own: list items, bullets and
# the clause numbers the Markdown parser recognises (`§ 4`, `4.1.2`, `(a)`).
_MARKER = re.compile(
    r"^(?:§\s*\d|\d{1,3}[.)](?:\s|$)|\d+(?:\.\d+)+\.?(?:\s|$)|\([a-z0-9]{1,4}\)(?:\s|$)"
    r"|[a-z][.)]\s|[ivxlc]{1,6}[.)]\s|[·–—*+-]\s)",
    re.IGNORECASE,
)
_BULLETS = frozenset("•◦▪▫‣⁃∙●○■□➢►✓")
_SENTENCE_END = frozenset(".;:!?")
_PAGE_NUMBER = re.compile(
    r"^(?:(?:page|p\.|seite|página|pagina|side)\s*)?\d{1,5}(?:\s*(?:of|/|de|von|sur|di)\s*\d{1,5})?"
    r"$|^[-–—]\s*\d{1,5}\s*[-–—]$|^(?=[ivxlcdm])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})"
    r"(?:ix|iv|v?i{0,3})$",
    re.IGNORECASE,
)
_BOLD_NAME = re.compile(r"bold|black|heavy|demi|semibold|extrab|ultrab", re.IGNORECASE)
_FORCE_BOLD = 1 << 18  # the font descriptor's ForceBold flag
# What a Markdown reader would take for structure at the start of a line of prose: an ATX
# heading, a quote, an HTML block, a code fence, a thematic break, a link definition.
_MISREAD = re.compile(r"^(?:#|>|<|`{3}|~{3}|([-*_])(?:[ \t]*\1){2,}[ \t]*$|\[[^\]]*\]:)")
_LEADERS = re.compile(r"\.{4,}|(?:\. ){4,}|…{2,}")  # a table of contents' dot leaders
_CONTROL = dict.fromkeys([*range(0x20), 0x7F, 0xFFFF], " ")
_DIGITS = re.compile(r"\d+")
_LOOSE_WORDS = 20
_ZONE = 3  # lines at the top and at the bottom of a page that may be a running header/footer
_APART = 1.6  # the gap, in type sizes between baselines, that sets a header or footer apart
_NAME_BUFFER = 128
# Of a type size, how far its letters reach above the baseline and below it.
_ASCENT = 0.8
_DESCENT = 0.25


@dataclass(slots=True)
class _Line:
    """One line of a page as PDFium found it, with what was measured of its glyphs."""

    text: str
    size: float  # the type size, in points, after the text's transformation
    bold: bool
    x0: float  # left edge of its first glyph
    x1: float  # right edge of its last glyph
    y0: float  # baseline of its first glyph
    y1: float  # baseline of its last glyph (differs from y0 where PDFium joined a hyphen)
    placed: bool  # whether its glyphs' positions could be read
    start: int = 0  # where its text is in the page's text as PDFium reads it
    end: int = 0
    table: pdf_tables.Table | None = None  # a rebuilt table (`text` is its Markdown)
    held: tuple[_Line, ...] = ()  # the lines of the table


@dataclass(slots=True)
class _Block:
    lines: list[_Line]
    text: str = ""
    level: int = 0


class PdfExtractor:
    """PDF files: the text layer as Markdown, with pages, headings and numbered clauses."""

    name = "pdf"
    version = "1.2.0"
    suffixes: tuple[str, ...] = (".pdf",)
    binary = True

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        check_size(data, limits, _WHAT)
        pages, sizes = _read(data, limits)
        if not any(pages):
            count = f"{len(pages):,} pages" if len(pages) != 1 else "1 page"
            raise NoTextLayer(
                f"{_WHAT} has no text layer on any of its {count}; OCR is not built in: add a "
                "text layer or leave the file out"
            )
        body, bold_body = _body_type(pages)
        _drop_running(pages)
        blocks = [_blocks(lines, body, w) for lines, (w, _) in zip(pages, sizes, strict=True)]
        _headings(blocks, body, bold_body)
        text, starts, boxes = _render(blocks, [h for _, h in sizes])
        check_text(text, limits, _WHAT)
        return Extracted(
            text=text,
            parser="markdown",
            pages=tuple(Page(start, n) for n, start in enumerate(starts, 1)),
            boxes=boxes,
        )


PDF = PdfExtractor()


def _read(data: bytes, limits: Limits) -> tuple[list[list[_Line]], list[tuple[float, float]]]:
    """Every page's lines, in the order PDFium reads them, and each page's width and
    height; refuses what is over a limit."""
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) == pdfium_c.FPDF_ERR_PASSWORD:
            raise Unreadable(
                f"{_WHAT} is encrypted and needs a password to open; remove the password "
                "or leave the file out"
            ) from None
        raise Unreadable(f"{_WHAT} cannot be read ({_reason(exc)})") from None
    try:
        count = len(document)
        if count == 0:
            raise Unreadable(f"{_WHAT} holds no pages (its page tree is empty or broken)")
        if count > limits.max_pages:
            raise TooLarge(
                f"{_WHAT} has {count:,} pages, over the {limits.max_pages:,}-page limit; "
                "split it or leave it out of the source's include"
            )
        pages: list[list[_Line]] = []
        sizes: list[tuple[float, float]] = []
        total = 0
        for index in range(count):
            lines, size = _read_page(document, index)
            total += sum(len(line.text) + 2 for line in lines)
            if total > limits.max_text_chars:
                raise TooLarge(
                    f"{_WHAT} extracts to more than {limits.max_text_chars:,} characters by "
                    f"page {index + 1:,} of {count:,}, over the limit; split the file"
                )
            pages.append(lines)
            sizes.append(size)
        return pages, sizes
    finally:
        document.close()


def _reason(exc: BaseException) -> str:
    return str(exc).strip().rstrip(".")[:200] or exc.__class__.__name__


def _read_page(document: Any, index: int) -> tuple[list[_Line], tuple[float, float]]:
    try:
        page = document[index]
    except pdfium.PdfiumError as exc:
        raise Unreadable(f"{_WHAT}: page {index + 1} cannot be read ({_reason(exc)})") from None
    try:
        grids = pdf_tables.grids(pdf_tables.rulings(page.raw) or [])
        textpage = page.get_textpage()
        try:
            return _lines(textpage, grids), (float(page.get_width()), float(page.get_height()))
        finally:
            textpage.close()
    except pdfium.PdfiumError as exc:
        raise Unreadable(
            f"{_WHAT}: the text of page {index + 1} cannot be read ({_reason(exc)})"
        ) from None
    finally:
        page.close()


class _Probe:
    """Reads a glyph's type size, weight and position through PDFium's text API; a line
    asks this of three glyphs (first, middle, last), not of every one."""

    def __init__(self, textpage: Any) -> None:
        self.handle = textpage.raw  # the bare handle: no conversion on every call
        self.matrix = pdfium_c.FS_MATRIX()
        self.box = [ctypes.c_double() for _ in range(4)]
        self.name = ctypes.create_string_buffer(_NAME_BUFFER)
        self.flags = ctypes.c_int()
        self.bold: dict[tuple[bytes, int, int], bool] = {}

    def size(self, char: int) -> tuple[float, float, float] | None:
        """(size, origin x, baseline) of a glyph, or None when PDFium has none: the size
        is the font size scaled by the glyph's transformation, as it is printed."""
        if char < 0 or not pdfium_c.FPDFText_GetMatrix(self.handle, char, self.matrix):
            return None
        m = self.matrix
        scale = math.hypot(m.c, m.d)
        return float(pdfium_c.FPDFText_GetFontSize(self.handle, char)) * scale, m.e, m.f

    def edges(self, char: int) -> tuple[float, float] | None:
        """The left and right edges of a glyph's box."""
        left, right, bottom, top = self.box
        if not pdfium_c.FPDFText_GetCharBox(self.handle, char, left, right, bottom, top):
            return None
        return float(left.value), float(right.value)

    def is_bold(self, char: int) -> bool:
        pdfium_c.FPDFText_GetFontInfo(self.handle, char, self.name, _NAME_BUFFER, self.flags)
        weight = int(pdfium_c.FPDFText_GetFontWeight(self.handle, char))
        key = (self.name.value, self.flags.value, weight)
        bold = self.bold.get(key)
        if bold is None:
            bold = (
                weight >= 600
                or bool(self.flags.value & _FORCE_BOLD)
                or bool(_BOLD_NAME.search(key[0].decode("latin-1")))
            )
            self.bold[key] = bold
        return bold


def _lines(textpage: Any, grids: list[pdf_tables.Grid]) -> list[_Line]:
    text: str = textpage.get_text_range()
    direct = len(text) == int(textpage.count_chars())
    probe = _Probe(textpage)

    def char(k: int) -> int:
        if direct:
            return k
        return int(pdfium_c.FPDFText_GetCharIndexFromTextIndex(probe.handle, k))

    lines: list[_Line] = []
    for found in _LINE.finditer(text):
        for start, raw in _unhyphenated(found.start(), found.group(), probe, char):
            clean = _clean(raw)
            if clean:
                line = _measure(clean, [char(start + k) for k in _picks(raw)], probe)
                line.start, line.end = start, start + len(raw)
                lines.append(line)
    if grids:  # each table in place of its first line; unplaced, so it is a block of its own
        page = pdf_tables.Text(
            text, lambda k: probe.edges(char(k)), lambda k: probe.size(char(k)), _clean, _join
        )
        tables = pdf_tables.tables(grids, lines, page)
        lines = pdf_tables.placed(lines, tables, _table_line)
    return lines


def _table_line(table: pdf_tables.Table, held: tuple[_Line, ...]) -> _Line:
    return _Line(table.text, 0.0, False, 0.0, 0.0, 0.0, 0.0, False, table=table, held=held)


def _unhyphenated(
    start: int, raw: str, probe: _Probe, char: Callable[[int], int]
) -> list[tuple[int, str]]:
    """A line as PDFium joined it, split again where it joined a hyphenated word to text
    that is not on the next line down (a footer, the next column): PDFium marks such a
    hyphen with U+FFFE and looks no further than the content's order."""
    pieces: list[tuple[int, str]] = []
    at = 0
    for mark in _HYPHEN.finditer(raw):
        k, after = mark.start(), mark.end()  # the hyphen, and the glyph after it
        if after >= len(raw):
            continue
        here, there = probe.size(char(start + k)), probe.size(char(start + after))
        if here is None or there is None:
            continue
        step = here[2] - there[2]
        if not 0.5 * here[0] <= step <= 2.5 * here[0]:
            pieces.append((start + at, raw[at:k] + "-"))
            at = k + 1
    pieces.append((start + at, raw[at:]))
    return pieces


def _measure(text: str, picks: list[int], probe: _Probe) -> _Line:
    """A line's type size (the median of its first, middle and last glyphs), weight (bold
    when its first and last glyphs are) and where it sits."""
    first, middle, last = picks
    head, mid, tail = probe.size(first), probe.size(middle), probe.size(last)
    edges = probe.edges(last) if tail is not None else None
    if head is None or tail is None or edges is None:
        return _Line(text, 0.0, False, 0.0, 0.0, 0.0, 0.0, False)
    sizes = sorted(g[0] for g in (head, mid, tail) if g is not None)
    return _Line(
        text,
        round(sizes[len(sizes) // 2], 1),
        probe.is_bold(first) and probe.is_bold(last),
        head[1],
        edges[1],
        head[2],
        tail[2],
        True,
    )


def _picks(raw: str) -> tuple[int, int, int]:
    """Where a line's first, middle and last visible glyphs are, in its text (the line
    has one: `_clean` left something of it)."""
    first = len(raw) - len(raw.lstrip())
    last = len(raw.rstrip()) - 1
    middle = (first + last) // 2
    while middle < last and (raw[middle].isspace() or raw[middle] == "\ufffe"):
        middle += 1
    return first, middle, last


def _clean(raw: str) -> str:
    """A line's text, with PDFium's line-end hyphen marks resolved and spacing made plain.

    PDFium joins a word hyphenated over a line break into one line and marks the hyphen
    with U+FFFE: the hyphen goes when the word goes on in lower case (`exam-ple`), and
    stays otherwise (`Anglo-Saxon`, `2019-2020`).
    """
    if "\ufffe" in raw:
        parts = raw.split("\ufffe")
        out = [parts[0]]
        for part in parts[1:]:
            rest = part.lstrip()
            out.append(rest if rest[:1].islower() else "-" + rest)
        raw = "".join(out)
    raw = raw.translate(_CONTROL)
    if not raw.isascii():
        raw = _UNICODE_SPACES.sub(" ", raw.replace("\u00ad", ""))
    return _SPACES.sub(" ", raw).strip()


def _body_type(pages: list[list[_Line]]) -> tuple[float, bool]:
    """The body's type size (the most common, by characters) and whether it is bold."""
    sizes: Counter[float] = Counter()
    bold: Counter[float] = Counter()
    for lines in pages:
        for line in itertools.chain.from_iterable(x.held or (x,) for x in lines):
            if line.placed:
                sizes[line.size] += len(line.text)
                if line.bold:
                    bold[line.size] += len(line.text)
    if not sizes:
        return 0.0, False
    body = max(sizes, key=lambda s: (sizes[s], -s))
    return body, bold[body] * 2 > sizes[body]


def _drop_running(pages: list[list[_Line]]) -> None:
    """Drop running headers and footers: lines set apart at the top or bottom of a page
    (`_zone`) that recur on at least 40% of the pages with text (odd and even pages often
    differ), and page numbers there. A table's lines count as lines; it goes when they all do."""
    flat = [[part for line in lines for part in line.held or (line,)] for lines in pages]
    zones: list[list[int]] = []
    seen: Counter[str] = Counter()
    for lines in flat:
        zone = _zone(lines)
        zones.append(zone)
        seen.update({key for k in zone for key in _keys(lines[k])})
    with_text = sum(1 for lines in flat if lines)
    recurring = max(2, math.ceil(with_text * 0.4))
    kept: list[list[_Line]] = []
    for lines, zone in zip(flat, zones, strict=True):
        drop = {
            k
            for k in zone
            if _PAGE_NUMBER.match(lines[k].text)
            or (with_text >= 2 and any(seen[key] >= recurring for key in _keys(lines[k])))
        }
        kept.append([line for k, line in enumerate(lines) if k not in drop] if drop else lines)
    if any(kept):  # a file of nothing but one recurring line keeps it: that is its text
        for lines, left in zip(pages, kept, strict=True):
            ids = {id(line) for line in left}
            lines[:] = [ln for ln in lines if any(id(p) in ids for p in ln.held or (ln,))]


def _zone(lines: list[_Line]) -> list[int]:
    """The lines of a page that may be a running header or footer: up to `_ZONE` lines at
    the top and at the bottom, as far as the widest gap between them and the body text
    (a header stands apart from the text; the first lines of the text do not)."""
    placed = sorted(
        (k for k, line in enumerate(lines) if line.placed), key=lambda k: (-lines[k].y0, k)
    )
    zone: set[int] = set()
    for side in (placed, placed[::-1]):
        gaps = [
            (abs(lines[a].y0 - lines[b].y0) / max(lines[a].size, lines[b].size, 1.0), n)
            for n, (a, b) in enumerate(itertools.pairwise(side[: _ZONE + 1]))
        ]
        if len(side) <= _ZONE:
            gaps.append((math.inf, len(side) - 1))
        widest = max(gaps, default=(0.0, -1))
        if widest[0] >= _APART:
            zone.update(side[: widest[1] + 1])
    return sorted(zone)


def _keys(line: _Line) -> list[str]:
    """What a line is recognised by on other pages: its text; and if it is short and holds
    a number, its text with the numbers blanked at its height on the page, so `Page 3 of
    9` matches `Page 4 of 9` in the same place, while body text that merely mentions a
    number does not recur in the same words at the same height."""
    keys = ["=" + line.text.casefold()]
    if line.text.count(" ") < _LOOSE_WORDS and any(ch.isdigit() for ch in line.text):
        keys.append(f"{round(line.y0 / 4)}#" + _DIGITS.sub("#", line.text).casefold())
    return keys


def _blocks(lines: list[_Line], body: float, width: float) -> list[_Block]:
    """A page's lines grouped into blocks (paragraphs, headings, items), in order."""
    if not lines:
        return []
    edges = _Edges(lines, width)
    spacing = _spacing(lines)
    blocks: list[_Block] = []
    current: list[_Line] = []
    for line in lines:
        if current and _breaks(current, line, edges, spacing, body):
            blocks.append(_Block(current))
            current = []
        current.append(line)
    if current:
        blocks.append(_Block(current))
    for block in blocks:
        block.text = _join([line.text for line in block.lines])
    return blocks


class _Edges:
    """Where the text of a line's column ends on the right.

    On a page in one column that is the page width less the left margin (margins are
    nearly always even), so a short line stays short on a page of short lines. On a page
    where text also starts in the right half (columns, or text set to the right), it is
    the right edge reached by most lines starting near the line (a quantile, so a title
    across the columns does not set it), so each line is measured against its own column.
    """

    def __init__(self, lines: list[_Line], width: float) -> None:
        placed = sorted((line.x0, line.x1) for line in lines if line.placed)
        self.x0 = [p[0] for p in placed]
        self.x1 = [p[1] for p in placed]
        self.page: float | None = None
        if placed and width > 0 and self.x0[-1] < width / 2:
            self.page = max(width - self.x0[0], max(self.x1))
        self.cache: dict[tuple[int, int], float] = {}

    def right(self, line: _Line) -> float:
        if self.page is not None:
            return self.page
        reach = 4 * max(line.size, 1.0)
        key = (round(line.x0), round(reach))
        edge = self.cache.get(key)
        if edge is None:
            lo = bisect.bisect_left(self.x0, line.x0 - reach)
            hi = bisect.bisect_right(self.x0, line.x0 + reach)
            near = sorted(self.x1[lo:hi]) or [line.x1]
            edge = near[(len(near) * 4) // 5] if len(near) > 1 else near[0]
            self.cache[key] = edge
        return edge


def _spacing(lines: list[_Line]) -> float:
    """The page's line spacing as a multiple of the type size: a low quantile of the
    baseline steps between consecutive lines of one size, so paragraph gaps stand out."""
    steps = sorted(
        (a.y1 - b.y0) / a.size
        for a, b in itertools.pairwise(lines)
        if a.placed
        and b.placed
        and a.size > 0
        and abs(a.size - b.size) < 0.05 * a.size
        and 0.8 * a.size < a.y1 - b.y0 < 3.0 * a.size
    )
    return steps[len(steps) // 5] if steps else 1.2


def _breaks(current: list[_Line], line: _Line, edges: _Edges, spacing: float, body: float) -> bool:
    """Whether `line` starts a new block rather than continuing `current`."""
    prev = current[-1]
    if not (prev.placed and line.placed) or line.text[:1] in _BULLETS:
        return True
    size = max(prev.size, line.size, 0.1)
    if abs(prev.size - line.size) > 0.08 * size or prev.bold != line.bold:
        return True
    heading = prev.bold or prev.size > body * 1.05  # may be centred
    step = prev.y1 - line.y0
    if abs(step) <= 0.3 * size:
        return True  # the same baseline: a separate run of text (a cell, a caption)
    if step < 0:  # above the previous line: the top of the next column
        return heading or _ended(prev, line, edges)
    if step > max(spacing * 1.3, spacing + 0.25) * size:
        return True  # a paragraph gap
    if len(current) > 1 and abs(line.x0 - prev.x0) > 0.6 * size:
        return True  # indented or outdented after a paragraph's first line
    if _MARKER.match(line.text):
        # A number at a line start begins a clause after a sentence ended, or where the
        # previous line stopped short; otherwise it is a wrapped line ("... 14 CFR / 11.43").
        return prev.text[-1:] in _SENTENCE_END or _ended(prev, line, edges)
    if heading:  # ragged or centred: only the next line shows how wide the column is
        return _had_room(prev, line)
    return _ended(prev, line, edges)


def _had_room(prev: _Line, line: _Line) -> bool:
    """Whether `line` is wider than `prev` with the first word of `line` added: then that
    word would have fitted on `prev`, so the author broke the line, not the layout."""
    glyph = max(line.x1 - line.x0, 0.0) / max(len(line.text), 1)
    word = (len(line.text.split(" ", 1)[0]) + 1) * glyph
    return (prev.x1 - prev.x0) + word + 0.5 * line.size < line.x1 - line.x0


def _ended(prev: _Line, line: _Line, edges: _Edges) -> bool:
    """Whether `prev` stopped short of its column's right edge by more than the first word
    of `line` would have needed: then the author ended the line, not the layout."""
    right = edges.right(prev)
    room = right - prev.x1
    if room <= 0:
        return False
    width = max(line.x1 - line.x0, 0.0) / max(len(line.text), 1)  # an average glyph
    word = len(line.text.split(" ", 1)[0]) + 1
    return room > max(word * width, 0.04 * (right - prev.x0)) + 0.5 * prev.size


def _join(parts: list[str]) -> str:
    """A block's lines as one line: a hyphenated word is rejoined when it goes on in lower
    case, a line broken after a hyphen, dash, slash or `@` is joined without a space."""
    out = [parts[0]]
    for part in parts[1:]:
        tail = out[-1]
        end = tail[-1]
        if end in "-\u2010" and len(tail) > 1 and tail[-2].isalpha() and part[:1].islower():
            out[-1] = tail[:-1]
            out.append(part)
        elif (end in "-\u2010\u2011\u2013/@" and len(tail) > 1 and not tail[-2].isspace()) or (
            _wide(end) and _wide(part[0])
        ):
            out.append(part)
        else:
            out.append(" " + part)
    return "".join(out)


def _wide(ch: str) -> bool:
    """Scripts written without spaces between words (CJK): lines join without one."""
    return unicodedata.east_asian_width(ch) in ("W", "F")


def _headings(pages: list[list[_Block]], body: float, bold_body: bool) -> None:
    """Mark the blocks that are headings, with levels by type size (largest first)."""
    sized: list[_Block] = []
    bold: list[_Block] = []
    for blocks in pages:
        for block in blocks:
            line = block.lines[0]
            text = block.text
            if (
                not line.placed
                or len(text) > 200
                or not any(ch.isalpha() for ch in text)
                or _LEADERS.search(text)
            ):
                continue
            if line.size >= body * 1.15 and line.size >= body + 1 and len(block.lines) <= 3:
                sized.append(block)
            elif (
                not bold_body
                and line.bold
                and line.size >= body - 0.5
                and len(text) <= 120
                and len(block.lines) <= 2
                and not text.endswith(".")
            ):
                bold.append(block)
    ranks = sorted({round(b.lines[0].size) for b in sized}, reverse=True)
    level = {size: min(k + 1, 6) for k, size in enumerate(ranks)}
    for block in sized:
        block.level = level[round(block.lines[0].size)]
    for block in bold:
        block.level = min(len(ranks) + 1, 6)


def _render(
    pages: list[list[_Block]], heights: list[float]
) -> tuple[str, list[int], tuple[Box, ...]]:
    """The canonical text, where each page begins in it, and where each block was printed."""
    parts: list[str] = []
    starts: list[int] = []
    boxes: list[Box] = []
    offset = 0
    for number, (blocks, height) in enumerate(zip(pages, heights, strict=True), 1):
        starts.append(offset)
        for block in blocks:
            if block.level:
                piece = "#" * block.level + " " + block.text
            elif _MISREAD.match(block.text):
                piece = "\\" + block.text
            else:
                piece = block.text
            parts.append(piece)
            box = _box(block, offset, offset + len(piece), number, height)
            if box is not None:
                boxes.append(box)
            offset += len(piece) + 2
    text = "\n\n".join(parts) + "\n"
    return text, [min(start, len(text)) for start in starts], tuple(boxes)


def _box(block: _Block, start: int, end: int, page: int, height: float) -> Box | None:
    """The rectangle a block's lines were printed in, from the page's top-left corner, in
    points (a table's grid); None when a glyph's place could not be read."""
    if block.lines and (table := block.lines[0].table) is not None:
        return table.box(start, end, page, height)
    if not block.lines or not all(line.placed for line in block.lines):
        return None
    lines = block.lines
    top = max(max(ln.y0, ln.y1) + _ASCENT * ln.size for ln in lines)
    bottom = min(min(ln.y0, ln.y1) - _DESCENT * ln.size for ln in lines)
    return Box(
        start,
        end,
        page,
        round(max(0.0, min(ln.x0 for ln in lines)), 1),
        round(min(height, max(0.0, height - top)), 1),
        round(max(ln.x1 for ln in lines), 1),
        round(min(height, max(0.0, height - bottom)), 1),
    )
