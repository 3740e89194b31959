"""The file types govindex reads, as connectors need to know them: which travel as bytes,
their media types, and the default `include` of git and folder sources.

The indexer's extractors and parsers are the authority on what each type becomes; this
table is what a connector, which never imports the indexer, needs to send a file the
right way (a test keeps the two in step).
"""

from __future__ import annotations

import base64
from pathlib import PurePosixPath

# Sent as bytes (base64 in the event, decoded before extraction).
BINARY: dict[str, str] = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}
# Sent as UTF-8 text.
TEXT: dict[str, str] = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".ipynb": "application/x-ipynb+json",
    ".csv": "text/csv",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".json": "application/json",
    ".tf": "text/x-hcl",
    ".hcl": "text/x-hcl",
    ".py": "text/x-python",
    ".go": "text/x-go",
    ".java": "text/x-java",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".cjs": "text/javascript",
    ".jsx": "text/javascript",
    ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript",
    ".rs": "text/x-rust",
    ".c": "text/x-c",
    ".h": "text/x-c",
    ".cc": "text/x-c++",
    ".cpp": "text/x-c++",
    ".cxx": "text/x-c++",
    ".hpp": "text/x-c++",
    ".hh": "text/x-c++",
    ".cs": "text/x-csharp",
    ".rb": "text/x-ruby",
    ".kt": "text/x-kotlin",
    ".kts": "text/x-kotlin",
    ".sh": "text/x-shellscript",
    ".bash": "text/x-shellscript",
    ".sql": "application/sql",
}
# Every supported type, as .gitignore-style patterns (a manifest's `include` may narrow it).
DEFAULT_INCLUDE: tuple[str, ...] = tuple(f"*{suffix}" for suffix in (*TEXT, *BINARY))
BASE64 = "base64"


def suffix(path: str) -> str:
    return PurePosixPath(path).suffix.lower()


def is_binary(path: str) -> bool:
    """Whether a file of this type travels as bytes."""
    return suffix(path) in BINARY


def media_type(path: str) -> str:
    """The media type an event declares for a file (text/plain for an unknown type)."""
    found = suffix(path)
    return BINARY.get(found) or TEXT.get(found) or "text/plain"


def encode(data: bytes) -> str:
    """A binary file as an event carries it."""
    return base64.b64encode(data).decode("ascii")


def decode(content: str) -> bytes:
    """The bytes of a base64-carried file (ValueError when it is not base64)."""
    return base64.b64decode(content.encode("ascii"), validate=True)
