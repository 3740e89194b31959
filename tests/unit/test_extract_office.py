"""Word, PowerPoint and Excel files to canonical Markdown: the structure the parser cuts
(sections, clauses, steps, row groups, slides), the limits that refuse zip bombs and huge
grids, and refusals of what is not a readable file."""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import re
import struct
import tracemalloc
import zipfile
from importlib.resources import files
from io import BytesIO
from pathlib import Path
from typing import Any

import docx
import openpyxl
import pptx
import pyromark
import pytest
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pptx.util import Inches

from govindex.core.errors import TooLarge, Unreadable
from govindex.core.records import ChunkKind
from indexer.extractors.base import Extracted, Extractor, Limits
from indexer.extractors.office import DOCX, PPTX, XLSX, DocxExtractor
from indexer.extractors.office.pptx import NOTES_CONTEXT
from indexer.extractors.regions import cut
from indexer.parsers import PARSERS, ParsedDocument

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
LIMITS = Limits()
NEWLINE = re.compile(r"\r\n|\r|\n")
EXTRACTORS = [DOCX, PPTX, XLSX]


def parse(text: str) -> ParsedDocument:
    return PARSERS["markdown"].parse(text)


def check_faithful(text: str, parsed: ParsedDocument) -> None:
    """Every chunk is exactly the canonical text at its span; between chunks, only blanks."""
    position = parsed.body_start
    for chunk in parsed.chunks:
        start, end = chunk.span.char_start, chunk.span.char_end
        assert text[start:end] == chunk.text
        assert chunk.span.line_start == len(NEWLINE.findall(text[:start])) + 1
        assert start >= position, "overlap"
        assert text[position:start].strip() == "", f"gap holding text: {text[position:start]!r}"
        position = end
    assert text[position:].strip() == ""


def saved(document: Any) -> bytes:
    out = BytesIO()
    document.save(out)
    return out.getvalue()


# ---------------------------------------------------------------------------------------
# Word


def policy_docx() -> bytes:
    """An access policy as people write them in Word: a title, numbered headings of two
    levels, clauses numbered in the text, a numbered procedure, bullets and a table."""
    d = docx.Document()
    d.add_paragraph("Access Control Policy", style="Title")
    d.add_heading("Purpose", level=1)
    d.add_paragraph("This policy says who may reach production, and how.")
    d.add_heading("§ 4 Access", level=1)
    d.add_paragraph("4.1 An Operator may access production.")
    d.add_paragraph("4.1.2 Access is logged.")
    d.add_paragraph("(a) Logs are kept for a year.")
    d.add_paragraph("4.2 Contractors may not.")
    d.add_heading("Procedure", level=2)
    for step in ("Request access in the portal.", "Wait for approval.", "Log in with your key."):
        d.add_paragraph(step, style="List Number")
    d.add_paragraph("Use the hardware key, not a password.", style="List Number 2")
    d.add_heading("Notes", level=2)
    for note in ("Keys rotate monthly.", "Contractors need a sponsor."):
        d.add_paragraph(note, style="List Bullet")
    d.add_heading("Grants", level=1)
    rows = [("Role", "System", "Access")] + [
        (f"role-{n:02d}", f"system-{n % 3}", "read|write" if n % 2 else "read") for n in range(25)
    ]
    table = d.add_table(rows=len(rows), cols=3)
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    d.add_paragraph("Grants are reviewed every quarter.")
    section = d.sections[0]
    section.header.paragraphs[0].text = "CONFIDENTIAL HEADER"
    section.footer.paragraphs[0].text = "Page footer"
    return saved(d)


POLICY_START = """\
# Access Control Policy

## Purpose

This policy says who may reach production, and how.

## § 4 Access

4.1 An Operator may access production.

4.1.2 Access is logged.

(a) Logs are kept for a year.

4.2 Contractors may not.

### Procedure

1. Request access in the portal.

2. Wait for approval.

3. Log in with your key.

   1. Use the hardware key, not a password.

### Notes

- Keys rotate monthly.

- Contractors need a sponsor.

## Grants

| Role | System | Access |
| --- | --- | --- |
| role-00 | system-0 | read |
| role-01 | system-1 | read\\|write |
"""


def test_docx_policy_becomes_sections_clauses_steps_and_row_groups() -> None:
    extracted = DOCX.extract(policy_docx(), LIMITS)
    assert extracted.parser == "markdown"
    assert extracted.pages == ()
    text = extracted.text
    assert text.startswith(POLICY_START)
    assert text.endswith("| role-24 | system-0 | read |\n\nGrants are reviewed every quarter.\n")
    assert "CONFIDENTIAL" not in text and "footer" not in text  # headers and footers dropped

    parsed = parse(text)
    check_faithful(text, parsed)
    chunks = parsed.chunks
    sections = [c.heading_path for c in chunks if c.kind in (ChunkKind.SECTION, ChunkKind.CLAUSE)]
    assert ("Access Control Policy", "Purpose") in sections
    assert ("Access Control Policy", "§ 4 Access", "Procedure") in sections
    clauses = {label for c in chunks for label in c.labels if label.startswith("clause:")}
    assert clauses == {"clause:4", "clause:4.1", "clause:4.1.2", "clause:(a)", "clause:4.2"}
    by_clause = {c.labels[0]: c for c in chunks if c.kind is ChunkKind.CLAUSE and c.labels}
    assert by_clause["clause:4.1.2"].parent_ordinal == by_clause["clause:4.1"].ordinal
    steps = [c for c in chunks if c.kind is ChunkKind.STEP]
    assert [s.labels for s in steps] == [("step:1",), ("step:2",), ("step:3",)]
    assert "Use the hardware key" in steps[2].text  # the nested item stays in its step
    groups = [c for c in chunks if c.kind is ChunkKind.ROW_GROUP]
    assert len(groups) == 2  # 25 rows, 20 to a group
    assert groups[0].heading_path == ("Access Control Policy", "Grants")
    assert groups[1].context == "| Role | System | Access |\n| --- | --- | --- |\n"
    assert "key:role-20" in groups[1].labels


def numbered_heading_docx() -> bytes:
    """Headings numbered by Word's list numbering (the number is not in the text), a
    hyperlink, a tracked deletion and insertion, and text Markdown would misread."""
    d = docx.Document()
    for title in ("Scope", "Access"):
        heading = d.add_heading(title, level=1)
        heading._p.get_or_add_pPr().append(
            parse_xml(f'<w:numPr {nsdecls("w")}><w:ilvl w:val="0"/><w:numId w:val="5"/></w:numPr>')
        )
        d.add_paragraph(f"Body of {title.lower()}.")
    p = d.add_paragraph("See ")
    p._p.append(
        parse_xml(
            f'<w:hyperlink {nsdecls("w", "r")} r:id="rId99"><w:r><w:t>the handbook</w:t></w:r>'
            "</w:hyperlink>"
        )
    )
    p._p.append(parse_xml(f"<w:del {nsdecls('w')}><w:r><w:delText>old</w:delText></w:r></w:del>"))
    p._p.append(parse_xml(f"<w:ins {nsdecls('w')}><w:r><w:t> now</w:t></w:r></w:ins>"))
    for line in ("# not a heading", "---", "| not | a table |", "> not a quote", "ends with #"):
        d.add_paragraph(line)
    d.add_heading("C# #", level=2)
    return saved(d)


def test_docx_numbered_headings_links_revisions_and_escapes() -> None:
    text = DOCX.extract(numbered_heading_docx(), LIMITS).text
    assert text == (
        "# 1. Scope\n\nBody of scope.\n\n# 2. Access\n\nBody of access.\n\n"
        "See the handbook now\n\n"
        "\\# not a heading\n\n\\---\n\n\\| not | a table |\n\n\\> not a quote\n\nends with #\n\n"
        "## C# \\#\n"
    )
    chunks = parse(text).chunks
    assert [c.heading_path for c in chunks if c.kind is ChunkKind.SECTION] == [
        ("1. Scope",),
        ("2. Access",),
        ("2. Access", "C# #"),
    ]


def test_docx_merged_cells_repeat_their_text_in_a_word_made_file() -> None:
    """A file Word wrote (tests/fixtures/formats/README.md): merged cells repeat their text
    in every grid cell they cover, across columns and rows."""
    text = DOCX.extract((FIXTURES / "docx-merged-cells.docx").read_bytes(), LIMITS).text
    tables = text.split("\n\n")
    assert tables == [
        "| 1 | 2 | 3 |\n| --- | --- | --- |\n| 4 | 5 | 6 |\n| 7 | 8 | 9 |",
        "| 1 | 2 | 3 |\n| --- | --- | --- |\n| 4 | 4 | 6 |\n| 7 | 8 | 9 |",
        "| 1 | 2 | 3 |\n| --- | --- | --- |\n| 4 | 5 | 6 |\n| 7 | 5 | 9 |",
        "| 1 | 2 | 3 |\n| --- | --- | --- |\n| 4 | 4 | 6 |\n| 4 | 4 | 9 |\n",
    ]
    chunks = parse(text).chunks
    assert [c.kind for c in chunks].count(ChunkKind.ROW_GROUP) == 4


def test_the_libraries_default_templates_read_in_place() -> None:
    """python-docx and python-pptx ship the empty document and deck Word and PowerPoint
    made: real files, read where the packages installed them."""
    word = (files("docx") / "templates" / "default.docx").read_bytes()
    slides = (files("pptx") / "templates" / "default.pptx").read_bytes()
    assert DOCX.extract(word, LIMITS) == Extracted("")
    assert PPTX.extract(slides, LIMITS) == Extracted("")


def test_the_extractors_declare_what_the_registry_needs() -> None:
    assert [(e.name, e.version, e.suffixes, e.binary) for e in EXTRACTORS] == [
        ("docx", "1.0.0", (".docx",), True),
        ("pptx", "1.1.0", (".pptx",), True),
        ("xlsx", "2.1.0", (".xlsx",), True),
    ]
    assert isinstance(DOCX, DocxExtractor)


# ---------------------------------------------------------------------------------------
# PowerPoint


def deck_pptx(slides: int = 3) -> bytes:
    """A quarterly review: a title slide, a bulleted slide, a table slide; notes on each."""
    p = pptx.Presentation()
    s = p.slides.add_slide(p.slide_layouts[0])
    s.shapes.title.text = "Quarterly review"
    s.placeholders[1].text = "Platform team"
    s.notes_slide.notes_text_frame.text = "Welcome everyone.\nKeep it short."
    s = p.slides.add_slide(p.slide_layouts[1])
    s.shapes.title.text = "Highlights"
    frame = s.placeholders[1].text_frame
    frame.text = "Uptime 99.95%"
    for text, level in (("Two incidents", 1), ("Both resolved in an hour", 2), ("Latency", 0)):
        para = frame.add_paragraph()
        para.text, para.level = text, level
    box = s.shapes.add_textbox(Inches(1), Inches(6.5), Inches(6), Inches(0.5))
    box.text_frame.text = "Source: the SLO dashboard"
    s.notes_slide.notes_text_frame.text = "Mention the on-call rotation."
    s = p.slides.add_slide(p.slide_layouts[5])
    s.shapes.title.text = "Numbers"
    table = s.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate([("Metric", "Value"), ("Uptime", "99.95%"), ("Incidents", "2")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    s.notes_slide.notes_text_frame.text = "Numbers are for the quarter."
    for n in range(3, slides):
        extra = p.slides.add_slide(p.slide_layouts[6])  # blank: no title placeholder
        extra.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text = f"Extra {n}"
    return saved(p)


DECK = """\
## Slide 1: Quarterly review

Platform team

> Notes: Welcome everyone.
> Keep it short.

## Slide 2: Highlights

- Uptime 99.95%

  - Two incidents

    - Both resolved in an hour

- Latency

Source: the SLO dashboard

> Notes: Mention the on-call rotation.

## Slide 3: Numbers

| Metric | Value |
| --- | --- |
| Uptime | 99.95% |
| Incidents | 2 |

> Notes: Numbers are for the quarter.
"""


def test_pptx_one_section_per_slide_with_notes_and_pages() -> None:
    extracted = PPTX.extract(deck_pptx(), LIMITS)
    text = extracted.text
    assert text == DECK
    assert [p.number for p in extracted.pages] == [1, 2, 3]
    for page in extracted.pages:
        assert text[page.start :].startswith(f"## Slide {page.number}:")
    parsed = cut(extracted)
    check_faithful(text, parsed)
    sections = [c for c in parsed.chunks if c.kind is ChunkKind.SECTION]
    assert [s.heading_path for s in sections] == [
        ("Slide 1: Quarterly review",),
        ("Slide 2: Highlights",),
        ("Slide 3: Numbers",),
    ]

    def slide_of(start: int) -> int:
        return max(p.number for p in extracted.pages if p.start <= start)

    located = {slide_of(c.span.char_start) for c in parsed.chunks if "Notes:" in c.text}
    assert located == {1, 2, 3}
    row_group = next(c for c in parsed.chunks if c.kind is ChunkKind.ROW_GROUP)
    assert slide_of(row_group.span.char_start) == 3
    assert row_group.labels == ("key:Uptime", "key:Incidents")
    # The notes are a chunk of their own and the context of every other chunk of the slide.
    notes = {
        1: "Notes: Welcome everyone. Keep it short.",
        2: "Notes: Mention the on-call rotation.",
        3: "Notes: Numbers are for the quarter.",
    }
    for chunk in parsed.chunks:
        if chunk.text.lstrip().startswith("> Notes:"):
            assert chunk.context == ""
        else:
            assert chunk.context == notes[slide_of(chunk.span.char_start)], chunk.text
    quotes = [c for c in parsed.chunks if c.text.lstrip().startswith("> Notes:")]
    assert [(q.parent_ordinal, q.heading_path) for q in quotes] == [
        (s.ordinal, s.heading_path) for s in sections
    ]


def test_pptx_notes_context_is_cut_at_its_limit() -> None:
    p = pptx.Presentation()
    s = p.slides.add_slide(p.slide_layouts[1])
    s.shapes.title.text = "Long"
    s.notes_slide.notes_text_frame.text = "word " * 1_000
    extracted = PPTX.extract(saved(p), LIMITS)
    (section, *_) = cut(extracted).chunks
    assert len(section.context) == NOTES_CONTEXT
    assert section.context.startswith("Notes: word word") and section.context.endswith("…")


def test_pptx_a_slide_without_title_is_named_by_its_first_text() -> None:
    text = PPTX.extract(deck_pptx(slides=4), LIMITS).text
    assert text.endswith("## Slide 4: Extra 3\n\nExtra 3\n")


def test_pptx_more_slides_than_the_limit_are_refused() -> None:
    with pytest.raises(TooLarge, match=r"has 4 slides, over the 3-slide limit"):
        PPTX.extract(deck_pptx(slides=4), Limits(max_pages=3))


def test_pptx_bullets_inherited_from_layout_and_master_in_a_powerpoint_made_file() -> None:
    """A file PowerPoint wrote: its body placeholder's paragraphs carry no bullet of their
    own, they take it from the master; the title takes none."""
    data = (FIXTURES / "pptx-inherited-placeholders.pptx").read_bytes()
    extracted = PPTX.extract(data, LIMITS)
    assert extracted.text == (
        "## Slide 1: Title Text\n\n- Body Text\n\n> Notes: Notes in inherited position and size."
        "\n\n## Slide 2\n\n> Notes: Notes in modified position and size.\n"
    )
    assert [p.number for p in extracted.pages] == [1, 2]


# ---------------------------------------------------------------------------------------
# Excel


def cache_formula_results(data: bytes, results: dict[str, str]) -> bytes:
    """openpyxl writes formulas without results; Excel stores the last result beside each.
    Put the results in, as Excel would, so the file holds what a saved workbook holds."""
    out = BytesIO()
    with zipfile.ZipFile(BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            body = src.read(item.filename)
            if item.filename.startswith("xl/worksheets/"):
                xml = body.decode()
                for ref, value in results.items():
                    xml = re.sub(
                        rf'(<c r="{ref}"[^>]*>)<f>([^<]*)</f><v\s*/?>(?:</v>)?',
                        rf"\1<f>\2</f><v>{value}</v>",
                        xml,
                    )
                body = xml.encode()
            dst.writestr(item, body)
    return out.getvalue()


def book_xlsx() -> bytes:
    """A budget sheet of 25 rows with dates, integers, fractions and a formula; a staff
    sheet starting at B2 with a date-time, a boolean and a cell with a pipe."""
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws.append(["Item", "Cost", "Date", None, None])
    for n in range(25):
        ws.append([f"item {n}", n * 10 if n % 2 else n * 1.5, dt.date(2024, 1, 1 + n)])
    ws.append(["Total", "=SUM(B2:B26)"])
    ws.append([])  # trailing empty rows and columns are not part of the table
    staff = wb.create_sheet("Staff")
    staff["B2"], staff["C2"], staff["D2"] = "Name", "Start", "On call"
    staff["B3"], staff["C3"], staff["D3"] = "Ann | ops", dt.datetime(2023, 5, 1, 9, 30), True
    staff["B5"], staff["C5"], staff["D5"] = "Bo", dt.datetime(2022, 11, 7), False
    data = saved(wb)
    return cache_formula_results(data, {"B27": "1515"})


def test_xlsx_sheets_become_sections_cut_by_the_csv_parser() -> None:
    extracted = XLSX.extract(book_xlsx(), LIMITS)
    text = extracted.text
    assert "SUM" not in text  # cached results only, never the formula
    assert text.startswith(
        "## Sheet: Budget\n\nItem,Cost,Date\n"
        "item 0,0,2024-01-01\nitem 1,10,2024-01-02\nitem 2,3,2024-01-03\n"
        "item 3,30,2024-01-04\n"
    )
    assert "item 5,50,2024-01-06\nitem 6,9,2024-01-07\n" in text
    assert "item 24,36,2024-01-25\nTotal,1515,\n\n" in text
    assert text.endswith(
        "## Sheet: Staff\n\nName,Start,On call\n"
        "Ann | ops,2023-05-01T09:30:00,TRUE\nBo,2022-11-07,FALSE\n"
    )
    assert [(r.parser, text[r.start : r.end].split("\n")[0]) for r in extracted.regions] == [
        ("csv:header", "Item,Cost,Date"),
        ("csv:header", "Name,Start,On call"),
    ]
    parsed = cut(extracted)
    check_faithful(text, parsed)
    sections = [c for c in parsed.chunks if c.kind is ChunkKind.SECTION]
    assert [c.heading_path for c in sections] == [("Sheet: Budget",), ("Sheet: Staff",)]
    groups = [c for c in parsed.chunks if c.kind is ChunkKind.ROW_GROUP]
    # The CSV parser's groups of 25 rows under the header: items 0 to 24, then the total.
    assert [g.parent_ordinal for g in groups] == [sections[0].ordinal] * 2 + [sections[1].ordinal]
    assert groups[0].context == "" and groups[0].text.startswith("Item,Cost,Date\n")
    assert groups[1].context == "Item,Cost,Date\n"
    assert groups[1].labels == ("key:Total",)
    assert groups[2].labels == ("key:Ann | ops", "key:Bo")


def test_xlsx_a_quoted_cell_stays_in_its_row_group() -> None:
    wb = openpyxl.Workbook()
    wb.active.append(["Step", "Action"])
    wb.active.append(["1", 'Page "on-call",\nthen wait'])
    extracted = XLSX.extract(saved(wb), LIMITS)
    assert extracted.text == ('## Sheet: Sheet\n\nStep,Action\n1,"Page ""on-call"",\nthen wait"\n')
    (group,) = [c for c in cut(extracted).chunks if c.kind is ChunkKind.ROW_GROUP]
    assert group.text == 'Step,Action\n1,"Page ""on-call"",\nthen wait"'


def test_xlsx_a_fraction_keeps_its_digits_and_an_excel_made_file_reads() -> None:
    wb = openpyxl.Workbook()
    wb.active.append(["x", 2.5, 0.1 + 0.2, 1e20, -3.0, dt.time(14, 5), dt.timedelta(hours=26)])
    assert XLSX.extract(saved(wb), LIMITS).text == (
        "## Sheet: Sheet\n\nx,2.5,0.3,1e+20,-3,14:05:00,26:00:00\n"
    )
    excel = XLSX.extract((FIXTURES / "xlsx-excel-made.xlsx").read_bytes(), LIMITS)
    assert excel.text == "## Sheet: Sheet1\n\n1\n2\n3\n"


def test_xlsx_cells_and_sheets_past_the_limits_are_refused() -> None:
    data = book_xlsx()
    with pytest.raises(TooLarge, match=r"holds over 51 cells .* past the 50-cell limit"):
        XLSX.extract(data, Limits(max_cells=50))
    with pytest.raises(TooLarge, match=r"has 2 worksheets, over the 1-sheet limit"):
        XLSX.extract(data, Limits(max_pages=1))


def test_xlsx_a_sheet_spanning_the_whole_grid_is_refused_in_bounded_memory() -> None:
    """Two cells, at A1 and in the grid's last column 100,000 rows down: a used range of
    1.6 billion cells, nearly all of them empty."""
    wb = openpyxl.Workbook()
    wb.active["A1"] = "first"
    wb.active["XFD100000"] = "last"
    data = saved(wb)
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge, match=r"spans over 100,000 rows by 16,384 columns"):
            XLSX.extract(data, LIMITS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 1024 * 1024


# ---------------------------------------------------------------------------------------
# Zip bombs, malformed files


def with_members(data: bytes, extra: dict[str, bytes], *, stored: bool = False) -> bytes:
    out = BytesIO()
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(BytesIO(data)) as src, zipfile.ZipFile(out, "w", method) as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item.filename))
        for name, body in extra.items():
            dst.writestr(name, body)
    return out.getvalue()


@pytest.fixture(scope="module")
def zeros_bomb() -> bytes:
    """A Word document one member of which is 300 MB of zeros, deflated to about 300 KB;
    written in 1 MB pieces, so the test itself never holds 300 MB."""
    out = BytesIO()
    simple = docx.Document()
    simple.add_paragraph("Looks harmless.")
    with (
        zipfile.ZipFile(BytesIO(saved(simple))) as src,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for item in src.infolist():
            dst.writestr(item, src.read(item.filename))
        with dst.open("word/media/zeros.bin", "w") as member:
            piece = bytes(1 << 20)
            for _ in range(300):
                member.write(piece)
    return out.getvalue()


@pytest.mark.parametrize("extractor", EXTRACTORS, ids=lambda e: e.name)
def test_a_zip_bomb_is_refused_from_its_directory_in_bounded_memory(
    zeros_bomb: bytes, extractor: Extractor
) -> None:
    assert len(zeros_bomb) < 2_000_000
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge) as refused:
            extractor.extract(zeros_bomb, LIMITS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 1024 * 1024
    figure = re.search(
        r"decompresses to ([\d,]+) bytes, over the 268,435,456-byte limit", str(refused.value)
    )
    assert figure is not None and int(figure.group(1).replace(",", "")) > 300 * 1024 * 1024


def test_a_highly_compressed_member_under_the_total_is_refused_by_its_ratio() -> None:
    simple = saved(docx.Document())
    bomb = with_members(simple, {"word/media/zeros.bin": bytes(20 * 1024 * 1024)})
    with pytest.raises(TooLarge, match=r"'word/media/zeros.bin' decompresses 20,971,520 bytes"):
        DOCX.extract(bomb, LIMITS)


@pytest.mark.parametrize("extractor", EXTRACTORS, ids=lambda e: e.name)
def test_an_archive_of_too_many_members_is_refused(extractor: Extractor) -> None:
    many = with_members(saved(docx.Document()), {f"x/{n}": b"" for n in range(20_000)}, stored=True)
    with pytest.raises(TooLarge, match=r"holds 20,0\d\d archive members, over the 10,000 limit"):
        extractor.extract(many, LIMITS)


def lie_about_size(data: bytes, name: str, claimed: int) -> bytes:
    """The archive with member `name` claiming `claimed` bytes decompressed, in its local
    header and in the central directory."""
    buf = bytearray(data)
    with zipfile.ZipFile(BytesIO(data)) as archive:
        info = archive.getinfo(name)
    struct.pack_into("<I", buf, info.header_offset + 22, claimed)
    at = buf.find(b"PK\x01\x02")
    while at != -1:
        length = struct.unpack_from("<H", buf, at + 28)[0]
        if buf[at + 46 : at + 46 + length] == name.encode():
            struct.pack_into("<I", buf, at + 24, claimed)
        at = buf.find(b"PK\x01\x02", at + 46)
    return bytes(buf)


def test_a_member_that_claims_less_than_it_holds_is_cut_and_refused() -> None:
    lying = lie_about_size(policy_docx(), "word/document.xml", 100)
    with pytest.raises(Unreadable, match=r"Word document cannot be read \(BadZipFile"):
        DOCX.extract(lying, LIMITS)


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{n} "{("&lol" + (str(n - 1) if n > 1 else "") + ";") * 10}">'
        for n in range(1, 10)
    )
    + "]>"
)


def test_xml_entity_expansion_is_not_performed() -> None:
    book = book_xlsx()
    sheet = (
        BILLION_LAUGHS
        + '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        '<sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>&lol9;</t></is></c></row>'
        "</sheetData></worksheet>"
    )
    out = BytesIO()
    with zipfile.ZipFile(BytesIO(book)) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            body = src.read(item.filename)
            dst.writestr(item, sheet.encode() if item.filename.endswith("sheet1.xml") else body)
    with pytest.raises(Unreadable, match=r"workbook cannot be read"):
        XLSX.extract(out.getvalue(), LIMITS)

    word = saved(docx.Document())
    with zipfile.ZipFile(BytesIO(word)) as src:
        document = src.read("word/document.xml").decode()
    laughing = BILLION_LAUGHS.replace("lolz", "w:document") + document.split("?>", 1)[1].replace(
        "<w:body>", "<w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>", 1
    )
    out = BytesIO()
    with zipfile.ZipFile(BytesIO(word)) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            body = src.read(item.filename)
            dst.writestr(item, laughing.encode() if item.filename == "word/document.xml" else body)
    try:
        text = DOCX.extract(out.getvalue(), LIMITS).text
    except Unreadable:
        return
    assert "lol" not in text  # entities are left unexpanded


@pytest.mark.parametrize("extractor", EXTRACTORS, ids=lambda e: e.name)
def test_a_zip_that_is_not_its_format_is_unreadable(extractor: Extractor) -> None:
    out = BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("notes.txt", "just a zip")
    with pytest.raises(Unreadable, match=r"cannot be read \("):
        extractor.extract(out.getvalue(), LIMITS)


def test_one_office_format_given_to_another_is_unreadable() -> None:
    with pytest.raises(Unreadable):
        DOCX.extract(deck_pptx(), LIMITS)
    with pytest.raises(Unreadable):
        PPTX.extract(policy_docx(), LIMITS)
    with pytest.raises(Unreadable):
        XLSX.extract(policy_docx(), LIMITS)


@pytest.mark.parametrize("extractor", EXTRACTORS, ids=lambda e: e.name)
def test_an_encrypted_or_legacy_file_is_unreadable_with_what_to_do(
    extractor: Extractor,
) -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(4096)
    with pytest.raises(Unreadable, match=r"password-protected, or a legacy binary file"):
        extractor.extract(ole, LIMITS)


def test_a_file_over_the_byte_limit_is_refused() -> None:
    with pytest.raises(TooLarge, match=r"is [\d,]+ bytes, over the 1,000-byte limit"):
        DOCX.extract(policy_docx(), Limits(max_bytes=1_000))


def test_text_past_the_limit_is_refused_not_cut() -> None:
    with pytest.raises(TooLarge, match=r"extracts to over [\d,]+ characters, past the 200 limit"):
        DOCX.extract(policy_docx(), Limits(max_text_chars=200))


def test_word_table_cells_count_against_the_cell_limit() -> None:
    with pytest.raises(TooLarge, match=r"holds over 30 table cells, past the 29-cell limit"):
        DOCX.extract(policy_docx(), Limits(max_cells=29))


SAMPLES = {"docx": policy_docx(), "pptx": deck_pptx(), "xlsx": book_xlsx()}


@given(data=st.binary(max_size=2_000))
@settings(max_examples=60, deadline=None)
def test_random_bytes_are_unreadable(data: bytes) -> None:
    for extractor in EXTRACTORS:
        with pytest.raises(Unreadable):
            extractor.extract(data, LIMITS)


@given(cut=st.floats(0.0, 0.999), kind=st.sampled_from(sorted(SAMPLES)))
@settings(max_examples=40, deadline=None)
def test_a_truncated_file_is_unreadable(cut: float, kind: str) -> None:
    data = SAMPLES[kind]
    extractor = {"docx": DOCX, "pptx": PPTX, "xlsx": XLSX}[kind]
    with pytest.raises(Unreadable):
        extractor.extract(data[: int(len(data) * cut)], LIMITS)


@given(at=st.integers(0, 10_000), kind=st.sampled_from(sorted(SAMPLES)))
@settings(max_examples=40, deadline=None)
def test_a_corrupted_file_is_read_or_unreadable_never_another_error(at: int, kind: str) -> None:
    data = bytearray(SAMPLES[kind])
    at = at % len(data)
    data[at : at + 8] = b"\xff" * 8
    extractor = {"docx": DOCX, "pptx": PPTX, "xlsx": XLSX}[kind]
    # A corrupted size in the zip directory is refused as too large, with the figure.
    with contextlib.suppress(Unreadable, TooLarge):
        extractor.extract(bytes(data), LIMITS)


# ---------------------------------------------------------------------------------------
# Properties: the same bytes give the same text, and the parser's chunks are exact spans

xml_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff"),
    max_size=40,
)
lines = st.one_of(
    xml_text,
    st.sampled_from(
        [
            "§ 4 Scope",
            "4.1.2 Logged",
            "(a) kept",
            "1. typed",
            "- typed",
            "# hash",
            "#",
            "---",
            "===",
            "```py",
            "> quoted",
            "<div>",
            "    code",
            "[ref]: /x",
            "| a | b |",
            "--- | ---",
            "ends with ##",
        ]
    ),
    st.builds(lambda a, b: f"{a}\n{b}", xml_text, xml_text),
    st.builds(lambda a, b: f"{a} | {b}", xml_text, xml_text),
)
blocks = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "Normal",
                "Title",
                "Heading 1",
                "Heading 2",
                "List Number",
                "List Bullet",
                "List Number 2",
                "table",
            ]
        ),
        lines,
        st.integers(1, 4),
    ),
    max_size=12,
)


HEADINGS = frozenset(("Title", "Heading 1", "Heading 2"))


def blocks_of(text: str) -> list[str]:
    """The kinds of the blocks CommonMark (with GFM tables) sees, at any depth."""
    kinds = []
    for event in pyromark.events(text, options=pyromark.Options.ENABLE_TABLES):
        opened = event.get("Start") if isinstance(event, dict) else None
        if opened is not None:
            kinds.append(opened if isinstance(opened, str) else next(iter(opened)))
    return kinds


def document_of(content: list[tuple[str, str, int]]) -> bytes:
    d = docx.Document()
    for style, text, size in content:
        if style == "table":
            table = d.add_table(rows=size, cols=2)
            for r in range(size):
                table.cell(r, 0).text, table.cell(r, 1).text = text, f"{r}|{text[:5]}"
        else:
            d.add_paragraph(text, style=style)
    return saved(d)


@given(content=blocks)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_word_text_is_deterministic_and_its_chunks_are_exact_spans(
    content: list[tuple[str, str, int]],
) -> None:
    first = document_of(content)
    text = DOCX.extract(first, LIMITS).text
    assert DOCX.extract(first, LIMITS).text == text  # the same bytes
    assert DOCX.extract(document_of(content), LIMITS).text == text  # the same content, saved again
    check_faithful(text, parse(text))
    # Structure comes from the file, never from its text: one heading per heading
    # paragraph, one table per table.
    headings = sum(1 for style, line, _ in content if style in HEADINGS and line.strip())
    assert blocks_of(text).count("Heading") == headings
    assert blocks_of(text).count("Table") == sum(1 for style, _, _ in content if style == "table")


@given(
    slides=st.lists(st.lists(st.tuples(lines, st.integers(0, 3)), max_size=4), max_size=4),
    notes=xml_text,
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_slides_text_is_deterministic_and_its_chunks_are_exact_spans(
    slides: list[list[tuple[str, int]]], notes: str
) -> None:
    p = pptx.Presentation()
    for paragraphs in slides:
        slide = p.slides.add_slide(p.slide_layouts[1])
        slide.shapes.title.text = paragraphs[0][0] if paragraphs else ""
        frame = slide.placeholders[1].text_frame
        for n, (text, level) in enumerate(paragraphs):
            para = frame.paragraphs[0] if n == 0 else frame.add_paragraph()
            para.text, para.level = text, level
        slide.notes_slide.notes_text_frame.text = notes
    data = saved(p)
    extracted = PPTX.extract(data, LIMITS)
    assert PPTX.extract(data, LIMITS) == extracted
    assert len(extracted.pages) == len(slides)
    check_faithful(extracted.text, parse(extracted.text))
    kinds = blocks_of(extracted.text)
    assert kinds.count("Heading") == len(slides)
    assert kinds.count("BlockQuote") == (len(slides) if notes.strip() else 0)
    assert kinds.count("Table") == 0


cell_values = st.one_of(
    st.none(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.booleans(),
    st.dates(dt.date(1900, 3, 1), dt.date(2100, 1, 1)),
    xml_text.filter(lambda s: not s.startswith("=")),
)


@given(rows=st.lists(st.lists(cell_values, max_size=5), max_size=30))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_sheet_text_is_deterministic_and_its_chunks_are_exact_spans(
    rows: list[list[object]],
) -> None:
    wb = openpyxl.Workbook()
    for row in rows:
        wb.active.append(row)
    data = saved(wb)
    extracted = XLSX.extract(data, LIMITS)
    text = extracted.text
    assert XLSX.extract(data, LIMITS) == extracted
    assert text.startswith("## Sheet: Sheet\n")
    check_faithful(text, cut(extracted))
    with_values = [r for r in rows if any(v is not None and v != "" for v in r)]
    assert len(extracted.regions) == (1 if with_values else 0)
    if with_values:
        (region,) = extracted.regions
        read = list(csv.reader(io.StringIO(text[region.start : region.end], newline="")))
        assert len(read) == len(with_values)  # one CSV record per row with a value


def test_xlsx_a_sheet_of_numbers_has_no_header_and_a_sheet_of_names_has_one() -> None:
    """The Excel-made file is one column of numbers: its first row is data, so the CSV
    parser guesses (as for a .csv); a row of names over data is the header, told."""
    excel = XLSX.extract((FIXTURES / "xlsx-excel-made.xlsx").read_bytes(), LIMITS)
    assert [r.parser for r in excel.regions] == ["csv"]
    (group,) = [c for c in cut(excel).chunks if c.kind is ChunkKind.ROW_GROUP]
    assert group.labels == ("key:1", "key:2", "key:3")
    wb = openpyxl.Workbook()
    for row in (["Amount (EUR)", "Due"], [12, dt.date(2025, 1, 2)], [7, dt.date(2025, 2, 3)]):
        wb.active.append(row)
    named = XLSX.extract(saved(wb), LIMITS)
    assert [r.parser for r in named.regions] == ["csv:header"]
    (group,) = [c for c in cut(named).chunks if c.kind is ChunkKind.ROW_GROUP]
    assert group.labels == ("key:12", "key:7")  # the header is no key
