"""Token counts, one estimator for ingest and for read, named with its version.

The indexer stamps each chunk's `token_estimate` and the read service packs chunks into a
token budget; both must count the same way, or a pack built within budget would not be.
An estimator's `label` (`name/version`, e.g. `heuristic/1`) is what a manifest records,
so a pack says how its tokens were counted, and a changed tokenizer file is a new version.

`GOVINDEX_TOKENIZER` chooses one (`estimator_from`):

- `heuristic` (the default): no dependency; one token per CJK, kana or hangul character,
  characters / 4 for the rest, so it never undercounts much.
- `hf:PATH`: a Hugging Face `tokenizer.json`, through the `tokenizers` library.
- `tiktoken:PATH`: a `.tiktoken` BPE ranks file, through the `tiktoken` library.

Both libraries are optional (`pip install 'govindex[tokenizers]'`) and imported only when
asked for. Files are local: nothing is ever downloaded (read and indexer hosts usually
have no internet, and a tokenizer fetched at start would change under a running index).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib.util
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

import structlog

from govindex.core.errors import GovindexError

if TYPE_CHECKING:
    import tiktoken
    import tokenizers

log = structlog.get_logger(__name__)

SETTING: Final = "GOVINDEX_TOKENIZER"
DEFAULT_SPEC: Final = "heuristic"
INSTALL: Final = "pip install 'govindex[tokenizers]'"
SCHEMES: Final = ("heuristic", "hf:PATH", "tiktoken:PATH")
VERSION_HEX: Final = 12  # sha256 prefix naming a tokenizer file's version
# A label goes into every pack's manifest (`versions.estimator`, one line of at most 128
# characters): names come from file names, so they are cut to safe characters and length.
NAME_CHARS: Final = 100
_UNSAFE = re.compile(r"[^\w.+-]+")
# A tokenizer file is read whole (hashed, then parsed); the largest public ones are tens
# of MB, so anything far beyond is not a tokenizer.
MAX_FILE_BYTES: Final = 256 * 1024 * 1024


class TokenizerError(GovindexError, ValueError):
    """A tokenizer spec that cannot be used; the message says why and what to do."""


class TokenEstimator(Protocol):
    """Counts the tokens of chunk-sized text; `label` is `name/version`."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def label(self) -> str: ...

    def count(self, text: str) -> int:
        """Tokens in `text`, at least 1 (an empty chunk still takes a slot)."""
        ...


class _Named:
    name: str
    version: str

    @property
    def label(self) -> str:
        return f"{self.name}/{self.version}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label}>"


# Scripts where one character is about one token or more for BPE tokenizers (CJK
# ideographs, kana, hangul, and the fullwidth forms): counting them at chars/4 undercounts
# by three to four times, so each counts as one token.
_DENSE_SCRIPT = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3200-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00020000-\U0003ffff]"
)


class HeuristicEstimator(_Named):
    """A token estimate that never undercounts much: chars/4 for alphabetic scripts, one
    per character for CJK, kana and hangul. Its version changes only with the rule."""

    name = "heuristic"
    version = "1"

    def count(self, text: str) -> int:
        dense = len(_DENSE_SCRIPT.findall(text))
        return max(1, dense + math.ceil((len(text) - dense) / 4))


HEURISTIC: Final = HeuristicEstimator()


class HuggingFaceEstimator(_Named):
    """Counts with a Hugging Face tokenizer (`tokenizer.json`): the text's own tokens, no
    special tokens, padding or truncation (a pack joins chunks into one prompt)."""

    def __init__(self, tokenizer: tokenizers.Tokenizer, *, name: str, version: str) -> None:
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        self.name = name
        self.version = version

    @classmethod
    def from_file(cls, path: Path) -> HuggingFaceEstimator:
        """Named `hf:<model>` after the file (or its folder, for the usual
        `<model>/tokenizer.json`), versioned by the file's sha256."""
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise _missing_library("hf", "tokenizers") from None
        data = _read(path)
        try:
            tokenizer = Tokenizer.from_buffer(data)
        except Exception as exc:  # the library raises a bare Exception for a bad file
            raise TokenizerError(
                f"{path} is not a Hugging Face tokenizer.json ({_first_line(exc)}); give the "
                "tokenizer.json a model ships with"
            ) from None
        made = cls(tokenizer, name=f"hf:{_model_name(path)}", version=_version(data))
        log.info("tokens.loaded", tokenizer=made.label, vocabulary=tokenizer.get_vocab_size())
        return made

    def count(self, text: str) -> int:
        return max(1, len(self._tokenizer.encode(text, add_special_tokens=False).ids))


# The pre-tokenizer patterns of tiktoken's public encodings (tiktoken_ext.openai_public),
# by the name their `.tiktoken` files carry; any other file is split like cl100k_base.
_R50K_PATTERN: Final = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
CL100K_PATTERN: Final = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN: Final = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_PATTERNS: Final = {
    "r50k_base": _R50K_PATTERN,
    "p50k_base": _R50K_PATTERN,
    "cl100k_base": CL100K_PATTERN,
    "o200k_base": _O200K_PATTERN,
}


class TiktokenEstimator(_Named):
    """Counts with a tiktoken BPE (a local `.tiktoken` ranks file), as ordinary text:
    a chunk that contains `<|endoftext|>` is counted, not refused."""

    def __init__(self, encoding: tiktoken.Encoding, *, name: str, version: str) -> None:
        self._encoding = encoding
        self.name = name
        self.version = version

    @classmethod
    def from_file(cls, path: Path) -> TiktokenEstimator:
        """Named `tiktoken:<file stem>`, versioned by the file's sha256."""
        try:
            import tiktoken
        except ImportError:
            raise _missing_library("tiktoken", "tiktoken") from None
        data = _read(path)
        digest = hashlib.sha256(data).hexdigest()
        # Parsed here, from the bytes just read: tiktoken's own loader copies every file
        # into a cache in the temporary directory, which a read-only deployment may lack.
        ranks = _ranks(path, data)
        _check_ranks(path, ranks)
        stem = _safe(path.name.removesuffix(".tiktoken"))
        encoding = tiktoken.Encoding(
            name=stem,
            pat_str=_PATTERNS.get(stem, CL100K_PATTERN),
            mergeable_ranks=ranks,
            special_tokens={},
        )
        made = cls(encoding, name=f"tiktoken:{stem}", version=digest[:VERSION_HEX])
        log.info("tokens.loaded", tokenizer=made.label, vocabulary=len(ranks))
        return made

    def count(self, text: str) -> int:
        return max(1, len(self._encoding.encode_ordinary(text)))


def _ranks(path: Path, data: bytes) -> dict[bytes, int]:
    """The BPE ranks of a .tiktoken file: per line, a base64 token, a space and its rank."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        token, _, rank = line.partition(b" ")
        try:
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (binascii.Error, ValueError):
            raise TokenizerError(
                f"{path} is not a .tiktoken ranks file: line {number} is not a base64 token, "
                "a space and its rank"
            ) from None
    return ranks


def estimator_from(spec: str) -> TokenEstimator:
    """The estimator a spec names: `heuristic`, `hf:PATH` or `tiktoken:PATH`
    (TokenizerError, a ValueError, saying what is wrong and what to do)."""
    scheme, path = _parse(spec)
    if path is None:
        return HEURISTIC
    if scheme == "hf":
        return HuggingFaceEstimator.from_file(path)
    return TiktokenEstimator.from_file(path)


def check_spec(spec: str) -> str:
    """The spec, if it can be loaded as far as can be told without loading it (scheme,
    local file, library installed); TokenizerError otherwise. Cheap: settings call it."""
    scheme, path = _parse(spec)
    if path is not None:
        library = "tokenizers" if scheme == "hf" else "tiktoken"
        if importlib.util.find_spec(library) is None:
            raise _missing_library(scheme, library)
        _require_file(path)
    return spec


def _parse(spec: str) -> tuple[str, Path | None]:
    text = spec.strip()
    if text == DEFAULT_SPEC:
        return DEFAULT_SPEC, None
    scheme, sep, rest = text.partition(":")
    if not sep or scheme not in ("hf", "tiktoken"):
        raise TokenizerError(
            f"unknown tokenizer {spec!r}: use one of {', '.join(SCHEMES)} "
            "(PATH: a local tokenizer file)"
        )
    if not rest.strip():
        raise TokenizerError(f"tokenizer {spec!r} names no file: write {scheme}:PATH")
    if "://" in rest:
        raise TokenizerError(
            f"tokenizer {spec!r} is a URL: tokenizers are never downloaded; copy the file to "
            f"the host and write {scheme}:PATH"
        )
    return scheme, Path(rest.strip()).expanduser()


def _require_file(path: Path) -> None:
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise TokenizerError(f"tokenizer file {path} {what}; give the path of the file itself")


def _read(path: Path) -> bytes:
    _require_file(path)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise TokenizerError(
            f"tokenizer file {path} is {size:,} bytes, more than {MAX_FILE_BYTES:,}: "
            "not a tokenizer file"
        )
    return path.read_bytes()


def _check_ranks(path: Path, ranks: dict[bytes, int]) -> None:
    """Refuse ranks tiktoken would crash on (not raise) when building or encoding."""
    missing = sum(1 for b in range(256) if bytes([b]) not in ranks)
    if missing:
        raise TokenizerError(
            f"{path} is not a byte-level BPE: {missing} of the 256 single bytes have no rank, "
            "so some text could not be encoded"
        )
    if len(set(ranks.values())) != len(ranks):
        raise TokenizerError(f"{path} gives two tokens the same rank; each rank is one token")


def _version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:VERSION_HEX]


def _model_name(path: Path) -> str:
    """`models/bert-base-uncased/tokenizer.json` -> `bert-base-uncased`; `gpt.json` -> `gpt`."""
    stem = path.stem
    if stem == "tokenizer" and path.resolve().parent.name:
        return _safe(path.resolve().parent.name)
    return _safe(stem)


def _safe(name: str) -> str:
    return _UNSAFE.sub("-", name).strip("-")[:NAME_CHARS] or "unnamed"


def _missing_library(scheme: str, library: str) -> TokenizerError:
    return TokenizerError(
        f"tokenizer {scheme}:PATH needs the `{library}` library, which is not installed: {INSTALL}"
    )


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
