"""`wordllama`, the default: WordLlama's static 256-dimension embeddings, from its wheel.

The model (16 MB of token vectors and a tokenizer) ships inside the `wordllama` wheel, so a
fresh machine embeds with no download. Its loader resolves files under a cache directory
and then tries a download; pointing the cache directory at the installed package, with
downloads disabled, makes it load the packaged files, offline, every time.

The vectors are the library's own (`WordLlama.embed(texts, norm=True)`: the mean of the
text's token vectors, made unit length), computed here at a fraction of its CPU, which was
the largest share of the indexer's:

- **Tokens by piece, cached.** The tokenizer is a SentencePiece-style BPE with no
  pre-tokenizer: it writes spaces as `▁` and merges over the whole text at once, so no
  word's tokens are ever reused. No token of its vocabulary holds a `▁` after another
  character (checked when the model loads), so no merge crosses the start of a `▁` run: a
  text's tokens are the concatenation of its pieces' (`▁*` then the characters up to the
  next `▁`), and each distinct piece is tokenized once and kept (a bounded cache).
- **Sums without a mask.** Texts are grouped by token count, padded with a zero row
  instead of multiplied by a mask, and summed in token order along the same axis as the
  library, so each vector is the same float32 sum, bit for bit (tested against it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib.metadata import version
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MODEL = "wordllama-l2_supercat-256"
_SPACE = "\u2581"  # SentencePiece's visible space
_PIECE = re.compile(f"{_SPACE}*[^{_SPACE}]+|{_SPACE}+")
_CACHED_PIECES = 200_000  # then the cache starts again (about 40 MB at its fullest)
_LONGEST_CACHED = 64  # characters: a longer piece is tokenized each time
_CELLS = 16_384  # token vectors gathered at once (16 MB at 256 dimensions)
_SLACK = 1.25  # a group's longest text is at most this times its shortest (plus 4)


@cache
def _model() -> Any:
    import wordllama
    from wordllama import WordLlama

    packaged = Path(wordllama.__file__).parent
    return WordLlama.load(config="l2_supercat", dim=256, cache_dir=packaged, disable_download=True)


class _Pieces(dict[str, list[int]]):
    """Each distinct piece's token ids, made on first sight (bounded: it starts again when
    full; a piece longer than `_LONGEST_CACHED` is not kept)."""

    def __init__(self, bpe: Any) -> None:
        super().__init__()
        self._bpe = bpe

    def __missing__(self, piece: str) -> list[int]:
        ids = [token.id for token in self._bpe.tokenize(piece)]
        if len(piece) <= _LONGEST_CACHED:
            if len(self) >= _CACHED_PIECES:
                self.clear()
            self[piece] = ids
        return ids


class _Tokens:
    """The model's token ids of a text, piece by piece, each distinct piece tokenized once."""

    def __init__(self, tokenizer: Any) -> None:
        crossing = [t for t in tokenizer.get_vocab() if _SPACE in t.lstrip(_SPACE)]
        if crossing:  # another model: its pieces would not be independent
            raise RuntimeError(
                f"the WordLlama tokenizer has tokens with {_SPACE!r} inside ({crossing[:3]}); "
                "this adapter's piecewise tokenizing does not apply to it"
            )
        self._pieces = _Pieces(tokenizer.model)  # the BPE alone: no normalizer, no padding

    def ids(self, text: str) -> list[int]:
        if not text:
            return []
        pieces = _PIECE.findall(_SPACE + text.replace(" ", _SPACE))
        return list(chain.from_iterable(map(self._pieces.__getitem__, pieces)))


@cache
def _tokens() -> _Tokens:
    return _Tokens(_model().tokenizer)


@cache
def _vectors() -> npt.NDArray[np.float32]:
    """The token vectors with a zero row appended: the padding of a shorter text."""
    table = np.asarray(_model().embedding, dtype=np.float32)
    return np.ascontiguousarray(np.vstack([table, np.zeros((1, table.shape[1]), np.float32)]))


def mean_vectors(token_ids: Sequence[Sequence[int]]) -> npt.NDArray[np.float32]:
    """Each text's token vectors summed in order, over its count, made unit length (a text
    of no tokens gives NaN, as the library's does)."""
    table = _vectors()
    n = len(token_ids)
    lengths = np.fromiter(map(len, token_ids), dtype=np.intp, count=n)
    order = np.argsort(lengths, kind="stable")
    ranked = lengths[order]
    flat = np.fromiter(
        chain.from_iterable(token_ids[i] for i in order.tolist()),
        dtype=np.intp,
        count=int(lengths.sum()),
    )
    ends = np.cumsum(ranked)  # where each ranked text's ids end in `flat`
    sums = np.zeros((n, table.shape[1]), dtype=np.float32)
    i = 0
    while i < n:
        j = int(np.searchsorted(ranked, ranked[i] * _SLACK + 4, side="right"))
        width = int(ranked[j - 1])
        j = min(j, i + max(1, _CELLS // max(width, 1)))
        width = int(ranked[j - 1])
        start = int(ends[i] - ranked[i])
        if j == i + 1 and width > _CELLS:
            sums[order[i]] = _long_sum(table, flat[start : start + width])
        else:
            sums[order[i:j]] = _group_sum(table, flat[start : ends[j - 1]], ranked[i:j], width)
        i = j
    sums /= np.maximum(lengths, 1).astype(np.float32)[:, None]
    with np.errstate(invalid="ignore"):
        sums /= np.linalg.norm(sums, axis=1, keepdims=True)
    return sums


def _group_sum(
    table: npt.NDArray[np.float32],
    ids: npt.NDArray[np.intp],
    lengths: npt.NDArray[np.intp],
    width: int,
) -> npt.NDArray[np.float32]:
    """The sums of consecutive texts (`ids` of all of them, `lengths` each), padded to
    `width` with the zero row and reduced along the tokens as the library does."""
    rows = np.repeat(np.arange(len(lengths)), lengths)
    firsts = np.cumsum(lengths) - lengths
    cols = np.arange(len(ids)) - np.repeat(firsts, lengths)
    padded = np.full((len(lengths), width), table.shape[0] - 1, dtype=np.intp)
    padded[rows, cols] = ids
    summed: npt.NDArray[np.float32] = np.add.reduce(table[padded], axis=1, dtype=np.float32)
    return summed


def _long_sum(table: npt.NDArray[np.float32], ids: npt.NDArray[np.intp]) -> npt.NDArray[np.float32]:
    """One long text's sum in blocks, each block's sum started from the one before (the
    same order of additions as one pass, in bounded memory)."""
    total = np.zeros((1, table.shape[1]), dtype=np.float32)
    for start in range(0, len(ids), _CELLS):
        block = table[ids[start : start + _CELLS]]
        total = np.add.reduce(np.vstack([total, block]), axis=0, dtype=np.float32)[None]
    first: npt.NDArray[np.float32] = total[0]
    return first


class WordLlamaEmbedder:
    """Implements Embedder: unit-length float32 vectors, little-endian bytes."""

    name = MODEL
    dims = 256

    def __init__(self) -> None:
        self.version = version("wordllama")

    def warm(self) -> None:
        """Load the model now (1.5 s of CPU), not on the first batch or query."""
        _tokens()
        _vectors()

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        if not texts:
            return []
        tokens = _tokens()
        vectors = mean_vectors([tokens.ids(text) for text in texts]).astype("<f4", copy=False)
        return [row.tobytes() for row in vectors]
