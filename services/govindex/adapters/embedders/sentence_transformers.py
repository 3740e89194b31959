"""`sentence-transformers:DIR`: a transformer model from a local folder, through the
`sentence-transformers` library (and torch), which govindex does not install by default.

The folder is one a model was saved or downloaded into (`SentenceTransformer.save`, or a
model's repository downloaded beforehand): `modules.json` or at least `config.json`.
It is loaded with `local_files_only` and without remote code, so nothing is downloaded or
executed from the folder. Named `sentence-transformers:<folder name>`; versioned by a digest
of the folder's files (documentation and hidden files aside).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import structlog

from govindex.adapters.embedders.base import (
    EmbedderError,
    files_digest,
    model_directory,
    one_line,
    safe_name,
    to_unit_bytes,
)

log = structlog.get_logger(__name__)

LIBRARY: Final = "sentence_transformers"
INSTALL: Final = "pip install 'govindex[sentence-transformers]'"
MARKERS: Final = ("modules.json", "config.json")
BATCH: Final = 32


def installed() -> bool:
    return importlib.util.find_spec(LIBRARY) is not None


def check(path: Path, *, spec: str) -> Path:
    """The model folder, if the library is installed and the folder looks like a model."""
    if not installed():
        raise EmbedderError(
            f"{spec} needs the `sentence-transformers` library (and torch), which is not "
            f"installed: {INSTALL}, or use model2vec:DIR or http:URL instead"
        )
    directory = model_directory(path, spec=spec)
    if not any((directory / marker).is_file() for marker in MARKERS):
        raise EmbedderError(
            f"{spec}: {directory} is not a sentence-transformers model directory: it has "
            "neither modules.json nor config.json (give the folder SentenceTransformer.save "
            "wrote, or the model's downloaded repository)"
        )
    return directory


def model_files(directory: Path) -> Iterator[Path]:
    """The files vectors may come from: all but documentation and hidden files (a
    downloader's `.cache/` records timestamps)."""
    for path in directory.rglob("*"):
        relative = path.relative_to(directory).parts
        if any(part.startswith(".") for part in relative) or not path.is_file():
            continue
        if path.suffix.lower() == ".md":  # a model card (vocab.txt is the tokenizer's)
            continue
        yield path


class SentenceTransformersEmbedder:
    """Implements Embedder with a SentenceTransformer: unit float32 vectors, LE bytes."""

    def __init__(self, model: Any, *, name: str, version: str, dims: int) -> None:
        self._model = model
        self.name = name
        self.version = version
        self.dims = dims

    @classmethod
    def from_directory(cls, path: Path) -> SentenceTransformersEmbedder:
        spec = f"sentence-transformers:{path}"
        directory = check(path, spec=spec)
        library = importlib.import_module(LIBRARY)
        try:
            model = library.SentenceTransformer(
                str(directory), local_files_only=True, trust_remote_code=False
            )
        except Exception as exc:  # torch, transformers and the library raise their own kinds
            raise EmbedderError(
                f"{spec}: {directory} could not be loaded by sentence-transformers "
                f"({one_line(str(exc)) or type(exc).__name__}); give a complete model folder "
                "(models needing remote code are not loaded)"
            ) from None
        version = files_digest(directory, model_files(directory))
        name = f"sentence-transformers:{safe_name(directory.name)}"
        made = cls(model, name=name, version=version, dims=_dimensions(model, spec))
        log.info("embedder.loaded", embedder=made.name, version=made.version, dims=made.dims)
        return made

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        if not texts:
            return []
        matrix = self._model.encode(
            list(texts),
            batch_size=BATCH,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        return to_unit_bytes(matrix, dims=self.dims)

    def __repr__(self) -> str:
        return f"<SentenceTransformersEmbedder {self.name}/{self.version} dims={self.dims}>"


def _dimensions(model: Any, spec: str) -> int:
    """The model's output size: as it declares it (the method's name changed across
    releases), or measured on one text when it declares none."""
    for method in ("get_sentence_embedding_dimension", "get_embedding_dimension"):
        declared = getattr(model, method, None)
        value = declared() if callable(declared) else None
        if isinstance(value, int) and value > 0:
            return value
    probe = model.encode(["dimension probe"], convert_to_numpy=True, show_progress_bar=False)
    shape: tuple[int, ...] = tuple(getattr(probe, "shape", ()))
    if len(shape) != 2 or shape[1] < 1:
        raise EmbedderError(f"{spec}: the model returns no vector (output of shape {shape})")
    return int(shape[1])
