"""What every embedder shares: its errors, the port's vector format, names and digests."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import numpy as np

from govindex.core.errors import GovindexError, ModelUnavailable

VERSION_HEX: Final = 12  # sha256 prefix naming a model's files (or an endpoint) as a version
# Names and versions are stamped on every vector and shown in every pack's manifest
# (`versions.embedder`, `name/version`, one line of at most 256 characters): whatever comes
# from a directory or a model name is cut to safe characters and length.
NAME_CHARS: Final = 100
_UNSAFE = re.compile(r"[^\w.+-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_HASH_BLOCK: Final = 1 << 20


class EmbedderError(GovindexError, ValueError):
    """An embedder spec or model that cannot be used: the message says what was wrong and
    what is accepted or what to do. Raised when settings are parsed or a model is loaded."""


class EmbeddingUnavailable(ModelUnavailable):
    """The embeddings endpoint could not embed a batch (down after the retries, refusing
    us, or answering what is not embeddings): nothing was stored, retry the batch later.

    The message names the endpoint (never its key), what failed and what to do.
    """


class InvalidEmbeddingResponse(EmbeddingUnavailable):
    """The endpoint answered, but not with usable embeddings (wrong count or length, a
    missing index, NaN or infinity, a body larger than the batch needs)."""


def to_unit_bytes(rows: Any, *, dims: int) -> list[bytes]:
    """Rows of a matrix as the port's vectors: float32 little-endian, unit length.

    A row of zeros stays zeros (a text with no token the model knows: it matches nothing,
    like a chunk without a vector). A row that is not finite is a bug of the model, refused.
    """
    matrix = np.asarray(rows, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != dims:
        raise EmbedderError(f"the model returned an array of shape {matrix.shape}, not (n, {dims})")
    if not np.isfinite(matrix).all():
        raise EmbedderError("the model returned a vector holding NaN or infinity")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return [row.tobytes() for row in unit.astype("<f4")]


def safe_name(name: str) -> str:
    """A directory or model name as a stamp: word characters, `.`, `+`, `-`; 100 at most."""
    return _UNSAFE.sub("-", name).strip("-")[:NAME_CHARS] or "unnamed"


def one_line(text: str, limit: int = 200) -> str:
    """Text someone else wrote (a server's answer, a library's error), fit for a message."""
    flat = _CONTROL.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[:limit] + "…"


def files_digest(root: Path, files: Iterable[Path]) -> str:
    """A short sha256 over the files' paths (relative to `root`) and contents, streamed:
    another model in the same directory is another version."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        with path.open("rb") as stream:
            while block := stream.read(_HASH_BLOCK):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()[:VERSION_HEX]


def model_directory(path: Path, *, spec: str) -> Path:
    """The directory a local model spec names, resolved; EmbedderError naming the path if
    it is missing or not a directory (models are never downloaded)."""
    if not path.exists():
        raise EmbedderError(
            f"{spec}: {path} does not exist. Models are loaded from a local directory, never "
            "downloaded: copy the model's directory to this host and give its path"
        )
    if not path.is_dir():
        raise EmbedderError(f"{spec}: {path} is a file, not a model directory; give its folder")
    return path.resolve()
