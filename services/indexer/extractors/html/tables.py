"""HTML tables as GFM pipe tables, their spans filled in (the `thead`, or else the first
row, is the header), counted against the cell and text limits as they are built; a table
that only lays out blocks is told apart, so its cells are read as blocks.
"""

from __future__ import annotations

from lxml import etree

from govindex.core.errors import TooLarge
from indexer.extractors.base import Limits
from indexer.extractors.html.common import WHAT, as_int
from indexer.extractors.html.output import Output
from indexer.extractors.html.walk import BaseWalker

_LAYOUT = "highlighttable"  # Pygments' line numbers beside the code


class Table:
    """A table's rows as a grid: a cell spanning columns or rows fills each of them
    (in a body row a column span keeps its text in the first column only), the header is
    the `thead` rows (joined per column) or else the first row."""

    def __init__(self, walker: BaseWalker, el: etree._Element) -> None:
        self.walker = walker
        self.caption = ""
        self.stray: list[etree._Element] = []
        self.rows: list[tuple[bool, list[etree._Element]]] = []
        for child in el:
            tag = child.tag
            if not isinstance(tag, str) or walker._dropped(child, tag):
                continue
            if tag == "caption":
                self.caption = walker.flat_text(child)
            elif tag in ("thead", "tbody", "tfoot"):
                for row in child:
                    if isinstance(row.tag, str) and row.tag == "tr":
                        self._row(row, head=tag == "thead")
                    elif isinstance(row.tag, str):
                        self.stray.append(row)
            elif tag == "tr":
                self._row(child, head=False)
            elif tag not in ("colgroup", "col"):
                self.stray.append(child)
        self.cells = [c for _, row in self.rows for c in row]
        classes = (el.get("class") or "").split()
        self.layout = len(self.cells) == 1 or el.get("role") == "presentation" or _LAYOUT in classes

    def _row(self, row: etree._Element, head: bool) -> None:
        cells: list[etree._Element] = []
        for cell in row:
            tag = cell.tag
            if not isinstance(tag, str) or self.walker._dropped(cell, tag):
                continue
            if tag in ("td", "th"):
                cells.append(cell)
            else:
                self.stray.append(cell)
        if cells:
            self.rows.append((head, cells))

    def render(self, limits: Limits, out: Output) -> list[str]:
        heads = [head for head, _ in self.rows]
        if not any(heads) and heads:
            heads[0] = True  # no thead: the first row is the header
        grid = self._grid(heads, limits, out)
        width = max((len(r) for r in grid), default=0)
        if width == 0 or not any(c for r in grid for c in r):
            return []
        header = [""] * width
        body: list[list[str]] = []
        for head, row in zip(heads, grid, strict=True):
            if not head:
                body.append(row)
                continue
            for c, text in enumerate(row):
                if text and not header[c].endswith(text):
                    header[c] = f"{header[c]} / {text}" if header[c] else text
        lines = [_row_line(header, width), "| " + " | ".join(["---"] * width) + " |"]
        lines.extend(_row_line(r, width) for r in body)
        return lines

    def _grid(self, heads: list[bool], limits: Limits, out: Output) -> list[list[str]]:
        """The rows as lines of cell texts, spans filled in; counted against the cell and
        text limits as they are built."""
        grid: list[list[str]] = []
        pending: dict[int, tuple[int, str]] = {}  # column -> (rows still spanned, text)
        cells_total = 0
        chars = 0
        for n, ((_, cells), head) in enumerate(zip(self.rows, heads, strict=True)):
            left = len(self.rows) - n  # a row span ends with its table
            line: list[str] = []
            for cell in cells:
                while len(line) in pending:
                    line.append(self._take(pending, len(line)))
                text = self.walker.flat_text(cell).replace("|", "\\|")
                span = min(max(as_int(cell.get("colspan"), 1), 1), 1000)
                down = as_int(cell.get("rowspan"), 1)
                down = left if down <= 0 else min(down, left)
                for k in range(span):
                    if len(line) in pending:  # overlapping spans: this cell wins
                        self._take(pending, len(line))
                    shown = text if head or k == 0 else ""
                    if down > 1:
                        pending[len(line)] = (down - 1, shown)
                    line.append(shown)
            for column in sorted(c for c in pending if c >= len(line)):
                line.extend([""] * (column - len(line)))
                line.append(self._take(pending, column))
            cells_total += len(line)
            if cells_total > limits.max_cells:
                raise TooLarge(
                    f"{WHAT} has a table of more than {limits.max_cells:,} cells, over the "
                    f"{limits.max_cells:,}-cell limit; split the table"
                )
            chars += sum(len(c) + 3 for c in line)
            out.need(chars)
            grid.append(line)
        return grid

    @staticmethod
    def _take(pending: dict[int, tuple[int, str]], column: int) -> str:
        left, text = pending[column]
        if left <= 1:
            del pending[column]
        else:
            pending[column] = (left - 1, text)
        return text


def _row_line(cells: list[str], width: int) -> str:
    padded = cells + [""] * (width - len(cells))
    return "| " + " | ".join(padded) + " |"
