"""CSV: a header and row groups; every row group repeats the header (as context) and keeps
the primary-key values of its rows (as `key:` labels)."""

from __future__ import annotations

import csv
import io
import re

from govindex.core.records import ChunkKind
from indexer.parsers.base import LineIndex, ParsedDocument, Segment, SizePolicy, finalize
from indexer.parsers.text import PlainTextParser

ROWS_PER_GROUP = 25


class CsvParser:
    name = "csv"
    version = "1.0.0"

    def __init__(
        self, policy: SizePolicy | None = None, key_column: int = 0, header: bool | None = None
    ) -> None:
        self.policy = policy or SizePolicy()
        self.key_column = key_column
        self.header = header  # whether the first row names the columns; None: guess

    def parse(self, text: str) -> ParsedDocument:
        lines = LineIndex(text)
        try:
            records = self._records(text)
        except csv.Error:
            return PlainTextParser(self.policy).parse(text)  # not CSV after all: keep it
        if not records:
            return finalize(text, [], policy=self.policy)
        has_header = (
            self._has_header(text, records) if self.header is None else self.header
        ) and len(records) > 1
        header_end = lines.offset_of_line(records[0][1] + 1) if has_header else 0
        header = text[:header_end] if has_header else ""
        body = records[1:] if has_header else records
        segments: list[Segment] = []
        for g in range(0, max(1, len(body)), ROWS_PER_GROUP):
            group = body[g : g + ROWS_PER_GROUP]
            start = 0 if g == 0 else lines.offset_of_line(group[0][0])
            nxt = body[g + ROWS_PER_GROUP] if g + ROWS_PER_GROUP < len(body) else None
            end = lines.offset_of_line(nxt[0]) if nxt else len(text)
            keys = tuple(
                f"key:{row[self.key_column][:64]}"
                for row, _, _ in ((r[2], r[0], r[1]) for r in group)
                if len(row) > self.key_column and row[self.key_column]
            )
            segments.append(
                Segment(
                    start,
                    end,
                    ChunkKind.ROW_GROUP,
                    labels=keys[:50],
                    context="" if g == 0 else header,
                    atomic=True,
                )
            )
        return finalize(text, segments, policy=self.policy)

    @staticmethod
    def _records(text: str) -> list[tuple[int, int, list[str]]]:
        """(first line, last line, fields) of every record; quoted newlines stay inside."""
        reader = csv.reader(io.StringIO(text, newline=""))
        out = []
        previous = 0
        for row in reader:
            first, last = previous + 1, reader.line_num
            previous = last
            if row:
                out.append((first, last, row))
        return out

    @staticmethod
    def _has_header(text: str, records: list[tuple[int, int, list[str]]]) -> bool:
        """Whether the first row names the columns. Undecidable in general; we say yes when
        csv.Sniffer does, or when the first row is distinct, non-numeric, name-like cells."""
        if len(records) < 2:
            return False
        first = records[0][2]
        try:
            if csv.Sniffer().has_header(text[:4096]):
                return True
        except csv.Error:
            pass
        names = [cell.strip() for cell in first]
        return (
            len(set(names)) == len(names)
            and all(_NAME.match(name) for name in names)
            and names != [cell.strip() for cell in records[1][2]]
        )


_NAME = re.compile(r"^[A-Za-z_][\w .-]{0,63}$")
