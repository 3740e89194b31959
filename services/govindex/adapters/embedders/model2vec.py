"""`model2vec:DIR`: a model2vec static model (token vectors, mean-pooled) from a local folder.

Static models embed a text in microseconds on a CPU, like WordLlama; model2vec distils
them from any sentence-transformer, so a team can choose its own. The folder is one that
`StaticModel.save_pretrained` wrote (or a model's Hugging Face repository, downloaded
beforehand): `config.json`, `model.safetensors` and `tokenizer.json`, or the
sentence-transformers layout of the same. Nothing is ever downloaded: model2vec would try
the hub for a path that does not exist, so the folder is checked first.

Named `model2vec:<folder name>`; versioned by a digest of the files the vectors come from,
so another model copied into the same folder is another version (and `govindex reembed`
re-embeds under it).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import structlog

from govindex.adapters.embedders.base import (
    EmbedderError,
    files_digest,
    model_directory,
    one_line,
    safe_name,
    to_unit_bytes,
)

if TYPE_CHECKING:
    from model2vec import StaticModel

log = structlog.get_logger(__name__)

INSTALL: Final = "pip install 'govindex[model2vec]'"
# model2vec's own folder layouts (model2vec.persistence.datamodels): the files a model's
# vectors come from, for the version digest; README.md and the like are not among them.
LAYOUTS: Final = (
    ("config.json", "model.safetensors", "tokenizer.json"),
    ("config_sentence_transformers.json", "model.safetensors", "tokenizer.json"),
    (
        "config_sentence_transformers.json",
        "0_StaticEmbedding/model.safetensors",
        "0_StaticEmbedding/tokenizer.json",
    ),
)


def model_files(directory: Path, *, spec: str) -> list[Path]:
    """The files of the first layout the folder holds; EmbedderError naming the folder and
    what it lacks when it holds none."""
    for layout in LAYOUTS:
        files = [directory / name for name in layout]
        if all(f.is_file() for f in files):
            return files
    present = sorted(p.name for p in directory.iterdir())[:12]
    raise EmbedderError(
        f"{spec}: {directory} is not a model2vec model directory: it needs config.json, "
        "model.safetensors and tokenizer.json (what StaticModel.save_pretrained writes), "
        f"and holds {', '.join(present) or 'nothing'}"
    )


def check(path: Path, *, spec: str) -> Path:
    """The model folder, if the library is installed and the folder has a model's files."""
    if importlib.util.find_spec("model2vec") is None:
        raise EmbedderError(
            f"{spec} needs the `model2vec` library, which is not installed: {INSTALL}"
        )
    directory = model_directory(path, spec=spec)
    model_files(directory, spec=spec)
    return directory


class Model2VecEmbedder:
    """Implements Embedder with a model2vec StaticModel: unit float32 vectors, LE bytes."""

    def __init__(self, model: StaticModel, *, name: str, version: str) -> None:
        self._model = model
        self.name = name
        self.version = version
        self.dims = int(model.dim)

    @classmethod
    def from_directory(cls, path: Path) -> Model2VecEmbedder:
        spec = f"model2vec:{path}"
        directory = check(path, spec=spec)
        files = model_files(directory, spec=spec)
        from model2vec import StaticModel

        try:
            # A path that exists is loaded from disk (model2vec goes to the hub only for
            # one that does not, which check() has ruled out).
            model = StaticModel.from_pretrained(directory)
        except Exception as exc:  # safetensors, tokenizers and json raise their own kinds
            raise EmbedderError(
                f"{spec}: {directory} could not be loaded as a model2vec model "
                f"({one_line(str(exc)) or type(exc).__name__}); give a directory that "
                "StaticModel.save_pretrained wrote"
            ) from None
        made = cls(
            model,
            name=f"model2vec:{safe_name(directory.name)}",
            version=files_digest(directory, files),
        )
        log.info("embedder.loaded", embedder=made.name, version=made.version, dims=made.dims)
        return made

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        if not texts:
            return []
        matrix = self._model.encode(
            list(texts), normalize=False, use_multiprocessing=False, show_progress_bar=False
        )
        return to_unit_bytes(matrix, dims=self.dims)

    def __repr__(self) -> str:
        return f"<Model2VecEmbedder {self.name}/{self.version} dims={self.dims}>"
