"""Jupyter notebooks (.ipynb) to canonical Markdown: the cells, in order, without outputs.

Markdown cells are the author's Markdown and stay verbatim, so their headings give the
notebook its sections; a code cell in a language govindex has a parser for is its code as
written, marked as a region that parser cuts (`indexer.extractors.regions`), so a function
in a cell is a function chunk; in another language it is a fenced code block. The language
is the kernel's (`metadata.kernelspec.language`, else `metadata.language_info.name`;
nbformat 3 keeps it on each cell). Raw cells (text meant for nbconvert, never rendered as
Markdown) are plain paragraphs, escaped where a line would read as Markdown structure;
v3 heading cells are headings. Cells are separated by a blank line. Outputs are dropped:
they are results of a run (often large, binary or stale), not what the author wrote.

The JSON is read with the standard library: a notebook is plain JSON, and its shape is
checked here (nbformat 4 `cells`, or nbformat 3 `worksheets`; each cell a markdown, code
or raw cell with a string or list-of-strings source), which is all the text needs, without
nbformat's schema machinery. A markdown cell that leaves a code fence open is closed at
its end, so that it cannot swallow the cells after it. A first cell that opens with `---`
(a Jupyter Book or Quarto YAML header) is kept as text: what a converted file says is
never read as the document's frontmatter (access, validity) by the Markdown parser.
Bounded: at most MAX_CELLS cells and `max_text_chars` of text, counted before the text is
built; JSON nested deeper than the parser's recursion limit is refused as unreadable.
"""

from __future__ import annotations

import json
import re
from typing import Any

from govindex.core.errors import TooLarge, Unreadable
from indexer.extractors.base import Extracted, Limits, Region, check_size, check_text
from indexer.extractors.html import escape_line

WHAT = "the notebook"
MAX_CELLS = 100_000
_CELL_TYPES = frozenset(("markdown", "code", "raw", "heading"))
_BACKTICKS = re.compile(r"`+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INFO = re.compile(r"[^A-Za-z0-9_+#.-]")
_FRONTMATTER = re.compile(r"---[ \t]*(?:\r\n|\r|\n)")


class NotebookExtractor:
    name = "ipynb"
    version = "1.1.0"
    suffixes: tuple[str, ...] = (".ipynb",)
    binary = False

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        check_size(data, limits, WHAT)
        notebook = _load(data)
        cells, version = _cells(notebook)
        if len(cells) > MAX_CELLS:
            raise TooLarge(
                f"{WHAT} has {len(cells):,} cells, over the {MAX_CELLS:,}-cell limit; "
                "split the notebook"
            )
        language = _kernel_language(notebook.get("metadata"))
        blocks: list[str] = []
        regions: list[Region] = []
        size = 0
        for index, cell in enumerate(cells):
            block = _block(cell, index, version, language)
            if not block:
                continue
            parser = _code_parser(cell, version, language)
            if parser is not None:  # the cell's own code, cut by its language's parser
                block = _source(cell, "input" if version == 3 else "source", index)
                block = block.strip("\r\n").rstrip()
                regions.append(Region(size, size + len(block), parser))
            size += len(block) + 2
            if size > limits.max_text_chars:
                raise TooLarge(
                    f"{WHAT} extracts to more than {limits.max_text_chars:,} characters, "
                    "over the max_text_chars limit; split the notebook"
                )
            blocks.append(block)
        text = "\n\n".join(blocks) + "\n" if blocks else ""
        if _FRONTMATTER.match(text):
            text = "\\" + text  # a YAML header cell is text here, never metadata
            regions = [Region(r.start + 1, r.end + 1, r.parser) for r in regions]
        return Extracted(check_text(text, limits, WHAT), regions=tuple(regions))


NOTEBOOK = NotebookExtractor()


def _load(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"{WHAT} is not UTF-8 ({exc}); a notebook is UTF-8 JSON") from None
    try:
        notebook = json.loads(text)
    except RecursionError:
        raise Unreadable(f"{WHAT} nests its JSON too deeply to read") from None
    except ValueError as exc:
        raise Unreadable(f"{WHAT} is not valid JSON ({str(exc)[:200]})") from None
    if not isinstance(notebook, dict):
        raise Unreadable(f"{WHAT} is JSON but not a notebook: its top level is not an object")
    return notebook


def _cells(notebook: dict[str, Any]) -> tuple[list[Any], int]:
    """The cells and the nbformat major version whose cell shape they have."""
    version = notebook.get("nbformat")
    if version is not None and version not in (3, 4):
        raise Unreadable(
            f"{WHAT} declares nbformat {str(version)[:20]}; nbformat 3 and 4 are read "
            "(convert it with `jupyter nbconvert --to notebook`)"
        )
    if "cells" in notebook and version != 3:
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise Unreadable(f"{WHAT}: `cells` is not a list")
        return cells, 4
    worksheets = notebook.get("worksheets")
    if isinstance(worksheets, list) and version != 4:
        cells = []
        for sheet in worksheets:
            sheet_cells = sheet.get("cells") if isinstance(sheet, dict) else None
            if not isinstance(sheet_cells, list):
                raise Unreadable(f"{WHAT}: a worksheet has no list of cells")
            cells.extend(sheet_cells)
        return cells, 3
    raise Unreadable(
        f"{WHAT} is JSON but not a notebook: it has neither `cells` (nbformat 4) nor "
        "`worksheets` (nbformat 3)"
    )


def _kernel_language(metadata: Any) -> str:
    if not isinstance(metadata, dict):
        return ""
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(field), str):
            return str(section[field])
    language = metadata.get("language")  # some nbformat 3 writers put it here
    return language if isinstance(language, str) else ""


def _source(cell: dict[str, Any], key: str, index: int) -> str:
    source = cell.get(key, "")
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    raise Unreadable(f"{WHAT}: cell {index} has a `{key}` that is neither text nor lines")


def _block(cell: Any, index: int, version: int, language: str) -> str:
    if not isinstance(cell, dict):
        raise Unreadable(f"{WHAT}: cell {index} is not an object")
    kind = cell.get("cell_type")
    if kind not in _CELL_TYPES or (kind == "heading" and version != 3):
        raise Unreadable(
            f"{WHAT}: cell {index} has cell_type {str(kind)[:40]!r}; a notebook's cells are "
            "markdown, code or raw"
        )
    if kind == "code":
        source = _source(cell, "input" if version == 3 else "source", index)
        cell_language = cell.get("language") if version == 3 else None
        return _code(source, cell_language if isinstance(cell_language, str) else language)
    source = _source(cell, "source", index)
    if kind == "markdown":
        return _markdown(source)
    if kind == "heading":
        level = cell.get("level")
        level = level if isinstance(level, int) and 1 <= level <= 6 else 1
        title = " ".join(source.split())
        return f"{'#' * level} {title}" if title else ""
    return _raw(source)


def _markdown(source: str) -> str:
    text = source.strip("\r\n").rstrip()
    if not text.strip():
        return ""
    fence = _open_fence(text)
    return f"{text}\n{fence}" if fence else text


def _open_fence(text: str) -> str:
    """The fence a Markdown text leaves open at its end, if any (CommonMark's rule: a
    fence closes with at least as many of the same character and nothing after them)."""
    opened: str | None = None
    for line in text.splitlines():
        found = _FENCE.match(line)
        if found is None:
            continue
        run = found.group(1)
        if opened is None:
            if not (run[0] == "`" and "`" in line[found.end() :]):
                opened = run
        elif run[0] == opened[0] and len(run) >= len(opened) and not line[found.end() :].strip():
            opened = None
    return opened or ""


# A kernel's language and the parser that cuts its cells (others stay fenced code).
_PARSERS = {
    "python": "python",
    "python3": "python",
    "javascript": "javascript",
    "typescript": "typescript",
    "bash": "shell",
    "sh": "shell",
    "shell": "shell",
    "sql": "sql",
    "go": "go",
    "rust": "rust",
    "java": "java",
    "c": "c",
    "c++": "cpp",
    "cpp": "cpp",
    "c#": "csharp",
    "csharp": "csharp",
    "ruby": "ruby",
    "kotlin": "kotlin",
}


def _code_parser(cell: Any, version: int, language: str) -> str | None:
    """The parser for a code cell's language, if there is one."""
    if not isinstance(cell, dict) or cell.get("cell_type") != "code":
        return None
    own = cell.get("language") if version == 3 else None
    return _PARSERS.get((own if isinstance(own, str) else language).strip().lower())


def _code(source: str, language: str) -> str:
    code = source.strip("\r\n").rstrip()
    if not code.strip():
        return ""
    longest = max((len(m) for m in _BACKTICKS.findall(code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{_INFO.sub('', language)[:40]}\n{code}\n{fence}"


def _raw(source: str) -> str:
    """Plain paragraphs: lines unindented (indentation would read as code) and escaped
    where Markdown would read structure; runs of blank lines become one."""
    lines: list[str] = []
    for line in source.splitlines():
        line = line.strip()
        if line:
            lines.append(escape_line(line))
        elif lines and lines[-1]:
            lines.append("")
    return "\n".join(lines).rstrip("\n")
