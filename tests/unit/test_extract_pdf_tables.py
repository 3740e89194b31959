"""Ruled tables in a PDF rebuilt as pipe tables: drawn by reportlab's `Table` with a grid
style and by hand in every way a file draws cell borders (lines, per-cell borders, thin
filled bars, one path, cell rectangles, a form), split into cells by glyph position, cut
by the Markdown parser into row groups; and what is not a reliable table left as the
lines it was before: unruled layouts, rules only across, a framed note, merged cells,
text over an edge, a real LibreOffice file, a page of more paths than are looked at."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen import canvas
from reportlab.platypus import Paragraph, SimpleDocTemplate, Table, TableStyle

from govindex.core.records import ChunkDraft, ChunkKind
from indexer.extractors import pdf_tables
from indexer.extractors.base import Extracted, Limits
from indexer.extractors.office.common import table
from indexer.extractors.pdf import PDF
from indexer.parsers import PARSERS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
HEIGHT = A4[1]
GRID = [("GRID", (0, 0), (-1, -1), 0.5, colors.black)]
BEFORE = "Access to production systems is granted by role, as the table below sets out."
AFTER = "Every grant is reviewed by the security team once a quarter."
ROWS = [
    ["Role", "System", "Access"],
    ["Operator", "Bastion", "Read | write"],
    ["Auditor", "Audit log", "Read"],
    ["Admin", "All systems", "Full"],
]
EXPECTED = (
    "| Role | System | Access |\n"
    "| --- | --- | --- |\n"
    "| Operator | Bastion | Read \\| write |\n"
    "| Auditor | Audit log | Read |\n"
    "| Admin | All systems | Full |"
)
LEFT, TOP = 72.0, 700.0  # where a table drawn on a canvas has its top-left corner
WIDTHS = [120.0, 110.0, 150.0]
ROW = 20.0


def page_with(
    draw: Callable[[canvas.Canvas], None], *more: Callable[[canvas.Canvas], None]
) -> bytes:
    """A PDF of one page per drawing, each with a paragraph above and below."""
    out = io.BytesIO()
    c = canvas.Canvas(out, pagesize=A4, invariant=1)
    for paint in (draw, *more):
        c.setFont("Helvetica", 10)
        c.drawString(LEFT, 760, BEFORE)
        paint(c)
        c.setFont("Helvetica", 10)
        c.drawString(LEFT, 120, AFTER)
        c.showPage()
    c.save()
    return out.getvalue()


def platypus(table: Table, x: float = LEFT, top: float = TOP) -> Callable[[canvas.Canvas], None]:
    def draw(c: canvas.Canvas) -> None:
        _, height = table.wrapOn(c, 450, 600)
        table.drawOn(c, x, top - height)

    return draw


def extract(data: bytes) -> Extracted:
    return PDF.extract(data, Limits())


def without_tables(data: bytes, monkeypatch: pytest.MonkeyPatch) -> Extracted:
    """What the extractor gives with no table looked for: its output before tables."""
    with monkeypatch.context() as patch:
        patch.setattr(pdf_tables, "rulings", lambda page: None)
        return extract(data)


def exact_spans(text: str) -> list[ChunkDraft]:
    """The Markdown parser's chunks of the text, each exactly the text at its span."""
    chunks = PARSERS["markdown"].parse(text).chunks
    assert all(c.text == text[c.span.char_start : c.span.char_end] for c in chunks)
    return chunks


def test_a_grid_table_between_paragraphs_is_a_pipe_table_cut_into_a_row_group() -> None:
    table = Table(ROWS, colWidths=WIDTHS, rowHeights=ROW, style=TableStyle(GRID))
    extracted = extract(page_with(platypus(table)))
    assert extracted.text == f"{BEFORE}\n\n{EXPECTED}\n\n{AFTER}\n"
    chunks = exact_spans(extracted.text)
    (group,) = [c for c in chunks if c.kind is ChunkKind.ROW_GROUP]
    assert group.text.strip() == EXPECTED  # the header row and its delimiter lead the group
    assert group.text.startswith("| Role | System | Access |\n| --- | --- | --- |\n")
    assert group.labels == ("key:Operator", "key:Auditor", "key:Admin")
    start = extracted.text.index(EXPECTED)
    (box,) = [b for b in extracted.boxes if b.start == start]
    assert box.end == start + len(EXPECTED) and box.page == 1
    assert box.left == pytest.approx(LEFT, abs=0.6)
    assert box.right == pytest.approx(LEFT + sum(WIDTHS), abs=0.6)
    assert box.top == pytest.approx(HEIGHT - TOP, abs=0.6)
    assert box.bottom == pytest.approx(HEIGHT - TOP + 4 * ROW, abs=0.6)


def test_a_grid_table_in_a_flowing_document_keeps_its_place_between_the_paragraphs() -> None:
    style = getSampleStyleSheet()["Normal"]
    out = io.BytesIO()
    story = [Paragraph(BEFORE, style), Table(ROWS, style=TableStyle(GRID)), Paragraph(AFTER, style)]
    SimpleDocTemplate(out, pagesize=A4, invariant=1).build(story)
    text = extract(out.getvalue()).text
    assert text == f"{BEFORE}\n\n{EXPECTED}\n\n{AFTER}\n"
    kinds = [c.kind for c in exact_spans(text)]
    assert kinds == [ChunkKind.PREAMBLE, ChunkKind.ROW_GROUP, ChunkKind.PARAGRAPH]


def test_a_long_tables_later_row_groups_carry_the_header_as_context() -> None:
    rows = [["Host", "Role"]] + [[f"db-{n}", "replica" if n % 2 else "primary"] for n in range(25)]
    table = Table(rows, colWidths=[120, 120], rowHeights=18, style=TableStyle(GRID))
    text = extract(page_with(platypus(table, top=740))).text
    chunks = exact_spans(text)
    groups = [c for c in chunks if c.kind is ChunkKind.ROW_GROUP]
    assert len(groups) == 2  # 25 rows, 20 to a group
    assert groups[1].context == "| Host | Role |\n| --- | --- |\n"
    assert "key:db-24" in groups[1].labels


def test_a_cell_wrapped_onto_two_lines_is_one_cell_and_its_line_is_split_by_glyphs() -> None:
    style = getSampleStyleSheet()["Normal"]
    wrapped = Paragraph("Everything the service needs to run on a long day", style)
    rows = [ROWS[0], ["Admin", "All systems", wrapped], ["Auditor", "Audit log", "Read"]]
    table = Table(rows, colWidths=WIDTHS, style=TableStyle(GRID))
    text = extract(page_with(platypus(table))).text
    assert text == (
        f"{BEFORE}\n\n"
        "| Role | System | Access |\n"
        "| --- | --- | --- |\n"
        "| Admin | All systems | Everything the service needs to run on a long day |\n"
        "| Auditor | Audit log | Read |\n\n"
        f"{AFTER}\n"
    )
    exact_spans(text)


def cells(c: canvas.Canvas, rows: list[list[str]], widths: list[float] = WIDTHS) -> None:
    """Each cell's text, left-aligned with padding, in a grid at LEFT, TOP."""
    c.setFont("Helvetica", 10)
    for i, row in enumerate(rows):
        x = LEFT
        for value, width in zip(row, widths, strict=False):
            c.drawString(x + 5, TOP - (i + 1) * ROW + 6, value)
            x += width


def edges(rows: int, widths: list[float] = WIDTHS) -> tuple[list[float], list[float]]:
    xs = [LEFT]
    for width in widths:
        xs.append(xs[-1] + width)
    return xs, [TOP - i * ROW for i in range(rows + 1)]


def lines(c: canvas.Canvas, rows: int, widths: list[float] = WIDTHS) -> None:
    xs, ys = edges(rows, widths)
    for y in ys:
        c.line(xs[0], y, xs[-1], y)
    for x in xs:
        c.line(x, ys[0], x, ys[-1])


def per_cell(c: canvas.Canvas, rows: int) -> None:
    """Each cell's four borders drawn on their own, as Word writes them."""
    xs, ys = edges(rows)
    for i in range(rows):
        for j in range(len(xs) - 1):
            c.line(xs[j], ys[i], xs[j + 1], ys[i])
            c.line(xs[j], ys[i + 1], xs[j + 1], ys[i + 1])
            c.line(xs[j], ys[i], xs[j], ys[i + 1])
            c.line(xs[j + 1], ys[i], xs[j + 1], ys[i + 1])


def bars(c: canvas.Canvas, rows: int) -> None:
    """Borders as thin filled rectangles."""
    xs, ys = edges(rows)
    for y in ys:
        c.rect(xs[0] - 0.4, y - 0.4, xs[-1] - xs[0] + 0.8, 0.8, stroke=0, fill=1)
    for x in xs:
        c.rect(x - 0.4, ys[-1] - 0.4, 0.8, ys[0] - ys[-1] + 0.8, stroke=0, fill=1)


def one_path(c: canvas.Canvas, rows: int) -> None:
    xs, ys = edges(rows)
    path = c.beginPath()
    for y in ys:
        path.moveTo(xs[0], y)
        path.lineTo(xs[-1], y)
    for x in xs:
        path.moveTo(x, ys[0])
        path.lineTo(x, ys[-1])
    c.drawPath(path)


def cell_rects(c: canvas.Canvas, rows: int) -> None:
    """Each cell a stroked rectangle, the header shaded."""
    xs, ys = edges(rows)
    for i in range(rows):
        for j in range(len(xs) - 1):
            c.setFillColor(colors.lightgrey if i == 0 else colors.white)
            c.rect(xs[j], ys[i + 1], xs[j + 1] - xs[j], ys[i] - ys[i + 1], stroke=1, fill=1)
    c.setFillColor(colors.black)


def in_a_form(c: canvas.Canvas, rows: int) -> None:
    """The grid drawn in a form XObject, placed with a scale and a shift."""
    xs, ys = edges(rows)
    c.beginForm("grid")
    for y in ys:
        c.line(0, (y - ys[-1]) * 2, (xs[-1] - xs[0]) * 2, (y - ys[-1]) * 2)
    for x in xs:
        c.line((x - xs[0]) * 2, 0, (x - xs[0]) * 2, (ys[0] - ys[-1]) * 2)
    c.endForm()
    c.saveState()
    c.translate(xs[0], ys[-1])
    c.scale(0.5, 0.5)
    c.doForm("grid")
    c.restoreState()


@pytest.mark.parametrize("rule", [lines, per_cell, bars, one_path, cell_rects, in_a_form])
def test_every_way_of_drawing_cell_borders_makes_the_same_table(
    rule: Callable[[canvas.Canvas, int], None],
) -> None:
    def draw(c: canvas.Canvas) -> None:
        rule(c, len(ROWS))
        cells(c, ROWS)

    assert extract(page_with(draw)).text == f"{BEFORE}\n\n{EXPECTED}\n\n{AFTER}\n"


def tables_in(text: str) -> int:
    """How many pipe tables the text holds (by their delimiter rows)."""
    return sum(1 for line in text.splitlines() if line.startswith("| --- |"))


def test_a_row_ending_in_a_hyphen_that_pdfium_joins_to_the_next_row_is_cut_back() -> None:
    """PDFium joins `e-` at a line's end to the next line down (`e\ufffemobile`), as it
    does a hyphenated word; in a grid each part goes back to its own row."""
    rows = [["Prefix", "Written"], ["electronic", "e-"], ["mobile", "m-"], ["online", "on-"]]

    def draw(c: canvas.Canvas) -> None:
        lines(c, len(rows), WIDTHS[:2])
        cells(c, rows, WIDTHS[:2])

    text = extract(page_with(draw)).text
    assert text == f"{BEFORE}\n\n{table(rows, 2)}\n\n{AFTER}\n"


# A letter first: a cell of a bare number in a page's corner is dropped as a page number.
WORD = st.builds(
    str.__add__,
    st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGH"),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGH0123456789|-.", max_size=6),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 5).flatmap(
        lambda width: st.lists(
            st.lists(st.lists(WORD, max_size=2).map(" ".join), min_size=width, max_size=width),
            min_size=2,
            max_size=8,
        )
    )
)
def test_any_grid_of_short_cells_comes_back_cell_for_cell(rows: list[list[str]]) -> None:
    widths = [
        max(30.0, *(stringWidth(row[j], "Helvetica", 10) + 12 for row in rows))
        for j in range(len(rows[0]))
    ]
    assume(sum(widths) < 450)
    if sum(1 for row in rows for cell in row if cell) < 2:
        rows[0][0], rows[1][1] = "Key", "Value"

    def draw(c: canvas.Canvas) -> None:
        lines(c, len(rows), widths)
        cells(c, rows, widths)

    text = extract(page_with(draw)).text
    assert text == f"{BEFORE}\n\n{table(rows, len(rows[0]))}\n\n{AFTER}\n"
    exact_spans(text)


def test_two_tables_on_a_page_and_a_table_on_each_of_two_pages() -> None:
    first = Table(ROWS, colWidths=WIDTHS, style=TableStyle(GRID))
    second = Table([["Key", "Value"], ["retention", "1 year"]], style=TableStyle(GRID))

    def two(c: canvas.Canvas) -> None:
        platypus(first)(c)
        platypus(second, top=400)(c)

    both = page_with(two)
    assert extract(both).text == (
        f"{BEFORE}\n\n{EXPECTED}\n\n| Key | Value |\n| --- | --- |\n| retention | 1 year |\n\n"
        f"{AFTER}\n"
    )
    extracted = extract(page_with(platypus(first), platypus(second, top=400)))
    # The paragraphs above and below recur on both pages: a running header and footer.
    assert (
        extracted.text == f"{EXPECTED}\n\n| Key | Value |\n| --- | --- |\n| retention | 1 year |\n"
    )
    assert [b.page for b in extracted.boxes] == [1, 2]


def test_a_ruled_running_header_goes_with_its_lines_and_a_table_below_it_stays() -> None:
    """A header drawn as a ruled table on every page recurs there as running lines do,
    so it goes; the data table on each page stays whole."""
    out = io.BytesIO()
    c = canvas.Canvas(out, pagesize=A4, invariant=1)
    for n in range(1, 4):
        header = [["Acme Corp", "ISP-001"], ["Security Policy", f"Page {n} of 3"]]
        platypus(Table(header, colWidths=[200, 200], style=TableStyle(GRID)), top=810)(c)
        c.setFont("Helvetica", 10)
        c.drawString(LEFT, 720, f"Hosts of region {n}, as the inventory lists them.")
        rows = [["Host", "Role"]] + [[f"db-{n}{k}", "replica"] for k in range(3)]
        platypus(Table(rows, colWidths=[100, 100], style=TableStyle(GRID)), top=700)(c)
        c.showPage()
    c.save()
    text = extract(out.getvalue()).text
    assert "Acme" not in text and "ISP-001" not in text
    assert text.count("| Host | Role |\n| --- | --- |\n") == 3
    assert "| db-21 | replica |" in text


def two_columns(c: canvas.Canvas) -> None:
    """A table set with tabs: two columns of text on shared baselines, no lines."""
    c.setFont("Helvetica", 10)
    for k, (left, right) in enumerate(
        [("Role", "Access"), ("Operator", "Read"), ("Auditor", "Log")]
    ):
        c.drawString(LEFT, TOP - k * 14, left)
        c.drawString(LEFT + 200, TOP - k * 14, right)


def rules_across(c: canvas.Canvas) -> None:
    """Rules above, below the header and under the table, no column edges (as the
    LibreOffice file draws its table)."""
    two_columns(c)
    for y in (TOP + 12, TOP - 4, TOP - 32):
        c.line(LEFT, y, LEFT + 300, y)


def framed_note(c: canvas.Canvas) -> None:
    """A note in a ruled box: one cell."""
    c.setFont("Helvetica", 10)
    c.drawString(LEFT + 6, TOP - 14, "Note: the bastion host is the only way in.")
    c.drawString(LEFT + 6, TOP - 27, "Access from anywhere else is refused and logged.")
    c.rect(LEFT, TOP - 34, 300, 34)


def framed_with_a_rule(c: canvas.Canvas) -> None:
    """A box split by one rule across: two rows of one column."""
    framed_note(c)
    c.line(LEFT, TOP - 20, LEFT + 300, TOP - 20)


def merged_header(c: canvas.Canvas) -> None:
    """A header cell over all the columns: the column edges stop below it."""
    xs, ys = edges(len(ROWS))
    for y in ys:
        c.line(xs[0], y, xs[-1], y)
    for x in xs:
        c.line(x, ys[0] if x in (xs[0], xs[-1]) else ys[1], x, ys[-1])
    cells(c, [["Grants by role"], *ROWS[1:]])


def overflowing(c: canvas.Canvas) -> None:
    """A cell's text running on over the next column's edge."""
    lines(c, len(ROWS))
    cells(c, [*ROWS[:3], ["Admin", "Every system the company runs", "Full"]])


def across_a_row(c: canvas.Canvas) -> None:
    """Text printed across a row edge (a stamp over the grid)."""
    lines(c, len(ROWS))
    cells(c, ROWS)
    c.drawString(LEFT + 130, TOP - 2 * ROW - 3, "VOID")


def no_grid_style(c: canvas.Canvas) -> None:
    platypus(Table(ROWS, colWidths=WIDTHS))(c)


@pytest.mark.parametrize(
    "draw",
    [
        two_columns,
        no_grid_style,
        rules_across,
        framed_note,
        framed_with_a_rule,
        merged_header,
        overflowing,
        across_a_row,
    ],
)
def test_what_is_not_a_reliable_ruled_table_stays_as_it_was(
    draw: Callable[[canvas.Canvas], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = page_with(draw)
    extracted = extract(data)
    assert tables_in(extracted.text) == 0
    assert extracted == without_tables(data, monkeypatch)


def test_the_libreoffice_files_table_is_ruled_only_across_and_stays_as_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its table (`Chose | Truc`, then two rows) has three horizontal rules and no
    vertical one: nothing says where its columns are, so its rows stay as lines."""
    data = (FIXTURES / "pdf-libreoffice-structure.pdf").read_bytes()
    rules = rulings_of(data)
    assert rules is not None and len(rules) == 3 and not any(r.vertical for r in rules)
    assert pdf_tables.grids(rules) == []
    extracted = extract(data)
    lines = extracted.text.splitlines()
    assert lines[-5:] == ["Chose Truc", "", "Chose 1 Truc 1", "", "Chose 2 Truc 2"]
    assert extracted == without_tables(data, monkeypatch)


def test_a_page_of_a_hundred_thousand_paths_is_read_without_looking_for_tables() -> None:
    """Past `MAX_OBJECTS` objects a page's ruling is not read: its text comes out, its
    ruled table as lines, in bounded time."""

    def dust(c: canvas.Canvas) -> None:
        lines(c, len(ROWS))
        cells(c, ROWS)
        for k in range(100_000):
            c.rect(20 + (k % 500) * 1.1, 140 + (k // 500) * 2.5, 0.3, 0.3)

    data = page_with(dust)
    started = time.perf_counter()
    text = extract(data).text
    assert time.perf_counter() - started < 30
    assert text.startswith(BEFORE) and text.endswith(AFTER + "\n")
    assert "Role System Access" in text and tables_in(text) == 0


def rulings_of(data: bytes) -> list[pdf_tables.Rule] | None:
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(data)
    try:
        page = document[0]
        rules = pdf_tables.rulings(page.raw)
        page.close()
        return rules
    finally:
        document.close()


def test_paths_of_too_many_segments_are_not_read() -> None:
    """Just under the object bound, rectangles whose edges are read from their segments
    pass `MAX_SEGMENTS`: the page's ruling is not read."""

    def squares(c: canvas.Canvas) -> None:
        for k in range(pdf_tables.MAX_OBJECTS - 10):
            c.rect(20 + (k % 70) * 8, 140 + (k // 70) * 8, 6, 6)

    data = page_with(squares)
    assert rulings_of(data) is None
    assert extract(data).text == f"{BEFORE}\n\n{AFTER}\n"


def test_rulings_that_cross_too_often_are_not_searched_for_grids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """600 rulings across and 600 down cross 360,000 times, past `MAX_CHECKS`: no grid is
    looked for, though with a higher bound the lattice is found."""

    def crossing(c: canvas.Canvas) -> None:
        for k in range(600):
            c.line(-500, -500 + k * 3, 1300, -500 + k * 3)
            c.line(-500 + k * 3, -500, -500 + k * 3, 1300)

    data = page_with(crossing)
    rules = rulings_of(data)
    assert rules is not None and len(rules) == 1200
    assert pdf_tables.grids(rules) == []
    assert extract(data).text == f"{BEFORE}\n\n{AFTER}\n"
    monkeypatch.setattr(pdf_tables, "MAX_CHECKS", 400_000)
    (grid,) = pdf_tables.grids(rules)
    assert len(grid.xs) == len(grid.ys) == 600


def test_same_bytes_same_text_and_boxes() -> None:
    style = getSampleStyleSheet()["Normal"]
    wrapped = Paragraph("Everything the service needs to run on a long day", style)
    table = Table([*ROWS, ["Owner", "Runbook", wrapped]], colWidths=WIDTHS, style=TableStyle(GRID))

    def by_hand(c: canvas.Canvas) -> None:
        lines(c, len(ROWS))
        cells(c, ROWS)

    data = page_with(platypus(table), by_hand)
    first = extract(data)
    assert tables_in(first.text) == 2
    assert extract(bytes(data)) == first
    exact_spans(first.text)
