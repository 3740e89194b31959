"""Parsers, each with its own name and version; chosen by the manifest or the file type."""

from __future__ import annotations

from pathlib import PurePosixPath

from govindex.core.errors import InvalidEvent, ParserFailed, PermanentError
from govindex.core.inputs import quote
from indexer.frontmatter import split_frontmatter
from indexer.parsers.base import ParsedDocument, Parser, SizePolicy
from indexer.parsers.code import JsonParser, PythonParser, YamlParser
from indexer.parsers.markdown import MarkdownParser
from indexer.parsers.tabular import CsvParser
from indexer.parsers.text import PlainTextParser
from indexer.parsers.treesitter import code_parsers

_ALL: list[Parser] = [
    MarkdownParser(),
    CsvParser(),
    PythonParser(),
    YamlParser(),
    JsonParser(),
    *code_parsers(),  # tree-sitter: Go, Java, JavaScript, …, SQL and HCL
    PlainTextParser(),
]
PARSERS: dict[str, Parser] = {p.name: p for p in _ALL}
BY_SUFFIX = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".csv": "csv",
    ".py": "python",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".tf": "hcl",
    ".hcl": "hcl",
    ".go": "go",
    ".java": "java",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".sh": "shell",
    ".bash": "shell",
    ".sql": "sql",
    ".txt": "text",
}
AUTO = "auto"


def parser_for(name: str, path: str | None = None) -> Parser:
    """The manifest's parser, or with `auto` the one for the file's type (text otherwise)."""
    if name == AUTO:
        suffix = PurePosixPath(path or "").suffix.lower()
        return PARSERS[BY_SUFFIX.get(suffix, "text")]
    try:
        return PARSERS[name]
    except KeyError:
        raise InvalidEvent(
            f"the manifest names parser {name!r}, which this indexer does not have; "
            f"known parsers: {', '.join(sorted([*PARSERS, AUTO]))}"
        ) from None


def parse(parser: Parser, text: str) -> ParsedDocument:
    """`parser.parse`, where a parser's crash is the document's permanent failure.

    A parser is pure: an exception it raises on these bytes it raises on every redelivery,
    so retrying would make the document a poison pill for its partition. It is
    dead-lettered once (`parser_failed`, with the parser's name, version and error).
    """
    try:
        return parser.parse(text)
    except PermanentError:
        raise
    except Exception as exc:
        raise ParserFailed(
            f"parser {parser.name} {parser.version} failed on this document "
            f"({exc.__class__.__name__}: {quote(str(exc))}); fix the document or choose "
            "another parser in the manifest, then redrive the dead letter"
        ) from exc


__all__ = [
    "PARSERS",
    "ParsedDocument",
    "Parser",
    "SizePolicy",
    "parse",
    "parser_for",
    "split_frontmatter",
]
