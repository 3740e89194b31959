"""Excel workbooks (.xlsx) as canonical Markdown, one pipe table per worksheet.

One `## Sheet: <name>` section per worksheet holds a pipe table of its used range, the
first non-empty row as the header (the parser then cuts row groups that carry it). Values
are the cached results of formulas, never the formulas, and are written the same way
every time: integers without `.0`, dates and times in ISO 8601.
"""

from __future__ import annotations

import datetime as dt
from io import BytesIO
from typing import Any

import openpyxl  # type: ignore[import-untyped, unused-ignore]

from govindex.core.errors import TooLarge
from indexer.extractors.base import Extracted, Limits, check_text
from indexer.extractors.office.common import Writer, atx_heading, check_file, reading, table

_NO_CELLS: list[str] = []  # an empty row inside a sheet's used range (never modified)


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


def _workbook(book: Any, limits: Limits, what: str) -> str:
    sheets = book.worksheets
    if len(sheets) > limits.max_pages:
        raise TooLarge(
            f"{what} has {len(sheets):,} worksheets, over the {limits.max_pages:,}-sheet "
            "limit; split it"
        )
    out = Writer(limits, what)
    streamed = 0  # cells read from the file, empty ones included
    tabled = 0  # cells of the tables written so far
    for sheet in sheets:
        if hasattr(sheet, "reset_dimensions"):
            sheet.reset_dimensions()  # read the cells that are there, not what the file claims
        rows: list[list[str]] = []
        empty = 0  # empty rows since the last row with a value
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
                empty += 1 if rows else 0
                continue
            lead = next(n for n, c in enumerate(cells) if c)
            first = lead if not rows else min(first, lead)
            width = max(width, len(cells))
            if tabled + (len(rows) + empty + 1) * (width - first) > limits.max_cells:
                raise TooLarge(
                    f"{what}: sheet {str(sheet.title)[:80]!r} spans over "
                    f"{len(rows) + empty + 1:,} rows by {width - first:,} columns, past the "
                    f"{limits.max_cells:,}-cell limit with the sheets before it; split it"
                )
            rows.extend([_NO_CELLS] * empty)  # one shared empty row, however many there are
            empty = 0
            rows.append(cells)
        tabled += len(rows) * (width - first)
        out.add(atx_heading(2, f"Sheet: {sheet.title}"))
        if rows:
            out.add(table((row[first:] for row in rows), width - first))
    return out.text()


class XlsxExtractor:
    """Excel workbooks (.xlsx) through openpyxl, streaming (read-only), cached values."""

    name = "xlsx"
    version = "1.0.0"
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
                text = _workbook(book, limits, what)
            finally:
                book.close()
        return Extracted(check_text(text, limits, what))


XLSX = XlsxExtractor()
