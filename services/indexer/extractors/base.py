"""What every extractor shares: canonical text out, limits in, refusals with a reason.

An extractor turns a file's bytes (PDF, Word, HTML, …) into **canonical text**: Markdown
that says the structure the file holds (headings with their levels, numbered lists,
tables as pipe tables, code blocks), which the Markdown parser then cuts like any
document. The canonical text is the version's text and every chunk's span points into
it, so a chunk is still exactly the text at its span (docs/design/guarantees.md). Where
the file has pages, `pages` says where each begins, and chunks are located by page.

An extractor is pure and bounded: it refuses a file over a limit (`TooLarge`, naming the
limit and the figure), one it cannot read (`Unreadable`, with the library's reason) and a
PDF without text (`NoTextLayer`), and never allocates far beyond its limits; the time
limit is enforced from outside, by running it in a child process (`indexer.extractors`).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from io import BytesIO
from typing import Protocol

from govindex.core.errors import TooLarge, Unreadable


@dataclass(frozen=True)
class Page:
    """Page `number` (1-based) begins at offset `start` of the canonical text."""

    start: int
    number: int


@dataclass(frozen=True)
class Box:
    """[start, end) of the canonical text was printed inside this rectangle of page
    `page`: points from the page's top-left corner, as a PDF viewer measures them."""

    start: int
    end: int
    page: int
    left: float
    top: float
    right: float
    bottom: float


@dataclass(frozen=True)
class Region:
    """[start, end) of the canonical text is cut by `parser` (a notebook's code cell by its
    language's parser, a worksheet by the CSV parser); its chunks carry `context` where
    their parser gives them none (a slide's speaker notes)."""

    start: int
    end: int
    parser: str
    context: str = ""


@dataclass(frozen=True)
class Extracted:
    """Canonical text, the parser that cuts it (and the regions other parsers cut), and
    where its pages begin (if any)."""

    text: str
    parser: str = "markdown"
    pages: tuple[Page, ...] = ()
    regions: tuple[Region, ...] = ()
    boxes: tuple[Box, ...] = ()  # where the text was printed, in order, where the file says
    extractor: str = ""  # name-version of what made it, recorded in the parser_version


@dataclass(frozen=True)
class Limits:
    """What one file may cost. A file past any of them is refused, never cut short."""

    max_bytes: int = 64 * 1024 * 1024  # the file as stored
    max_pages: int = 2_000  # PDF pages, slides, sheets
    max_unzipped: int = 256 * 1024 * 1024  # an Office file's members, decompressed
    max_members: int = 10_000  # members of an Office file's zip archive
    max_ratio: int = 200  # a member's decompressed size over its compressed size
    max_text_chars: int = 16 * 1024 * 1024  # the canonical text
    max_cells: int = 1_000_000  # spreadsheet cells
    timeout_seconds: float = 60.0


DEFAULT_LIMITS = Limits()


class Extractor(Protocol):
    """Bytes to canonical text. `name` and `version` go into the version's parser_version,
    so a new extractor version re-extracts on reparse."""

    name: str
    version: str
    suffixes: tuple[str, ...]  # lower-case, with the dot: (".pdf",)
    binary: bool  # True: the file travels as bytes (base64); False: as UTF-8 text

    def extract(self, data: bytes, limits: Limits) -> Extracted: ...


def check_size(data: bytes, limits: Limits, what: str) -> None:
    if len(data) > limits.max_bytes:
        raise TooLarge(
            f"{what} is {len(data):,} bytes, over the {limits.max_bytes:,}-byte limit; split it "
            "or leave it out of the source's include"
        )


def check_text(text: str, limits: Limits, what: str) -> str:
    if len(text) > limits.max_text_chars:
        raise TooLarge(
            f"{what} extracts to {len(text):,} characters, over the {limits.max_text_chars:,} "
            "limit; split the file"
        )
    return text


def open_zip(data: bytes, limits: Limits, what: str) -> zipfile.ZipFile:
    """An Office file's archive, after checking what it would decompress to from its
    directory (a zip bomb is refused before a byte of it is inflated). The caller reads
    members through `read_member`, which enforces the same limits on the actual bytes."""
    try:
        archive = zipfile.ZipFile(BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise Unreadable(f"{what} is not a readable zip archive ({exc})") from None
    members = archive.infolist()
    if len(members) > limits.max_members:
        raise TooLarge(
            f"{what} holds {len(members):,} archive members, over the {limits.max_members:,} limit"
        )
    total = sum(m.file_size for m in members)
    if total > limits.max_unzipped:
        raise TooLarge(
            f"{what} decompresses to {total:,} bytes, over the {limits.max_unzipped:,}-byte limit"
        )
    for member in members:
        if member.file_size > max(1, member.compress_size) * limits.max_ratio + 1_048_576:
            raise TooLarge(
                f"{what}: member {member.filename[:80]!r} decompresses {member.file_size:,} "
                f"bytes from {member.compress_size:,}, over the {limits.max_ratio}:1 ratio "
                "limit (a zip bomb)"
            )
    return archive


def read_member(archive: zipfile.ZipFile, name: str, limits: Limits, what: str) -> bytes:
    """One member, read in pieces and stopped at the limit whatever its header claims."""
    try:
        with archive.open(name) as member:
            out = bytearray()
            while piece := member.read(1 << 16):
                out += piece
                if len(out) > limits.max_unzipped:
                    raise TooLarge(
                        f"{what}: member {name[:80]!r} decompresses past the "
                        f"{limits.max_unzipped:,}-byte limit"
                    )
            return bytes(out)
    except (zipfile.BadZipFile, KeyError, OSError, EOFError) as exc:
        raise Unreadable(f"{what}: member {name[:80]!r} is unreadable ({exc})") from None
