"""`wordllama`, the default: WordLlama's static 256-dimension embeddings, from its wheel.

The model (16 MB of token vectors and a tokenizer) ships inside the `wordllama` wheel, so a
fresh machine embeds with no download. Its loader resolves files under a cache directory
and then tries a download; pointing the cache directory at the installed package, with
downloads disabled, makes it load the packaged files, offline, every time.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

MODEL = "wordllama-l2_supercat-256"


@cache
def _model() -> Any:
    import wordllama
    from wordllama import WordLlama

    packaged = Path(wordllama.__file__).parent
    return WordLlama.load(config="l2_supercat", dim=256, cache_dir=packaged, disable_download=True)


class WordLlamaEmbedder:
    """Implements Embedder: unit-length float32 vectors, little-endian bytes."""

    name = MODEL
    dims = 256

    def __init__(self) -> None:
        self.version = version("wordllama")

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        if not texts:
            return []
        vectors = np.asarray(_model().embed(list(texts), norm=True), dtype="<f4")
        return [row.tobytes() for row in vectors]
