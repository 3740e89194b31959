"""The dense channel's models, chosen by one setting (`GOVINDEX_EMBEDDER`).

- `wordllama` (the default): WordLlama's 256-dimension static model, shipped in its wheel.
- `none`: no dense channel (no vectors at ingest, no dense retrieval at read).
- `model2vec:DIR`: a model2vec static model saved in a local directory.
- `sentence-transformers:DIR`: a sentence-transformers model in a local directory (needs
  `pip install 'govindex[sentence-transformers]'`, which brings torch).
- `http:URL`: an OpenAI-compatible `/v1/embeddings` endpoint; its model, key, dims, batch,
  timeout and retries come from their own settings (HttpOptions).

Every embedder implements the Embedder port: `name` and `version` are stamped on each
vector (a change of either is a new model, which `govindex reembed` fills in), `dims`, and
`embed(texts)` returning float32 little-endian unit vectors. Nothing is ever downloaded:
local models are read from their directory, and the only network an embedder uses is the
endpoint of `http:`.

`parse_embedder` turns the setting into an EmbedderSpec (EmbedderError, a ValueError,
saying what was wrong and what is accepted); `check_embedder` adds the checks that need no
loading (library installed, model files present); `make_embedder` loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from govindex.adapters.embedders import http_api
from govindex.adapters.embedders import model2vec as model2vec_dir
from govindex.adapters.embedders import sentence_transformers as st_dir
from govindex.adapters.embedders.base import (
    EmbedderError,
    EmbeddingUnavailable,
    InvalidEmbeddingResponse,
)
from govindex.adapters.embedders.http_api import HttpEmbedder
from govindex.adapters.embedders.model2vec import Model2VecEmbedder
from govindex.adapters.embedders.sentence_transformers import SentenceTransformersEmbedder
from govindex.adapters.embedders.wordllama import WordLlamaEmbedder
from govindex.core.ports.reading import Embedder

__all__ = [
    "DEFAULT_SPEC",
    "SCHEMES",
    "EmbedderError",
    "EmbedderSpec",
    "EmbeddingUnavailable",
    "HttpEmbedder",
    "HttpOptions",
    "InvalidEmbeddingResponse",
    "Model2VecEmbedder",
    "SentenceTransformersEmbedder",
    "WordLlamaEmbedder",
    "check_embedder",
    "make_embedder",
    "parse_embedder",
]

SETTING: Final = "GOVINDEX_EMBEDDER"
DEFAULT_SPEC: Final = "wordllama"
SCHEMES: Final = ("wordllama", "none", "model2vec:DIR", "sentence-transformers:DIR", "http:URL")
Kind = Literal["wordllama", "none", "model2vec", "sentence-transformers", "http"]
_LOCAL: Final = ("model2vec", "sentence-transformers")


class HttpOptions(BaseModel):
    """What `http:URL` needs besides the URL, from settings (GOVINDEX_EMBEDDER_*)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, max_length=256)
    api_key: SecretStr | None = None
    dims: int | None = Field(default=None, ge=1, le=http_api.MAX_DIMS)
    batch: int = Field(default=http_api.BATCH, ge=1, le=2048)
    timeout_s: float = Field(default=http_api.TIMEOUT_S, gt=0, le=600)
    retries: int = Field(default=http_api.RETRIES, ge=0, le=10)
    max_response_bytes: int | None = Field(default=None, ge=1024)
    version: str | None = Field(default=None, min_length=1, max_length=100)
    backoff_s: float = Field(default=http_api.BACKOFF_S, ge=0, le=60)
    max_retry_after_s: float = Field(default=http_api.MAX_RETRY_AFTER_S, ge=0, le=600)


class EmbedderSpec(BaseModel):
    """One parsed `GOVINDEX_EMBEDDER`: the kind, and its directory or URL and options.

    `str(spec)` is the setting again (never a key: keys are not part of it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Kind = "wordllama"
    path: Path | None = None  # model2vec, sentence-transformers
    url: str | None = None  # http
    http: HttpOptions | None = None  # http

    @model_validator(mode="after")
    def _complete(self) -> EmbedderSpec:
        if self.kind in _LOCAL and self.path is None:
            raise EmbedderError(f"{self.kind}:DIR needs the model's directory")
        if self.kind != "http" and (self.url is not None or self.http is not None):
            raise EmbedderError(f"{self.kind} takes no URL or HTTP options")
        if self.kind not in _LOCAL and self.path is not None:
            raise EmbedderError(f"{self.kind} takes no directory")
        if self.kind == "http":
            if self.url is None:
                raise EmbedderError("http:URL needs the endpoint's base URL")
            http_api.endpoint_of(self.url)
            if self.http is None:
                raise EmbedderError(
                    f"{self.kind}:{self.url} needs the name of the model to ask for: set "
                    f"{SETTING}_MODEL (the `model` the endpoint serves)"
                )
        return self

    def __str__(self) -> str:
        if self.kind in _LOCAL:
            return f"{self.kind}:{self.path}"
        if self.kind == "http":
            return f"http:{self.url}"
        return self.kind


def parse_embedder(value: str, *, http: HttpOptions | None = None) -> EmbedderSpec:
    """The spec a `GOVINDEX_EMBEDDER` value names (EmbedderError saying what was wrong and
    what is accepted). Checks the syntax only; `check_embedder` looks at the directory.

    `http` carries the options of an `http:URL` spec (its model at least); a bare
    `https://...` is read as `http:https://...`.
    """
    text = value.strip()
    lowered = text.lower()
    if lowered in ("wordllama", "none"):
        return _spec(kind="wordllama" if lowered == "wordllama" else "none")
    if lowered.startswith(("http://", "https://")):
        text = f"http:{text}"
    scheme, sep, rest = text.partition(":")
    scheme, rest = scheme.strip().lower(), rest.strip()
    if not sep or scheme not in (*_LOCAL, "http"):
        # Only the scheme of a `scheme:...` (what follows may be a key pasted by mistake).
        shown = f"{scheme}:…" if sep else (text if len(text) <= 80 else text[:80] + "…")
        raise EmbedderError(
            f"unknown embedder {shown!r} in {SETTING}: use one of {', '.join(SCHEMES)} "
            "(DIR: a local model directory; URL: an OpenAI-compatible endpoint's base)"
        )
    if not rest:
        what = "names no directory" if scheme in _LOCAL else "names no URL"
        placeholder = "DIR" if scheme in _LOCAL else "URL"
        raise EmbedderError(f"embedder {text!r} {what}: write {scheme}:{placeholder}")
    if scheme == "http":
        return _spec(kind="http", url=rest, http=http)
    if "://" in rest:
        raise EmbedderError(
            f"embedder {scheme}:{rest} is a URL: {scheme} models are loaded from a local "
            "directory, never downloaded; copy the model's folder to this host (for one on "
            "Hugging Face: `hf download ORG/NAME --local-dir /models/NAME`) and write "
            f"{scheme}:/models/NAME"
        )
    kind: Kind = "model2vec" if scheme == "model2vec" else "sentence-transformers"
    return _spec(kind=kind, path=Path(rest).expanduser())


def _spec(**fields: object) -> EmbedderSpec:
    """The spec, or the EmbedderError its validation raised (not pydantic's wrapping)."""
    try:
        return EmbedderSpec.model_validate(fields)
    except ValidationError as exc:
        for error in exc.errors():
            cause = error.get("ctx", {}).get("error")
            if isinstance(cause, EmbedderError):
                raise EmbedderError(str(cause)) from None
        raise EmbedderError(f"embedder options refused: {exc}") from None


def check_embedder(spec: EmbedderSpec) -> EmbedderSpec:
    """The spec, if it can be loaded as far as can be told without loading it: the library
    installed, the directory holding a model's files. Cheap: for settings and `status`."""
    if spec.kind == "model2vec" and spec.path is not None:
        model2vec_dir.check(spec.path, spec=str(spec))
    elif spec.kind == "sentence-transformers" and spec.path is not None:
        st_dir.check(spec.path, spec=str(spec))
    return spec


def make_embedder(spec: EmbedderSpec) -> Embedder | None:
    """The embedder a spec names, loaded (None for `none`); EmbedderError when it cannot
    be. `http:` does no I/O here: the endpoint is first called by the first embedding."""
    if spec.kind == "none":
        return None
    if spec.kind == "wordllama":
        return WordLlamaEmbedder()
    if spec.kind == "model2vec" and spec.path is not None:
        return Model2VecEmbedder.from_directory(spec.path)
    if spec.kind == "sentence-transformers" and spec.path is not None:
        return SentenceTransformersEmbedder.from_directory(spec.path)
    assert spec.kind == "http" and spec.url is not None and spec.http is not None
    options = spec.http
    return HttpEmbedder(
        spec.url,
        model=options.model,
        api_key=options.api_key.get_secret_value() if options.api_key is not None else None,
        dims=options.dims,
        batch=options.batch,
        timeout_s=options.timeout_s,
        retries=options.retries,
        max_response_bytes=options.max_response_bytes,
        version=options.version,
        backoff_s=options.backoff_s,
        max_retry_after_s=options.max_retry_after_s,
    )
