"""The PDF extractor on files written by a real PDF library (reportlab) and on a real-world
file: headings from type sizes, numbered clauses kept at line starts, paragraphs rejoined
across line wraps, pages located, running footers dropped, and every refusal with its
reason (too large, no text layer, encrypted, malformed), never another exception."""

from __future__ import annotations

import bisect
import io
import random
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from reportlab.lib import pdfencrypt
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import ImageReader, simpleSplit
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen import canvas

from govindex.core.errors import NoTextLayer, TooLarge, Unreadable
from govindex.core.records import ChunkKind
from indexer.extractors.base import Extracted, Limits, Page
from indexer.extractors.pdf import PDF
from indexer.parsers import PARSERS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
LEFT, TOP, BOTTOM = 72.0, 770.0, 90.0
WIDTH = A4[0] - 2 * LEFT
FOOTER = "Acme Policy — Page {n}"


class Writer:
    """Lays text out the way a word processor does: lines wrapped at the margin, a gap
    after each paragraph, a new page when one is full, a running footer on every page.
    Remembers on which page each line was drawn."""

    def __init__(self, footer: str | None = FOOTER, **options: object) -> None:
        self.out = io.BytesIO()
        self.canvas = canvas.Canvas(self.out, pagesize=A4, invariant=1, **options)
        self.footer = footer
        self.page = 1
        self.y = TOP
        self.drawn: list[tuple[list[str], list[int]]] = []  # each paragraph: lines, pages

    def para(
        self, text: str, size: float = 10, bold: bool = False, lines: list[str] | None = None
    ) -> None:
        """A paragraph wrapped at the margin, or set in the `lines` given, justified."""
        font = "Helvetica-Bold" if bold else "Helvetica"
        justified = lines is not None
        lines = lines or simpleSplit(text, font, size, WIDTH)
        leading = size * 1.25
        if (bold or size > 10) and self.y - 3 * leading < BOTTOM:  # headings keep with next
            self.new_page()
        pages = []
        for line in lines:
            if self.y < BOTTOM:
                self.new_page()
            spaces = line.count(" ")
            room = WIDTH - stringWidth(line, font, size)
            words = self.canvas.beginText(LEFT, self.y)
            words.setFont(font, size)
            # Word spacing is graphics state: set it on every line, not only justified ones.
            words.setWordSpace(room / spaces if justified and spaces and line != lines[-1] else 0)
            words.textLine(line)
            self.canvas.drawText(words)
            pages.append(self.page)
            self.y -= leading
        self.y -= size * 0.8
        self.drawn.append((lines, pages))

    def new_page(self) -> None:
        self._footer()
        self.canvas.showPage()
        self.page += 1
        self.y = TOP

    def bytes(self) -> bytes:
        self._footer()
        self.canvas.showPage()
        self.canvas.save()
        return self.out.getvalue()

    def _footer(self) -> None:
        if self.footer:
            self.canvas.setFont("Helvetica", 8)
            self.canvas.drawString(LEFT, 40, self.footer.format(n=self.page))


FILLER = (
    "The security team keeps this policy under review and publishes every change to "
    "the staff handbook, with the reason for the change and the date it takes effect. "
)


def policy() -> Writer:
    """A three-page access policy: a title, section headings, a bold sub-heading,
    numbered steps and clauses, hyphenated line breaks, a paragraph over a page break."""
    w = Writer()
    w.para("Acme Access Control Policy", size=20, bold=True)
    w.para(
        "",
        lines=[
            "This policy sets out how Acme staff obtain, use and give up access to",
            "production systems. A break-glass account is an exam-",
            "ple of access that is logged twice; the Anglo-",
            "Saxon names of the old systems are kept as they were.",
        ],
    )
    w.para("Purpose and Scope", size=13, bold=True)
    w.para(
        "1. This policy applies to every employee, contractor and service account that can "
        "reach a production system, whether directly or through automation of any kind."
    )
    w.para("2. It does not cover corporate laptops, which the IT handbook governs.")
    w.para("Access Rules", size=13, bold=True)
    w.para(
        "1.1 An operator may access production only through the bastion host, using a "
        "personal account protected by a hardware key issued by the security team."
    )
    w.para(
        "1.2 Access is granted for at most eight hours at a time and names the change or "
        "the incident that needs it."
    )
    w.para("Emergency access", bold=True)
    w.para(
        "(a) Emergency access may be taken without prior approval while a customer-facing "
        "service is down."
    )
    w.para("(b) Emergency access is reported to the security team within one working day.")
    w.para("Background", size=13, bold=True)
    for _ in range(3):
        w.para(FILLER * 5)
    w.para("Logging and Review", size=13, bold=True)
    w.para(
        "§ 4 Every session on a production system is recorded, and the recording is kept "
        "for one year in the audit account."
    )
    w.para("4.1 No operator can write to the audit account or delete a recording from it.")
    w.para(
        "4.2 The security team reviews a sample of the recordings every month and reports "
        "what it found to the risk committee."
    )
    repeats = 3
    while w.page < 3:  # until a paragraph runs over the page break into page three
        w.para(FILLER * repeats)
        repeats += 1
    w.para("Exceptions", size=13, bold=True)
    w.para(
        "§ 5 An exception to this policy is granted in writing by the chief information "
        "officer and expires after ninety days."
    )
    return w


@pytest.fixture(scope="module")
def written() -> tuple[Writer, bytes, Extracted]:
    w = policy()
    data = w.bytes()
    return w, data, PDF.extract(data, Limits())


def page_of(extracted: Extracted, offset: int) -> int:
    starts = [p.start for p in extracted.pages]
    return extracted.pages[bisect.bisect_right(starts, offset) - 1].number


def test_the_policy_spans_three_pages_and_one_paragraph_runs_over_a_break(
    written: tuple[Writer, bytes, Extracted],
) -> None:
    w, _, extracted = written
    assert w.page == 3
    assert [p.number for p in extracted.pages] == [1, 2, 3]
    assert extracted.pages[0].start == 0
    starts = [p.start for p in extracted.pages]
    assert starts == sorted(starts)
    for start in starts[1:]:
        assert extracted.text[start - 2 : start] == "\n\n"  # a page begins a block
    assert any(len(set(pages)) > 1 for _, pages in w.drawn)


def test_headings_come_from_type_size_and_weight(written: tuple[Writer, bytes, Extracted]) -> None:
    text = written[2].text
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == [
        "# Acme Access Control Policy",
        "## Purpose and Scope",
        "## Access Rules",
        "### Emergency access",
        "## Background",
        "## Logging and Review",
        "## Exceptions",
    ]
    chunks = PARSERS["markdown"].parse(text).chunks
    sections = [c.heading_path for c in chunks if c.kind is ChunkKind.SECTION]
    assert ("Acme Access Control Policy", "Access Rules", "Emergency access") in sections


def test_numbered_lines_become_steps_and_clauses(written: tuple[Writer, bytes, Extracted]) -> None:
    chunks = PARSERS["markdown"].parse(written[2].text).chunks
    clauses = {
        label: c for c in chunks for label in c.labels if label.startswith(("clause:", "step:"))
    }
    assert set(clauses) == {
        "step:1",
        "step:2",
        "clause:1.1",
        "clause:1.2",
        "clause:(a)",
        "clause:(b)",
        "clause:4",
        "clause:4.1",
        "clause:4.2",
        "clause:5",
    }
    assert clauses["step:1"].kind is ChunkKind.STEP
    assert clauses["clause:4.1"].kind is ChunkKind.CLAUSE
    assert clauses["clause:4.1"].parent_ordinal == clauses["clause:4"].ordinal
    assert clauses["clause:(a)"].heading_path[-1] == "Emergency access"
    assert clauses["clause:4"].heading_path == ("Acme Access Control Policy", "Logging and Review")


def test_a_chunk_is_located_on_the_page_its_text_was_drawn_on(
    written: tuple[Writer, bytes, Extracted],
) -> None:
    w, _, extracted = written
    first_page = {lines[0]: pages[0] for lines, pages in w.drawn if lines[0] not in FILLER}
    chunks = PARSERS["markdown"].parse(extracted.text).chunks
    located = 0
    for chunk in chunks:
        if chunk.kind not in (ChunkKind.CLAUSE, ChunkKind.STEP, ChunkKind.SECTION) or any(
            label.startswith("part:") for label in chunk.labels
        ):
            continue
        body = chunk.text.lstrip("# ")
        drawn = [page for line, page in first_page.items() if body.startswith(line)]
        assert drawn, chunk.text[:60]
        assert page_of(extracted, chunk.span.char_start) == drawn[0], chunk.text[:60]
        located += 1
    assert located >= 15
    assert {page_of(extracted, c.span.char_start) for c in chunks} == {1, 2, 3}


def test_wrapped_lines_are_rejoined_and_a_break_over_pages_makes_two_paragraphs(
    written: tuple[Writer, bytes, Extracted],
) -> None:
    w, _, extracted = written
    lines = extracted.text.splitlines()
    for drawn, pages in w.drawn[2:]:  # past the hand-hyphenated paragraph
        for page in sorted(set(pages)):
            part = " ".join(line for line, p in zip(drawn, pages, strict=True) if p == page)
            assert any(line.endswith(part) for line in lines), part[:60]
    text = extracted.text
    assert lines[2] == (
        "This policy sets out how Acme staff obtain, use and give up access to production "
        "systems. A break-glass account is an example of access that is logged twice; the "
        "Anglo-Saxon names of the old systems are kept as they were."
    )
    assert "the Anglo-Saxon names" in text
    assert "exam-" not in text


def test_running_footers_are_dropped(written: tuple[Writer, bytes, Extracted]) -> None:
    text = written[2].text
    assert "Acme Policy" not in text
    assert "Page 2" not in text


def test_the_same_bytes_give_the_same_text(written: tuple[Writer, bytes, Extracted]) -> None:
    _, data, extracted = written
    again = PDF.extract(bytes(data), Limits())
    assert again == extracted


def test_text_in_one_size_and_weight_gets_no_headings() -> None:
    w = Writer(footer=None)
    for text in ("Purpose", "This policy covers production access.", "Scope", "Everyone."):
        w.para(text)
    extracted = PDF.extract(w.bytes(), Limits())
    assert extracted.text == (
        "Purpose\n\nThis policy covers production access.\n\nScope\n\nEveryone.\n"
    )


def test_a_bare_page_number_and_a_page_n_of_m_footer_are_dropped() -> None:
    w = Writer(footer="Page {n} of 2")
    w.para("First page body text that is not a footer at all.")
    w.new_page()
    w.para("Second page body text.")
    w.canvas.drawString(A4[0] / 2, 60, "2")
    extracted = PDF.extract(w.bytes(), Limits())
    first = "First page body text that is not a footer at all."
    assert extracted.text == f"{first}\n\nSecond page body text.\n"
    assert extracted.pages == (Page(0, 1), Page(len(first) + 2, 2))


def test_a_word_hyphenated_over_a_page_break_keeps_its_hyphen_and_the_footer_goes() -> None:
    # PDFium joins a line ending in a hyphen to whatever the content draws next, here the
    # footer: the extractor splits them again where the next text is not the next line.
    w = Writer()
    w.para("", lines=["The agreement covers the whole of the inter-"])
    w.new_page()
    w.para("", lines=["national network, and nothing else."])
    extracted = PDF.extract(w.bytes(), Limits())
    assert extracted.text == (
        "The agreement covers the whole of the inter-\n\nnational network, and nothing else.\n"
    )


def test_markdown_lookalikes_in_prose_are_escaped() -> None:
    w = Writer(footer=None)
    for text in ("# not a heading", "> not a quote", "```", "<div>", "---", "plain"):
        w.para(text)
    extracted = PDF.extract(w.bytes(), Limits())
    assert extracted.text.splitlines()[::2] == [
        "\\# not a heading",
        "\\> not a quote",
        "\\```",
        "\\<div>",
        "\\---",
        "plain",
    ]
    kinds = {c.kind for c in PARSERS["markdown"].parse(extracted.text).chunks}
    assert ChunkKind.SECTION not in kinds


def test_empty_pages_are_listed_where_the_next_page_begins() -> None:
    w = Writer(footer=None)
    w.para("Page one.")
    w.new_page()
    w.new_page()
    w.para("Page three.")
    w.new_page()
    extracted = PDF.extract(w.bytes(), Limits())
    assert extracted.text == "Page one.\n\nPage three.\n"
    assert extracted.pages == (Page(0, 1), Page(11, 2), Page(11, 3), Page(23, 4))


def test_a_real_world_libreoffice_file() -> None:
    data = (FIXTURES / "pdf-libreoffice-structure.pdf").read_bytes()
    extracted = PDF.extract(data, Limits())
    lines = extracted.text.splitlines()
    assert lines[:4] == ["# Titre du document", "", "## Titre 1", ""]
    assert "### Titre 2" in lines
    assert extracted.pages == (Page(0, 1),)
    lorem = [line for line in lines if line.startswith("Lorem ipsum")]
    assert len(lorem) == 1 and lorem[0].endswith("id est laborum.")  # five lines, rejoined
    assert "a) Énumération imbriquée" in lines
    chunks = PARSERS["markdown"].parse(extracted.text).chunks
    steps = [c.labels for c in chunks if c.kind is ChunkKind.STEP]
    assert steps == [("step:1",), ("step:2",), ("step:3",)]
    assert all(c.text == extracted.text[c.span.char_start : c.span.char_end] for c in chunks)


def scan(pages: int) -> bytes:
    """Pages holding only an image and a drawn frame, as a scanner writes them."""
    out = io.BytesIO()
    c = canvas.Canvas(out, pagesize=A4, invariant=1)
    picture = ImageReader(Image.new("RGB", (64, 64), (200, 200, 200)))
    for _ in range(pages):
        c.drawImage(picture, 72, 300, 400, 400)
        c.rect(60, 290, 424, 424)
        c.showPage()
    c.save()
    return out.getvalue()


def test_a_scan_without_text_is_refused_as_having_no_text_layer() -> None:
    with pytest.raises(NoTextLayer, match="no text layer on any of its 3 pages; OCR"):
        PDF.extract(scan(3), Limits())


def many_pages(count: int) -> bytes:
    w = Writer()
    for n in range(count):
        if n:
            w.new_page()
        w.para(f"Page {n + 1} holds this paragraph. " + FILLER * 12)
    return w.bytes()


SMALL = many_pages(2)


def test_more_pages_than_the_limit_are_refused_naming_the_count() -> None:
    with pytest.raises(TooLarge, match=r"has 50 pages, over the 10-page limit"):
        PDF.extract(many_pages(50), Limits(max_pages=10))


def test_a_file_over_the_byte_limit_is_refused() -> None:
    with pytest.raises(TooLarge, match="bytes, over the 1,000-byte limit"):
        PDF.extract(many_pages(2), Limits(max_bytes=1_000))


def test_text_past_the_limit_is_refused_early_with_bounded_memory() -> None:
    data = many_pages(50)
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge, match=r"more than 5,000 characters by page 3 of 50"):
            PDF.extract(data, Limits(max_text_chars=5_000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # it stopped reading at page 3 of 50


def test_an_encrypted_file_needs_its_password() -> None:
    locked = Writer(encrypt=pdfencrypt.StandardEncryption("secret", "owner"))
    locked.para("Sealed text.")
    with pytest.raises(Unreadable, match="encrypted and needs a password"):
        PDF.extract(locked.bytes(), Limits())
    # Restrictions without a password to open (an owner password only) do not stop reading.
    restricted = Writer(footer=None, encrypt=pdfencrypt.StandardEncryption("", "owner"))
    restricted.para("Readable text.")
    assert PDF.extract(restricted.bytes(), Limits()).text == "Readable text.\n"


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.99])
def test_a_truncated_file_is_unreadable(cut: float) -> None:
    data = many_pages(3)
    with pytest.raises(Unreadable, match=r"cannot be read \(.*PDFium"):
        PDF.extract(data[: int(len(data) * cut)], Limits())


@pytest.mark.parametrize(
    "data",
    [
        b"",
        random.Random(7).randbytes(4096),
        b"%PDF-1.7\n" + random.Random(8).randbytes(4096),
        b"%PDF-1.4\n%%EOF\n",
        b"<html><body>not a PDF</body></html>",
    ],
)
def test_bytes_that_are_not_a_pdf_are_unreadable(data: bytes) -> None:
    with pytest.raises(Unreadable, match="cannot be read"):
        PDF.extract(data, Limits())


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=2048), st.integers(min_value=0, max_value=1 << 30))
def test_damaged_bytes_are_refused_or_read_never_another_exception(junk: bytes, where: int) -> None:
    data = SMALL[: where % len(SMALL)] + junk + SMALL[where % len(SMALL) :][len(junk) :]
    try:
        extracted = PDF.extract(data, Limits())
    except (Unreadable, NoTextLayer, TooLarge):
        return  # a refusal with its reason; any other exception fails the test
    assert isinstance(extracted.text, str)


# Words that cannot read as page numbers or Markdown: a letter first, no roman numerals.
WORD = st.from_regex(r"[abefghjknoprstuwyz][a-z0-9]{0,9}[,.;:!?']?", fullmatch=True)
PARAGRAPH = st.lists(WORD, min_size=1, max_size=60).map(" ".join)
DOCUMENT = st.lists(
    st.tuples(PARAGRAPH, st.sampled_from([10, 10, 10, 14, 18]), st.booleans()),
    min_size=1,
    max_size=12,
)


def write(paragraphs: list[tuple[str, int, bool]], footer: str | None = FOOTER) -> bytes:
    w = Writer(footer=footer)
    for text, size, bold in paragraphs:
        w.para(text, size=size, bold=bold)
    return w.bytes()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENT)
def test_same_bytes_same_text_and_chunks_are_exact_spans(
    paragraphs: list[tuple[str, int, bool]],
) -> None:
    data = write(paragraphs)
    first = PDF.extract(data, Limits())
    assert PDF.extract(bytes(data), Limits()) == first
    text = first.text
    for chunk in PARSERS["markdown"].parse(text).chunks:
        assert chunk.text == text[chunk.span.char_start : chunk.span.char_end]
    starts = [p.start for p in first.pages]
    assert starts == sorted(starts) and all(0 <= s <= len(text) for s in starts)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PARAGRAPH, min_size=1, max_size=6))
def test_body_text_in_one_size_comes_out_whole_and_in_order(paragraphs: list[str]) -> None:
    text = PDF.extract(write([(p, 10, False) for p in paragraphs], footer=None), Limits()).text
    assert "".join(text.split()) == "".join("".join(paragraphs).split())
    assert not text.startswith("#")


def test_each_block_keeps_the_rectangle_it_was_printed_in() -> None:
    """Drawn at known places: a 20-point heading at the top of page one, a paragraph of
    three 10-point lines below it, and an item on page two; each box holds its glyphs'
    origins and baselines (points from the page's top-left corner)."""
    height = A4[1]
    out = io.BytesIO()
    page = canvas.Canvas(out, pagesize=A4, invariant=1)
    page.setFont("Helvetica-Bold", 20)
    page.drawString(72, 770, "Retention Policy")
    page.setFont("Helvetica", 10)
    lines = simpleSplit(FILLER * 2, "Helvetica", 10, A4[0] - 90 - 72)[:3]
    for line, y in zip(lines, (700, 687.5, 675), strict=True):
        page.drawString(90, y, line)
    page.showPage()
    page.setFont("Helvetica", 10)
    page.drawString(100, 500, "1. Keep the records for a year.")
    page.showPage()
    page.save()
    extracted = PDF.extract(out.getvalue(), Limits())
    boxes = [(extracted.text[b.start : b.end], b) for b in extracted.boxes]
    assert [(text[:18], b.page) for text, b in boxes] == [
        ("# Retention Policy", 1),
        (lines[0][:18], 1),
        ("1. Keep the record", 2),
    ]
    (_, title), (_, para), (_, item) = boxes
    width = stringWidth("Retention Policy", "Helvetica-Bold", 20)
    assert title.left == pytest.approx(72, abs=0.5)
    assert title.right == pytest.approx(72 + width, abs=1.5)
    assert height - 770 - 20 < title.top < height - 770 - 10  # above the baseline
    assert height - 770 < title.bottom < height - 770 + 8  # the descenders below it
    assert para.left == pytest.approx(90, abs=0.5)
    assert height - 700 - 10 < para.top < height - 700
    assert height - 675 < para.bottom < height - 675 + 4  # all three lines
    assert item.left == pytest.approx(100, abs=0.5) and height - 500 - 10 < item.top


def test_a_real_world_files_boxes_hold_its_glyphs() -> None:
    """In the LibreOffice file every glyph PDFium places lies in its block's box."""
    import pypdfium2 as pdfium

    data = (FIXTURES / "pdf-libreoffice-structure.pdf").read_bytes()
    extracted = PDF.extract(data, Limits())
    assert len(extracted.boxes) >= 12
    document = pdfium.PdfDocument(data)
    try:
        page = document[0]
        height = page.get_height()
        textpage = page.get_textpage()
        inside = 0
        for k in range(textpage.count_chars()):
            left, bottom, right, top = textpage.get_charbox(k)
            if right - left < 0.5 or top - bottom < 0.5:
                continue  # spaces and marks without a body
            cx, cy = (left + right) / 2, height - (top + bottom) / 2
            assert any(
                b.left - 1 <= cx <= b.right + 1 and b.top - 1 <= cy <= b.bottom + 1
                for b in extracted.boxes
            ), (k, cx, cy)
            inside += 1
        textpage.close()
        page.close()
    finally:
        document.close()
    assert inside > 500
