"""Excel workbooks (.xlsx) as canonical text, each worksheet cut by the CSV parser.

One `## Sheet: <name>` heading per worksheet, then its used range as CSV (RFC 4180
quoting, rows with no value left out), which the CSV parser cuts into row groups, as it
cuts a `.csv` file: their first column as `key:` labels, and the first row as context
when it is the sheet's header (text in each of its cells, a row below it). Values are the
cached results of formulas, never the formulas, and are written the same way every time:
integers without `.0`, dates and times in ISO 8601.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
from io import BytesIO, StringIO
from typing import Any

import openpyxl  # type: ignore[import-untyped, unused-ignore]

from govindex.core.errors import TooLarge
from indexer.extractors.base import Extracted, Limits, Region, check_text
from indexer.extractors.office.common import Writer, atx_heading, check_file, reading


def _value(value: object) -> str:
    """A cell's value, written the same way every time."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return f"{value:.15g}"  # the 15 significant digits Excel shows
    if isinstance(value, dt.datetime):
        if value.tzinfo is None and value.time() == dt.time(0):
            return value.date().isoformat()
        return value.isoformat(timespec="milliseconds" if value.microsecond else "seconds")
    if isinstance(value, dt.time):
        return value.isoformat(timespec="milliseconds" if value.microsecond else "seconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        seconds = round(value.total_seconds())
        sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
        return f"{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return str(value)


_NUMBER = re.compile(r"[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?%?|\d{4}-\d\d-\d\d\S*")


def _headed(rows: list[list[str]]) -> bool:
    """Whether the sheet's first row names its columns: a row below it, and text (not a
    number or a date) in every cell of it that holds something. Told here, where the cells
    are known, rather than guessed from the CSV."""
    if len(rows) < 2:
        return False
    cells = [cell.strip() for cell in rows[0] if cell.strip()]
    return bool(cells) and not any(_NUMBER.fullmatch(cell) for cell in cells)


def _csv(rows: list[list[str]], first: int, width: int) -> str:
    """The rows' cells from column `first`, as CSV padded to `width` columns."""
    out = StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        cells = row[first:]
        writer.writerow(cells + [""] * (width - first - len(cells)))
    return out.getvalue().rstrip("\n")


def _workbook(book: Any, limits: Limits, what: str) -> tuple[str, tuple[Region, ...]]:
    sheets = book.worksheets
    if len(sheets) > limits.max_pages:
        raise TooLarge(
            f"{what} has {len(sheets):,} worksheets, over the {limits.max_pages:,}-sheet "
            "limit; split it"
        )
    out = Writer(limits, what)
    regions: list[Region] = []
    streamed = 0  # cells read from the file, empty ones included
    tabled = 0  # cells of the tables written so far
    for sheet in sheets:
        if hasattr(sheet, "reset_dimensions"):
            sheet.reset_dimensions()  # read the cells that are there, not what the file claims
        rows: list[list[str]] = []
        spanned = 0  # rows of the used range so far, the empty ones between included
        first = width = 0
        for values in sheet.iter_rows(values_only=True):
            streamed += len(values)
            if streamed > limits.max_cells:
                raise TooLarge(
                    f"{what} holds over {streamed:,} cells (reached in sheet "
                    f"{str(sheet.title)[:80]!r}), past the {limits.max_cells:,}-cell limit; "
                    "split it"
                )
            cells = [_value(v) for v in values]
            while cells and not cells[-1]:
                cells.pop()
            if not cells:
                spanned += 1 if rows else 0
                continue
            spanned += 1
            lead = next(n for n, c in enumerate(cells) if c)
            first = lead if not rows else min(first, lead)
            width = max(width, len(cells))
            if tabled + spanned * (width - first) > limits.max_cells:
                raise TooLarge(
                    f"{what}: sheet {str(sheet.title)[:80]!r} spans over "
                    f"{spanned:,} rows by {width - first:,} columns, past the "
                    f"{limits.max_cells:,}-cell limit with the sheets before it; split it"
                )
            rows.append(cells)
        tabled += spanned * (width - first)
        out.add(atx_heading(2, f"Sheet: {sheet.title}"))
        if rows:
            block = _csv(rows, first, width)
            start = out.add(block)
            parser = "csv:header" if _headed(rows) else "csv"
            regions.append(Region(start, start + len(block), parser))
    return out.text(), tuple(regions)


class XlsxExtractor:
    """Excel workbooks (.xlsx) through openpyxl, streaming (read-only), cached values."""

    name = "xlsx"
    version = "2.1.0"
    suffixes: tuple[str, ...] = (".xlsx",)
    binary = True

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        what = "the workbook"
        check_file(data, limits, what, ".xlsx")
        with reading(what):
            book = openpyxl.load_workbook(
                BytesIO(data), read_only=True, data_only=True, keep_links=False
            )
            try:
                text, regions = _workbook(book, limits, what)
            finally:
                book.close()
        return Extracted(check_text(text, limits, what), regions=regions)


XLSX = XlsxExtractor()
