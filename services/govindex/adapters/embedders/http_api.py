"""`http:URL`: an OpenAI-compatible embeddings endpoint (`POST {base}/v1/embeddings`).

OpenAI's API, text-embeddings-inference, vLLM, Ollama, LocalAI and most gateways speak it:
`{"model": ..., "input": [...]}` in, `{"data": [{"index": i, "embedding": [...]}]}` out.
Texts go in batches of `batch`, one request at a time, each answer checked before any of
it is used: one vector per text, by `index`, all of one length (the configured `dims`, or
the first answer's, then enforced), finite; then scaled to unit length (the port's
contract). An answer is read streamed and refused once it grows past what the batch needs
(`max_response_bytes`), so a hostile or broken server cannot make us hold more.

Connection errors, timeouts, 429 and 5xx are retried (`retries` times, exponential backoff
with jitter; a Retry-After is honoured up to `max_retry_after_s`); then, and for answers
that cannot be used, EmbeddingUnavailable: a TransientError (the model server is away, the
documents are fine), never a reason to dead-letter one.

The API key is sent as a bearer token and never shown: not in a repr, a log line or an
error (a server's answer quoted in an error has it blanked). URLs holding credentials are
refused for the same reason.

Named `http:<model>`; versioned `<model>@<digest of host, port and path>` (or the
`version` given), so the same model name behind another server is another version.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import random
import re
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

import httpx
import numpy as np
import structlog

from govindex.adapters.embedders.base import (
    VERSION_HEX,
    EmbedderError,
    EmbeddingUnavailable,
    InvalidEmbeddingResponse,
    one_line,
    safe_name,
    to_unit_bytes,
)

log = structlog.get_logger(__name__)

SETTINGS: Final = "GOVINDEX_EMBEDDER"  # the prefix of the settings the messages point to
BATCH: Final = 64
TIMEOUT_S: Final = 30.0
RETRIES: Final = 3
BACKOFF_S: Final = 0.5
MAX_BACKOFF_S: Final = 8.0
MAX_RETRY_AFTER_S: Final = 30.0
# The answer's budget: JSON around the vectors, and 32 bytes a number (a float32 printed
# in full with its separator takes at most about 25). Before the first answer, and with
# no `dims` configured, a vector may be as long as the largest models make.
ENVELOPE_BYTES: Final = 64 * 1024
BYTES_PER_NUMBER: Final = 32
UNKNOWN_DIMS: Final = 8192
MAX_DIMS: Final = 65536
ERROR_BODY_BYTES: Final = 4096  # what is read of a refusal, to quote it
READ_BLOCK: Final = 64 * 1024
PROBE: Final = "dimension probe"
_RETRIED_STATUS: Final = frozenset({408, 425, 429})
_LOCAL: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_USERINFO: Final = re.compile(r"//[^/?#]*@")


@dataclass(frozen=True)
class Endpoint:
    """Where the embeddings route is, shown without credentials, and what identifies it."""

    url: str  # the route itself, POSTed to
    identity: str  # host[:port] + path, lower-cased host: the version's digest covers it


def endpoint_of(base: str) -> Endpoint:
    """The embeddings route of a base URL (EmbedderError saying what is wrong with it).

    `https://host`, `https://host/v1` and `https://host/v1/embeddings` are the same route:
    `/v1/embeddings` is added as far as it is missing.
    """
    text = base.strip()
    shown = one_line(_USERINFO.sub("//***@", text), 120)  # never a password, even malformed
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise EmbedderError(f"http: {shown!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EmbedderError(
            f"http: {shown!r} is not an http(s) URL: write "
            "http:https://HOST[:PORT][/PATH], the base the server's /v1/embeddings is under"
        )
    host = parts.hostname + (f":{port}" if port is not None else "")
    if parts.username is not None or parts.password is not None:
        raise EmbedderError(
            f"http: the URL of {parts.scheme}://{host} holds credentials; they would be "
            f"shown wherever the setting is. Give the key in {SETTINGS}_API_KEY instead"
        )
    if parts.query or parts.fragment:
        raise EmbedderError(
            f"http: {parts.scheme}://{host}{parts.path} has a query or fragment; give the "
            "base URL only (the key goes in "
            f"{SETTINGS}_API_KEY)"
        )
    path = parts.path.rstrip("/")
    if path.endswith("/v1/embeddings"):
        route = path
    elif path.endswith("/v1"):
        route = f"{path}/embeddings"
    else:
        route = f"{path}/v1/embeddings"
    display_host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    display_host += f":{port}" if port is not None else ""
    return Endpoint(url=f"{parts.scheme}://{display_host}{route}", identity=f"{host}{route}")


class _Retryable(Exception):
    """One attempt failed in a way another attempt may not: `what` says how."""

    def __init__(self, what: str, retry_after: float | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.retry_after = retry_after


class HttpEmbedder:
    """Implements Embedder over an OpenAI-compatible `/v1/embeddings` endpoint (sync httpx).

    Thread-safe: the indexer calls it from worker threads, and the learned `dims` is set
    once. `dims` is the configured one or the first answer's; read before any embedding
    with none configured, it embeds one probe text to learn it.
    """

    def __init__(
        self,
        url: str,
        *,
        model: str,
        api_key: str | None = None,
        dims: int | None = None,
        batch: int = BATCH,
        timeout_s: float = TIMEOUT_S,
        retries: int = RETRIES,
        max_response_bytes: int | None = None,
        version: str | None = None,
        backoff_s: float = BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        max_retry_after_s: float = MAX_RETRY_AFTER_S,
    ) -> None:
        self._endpoint = endpoint_of(url)
        if not model.strip() or one_line(model, 256) != model:
            raise EmbedderError(
                f"http: the model name {one_line(model, 80)!r} must be one line of at most 256 "
                f"characters (the name the server serves, in {SETTINGS}_MODEL)"
            )
        _require(dims is None or 1 <= dims <= MAX_DIMS, f"dims must be 1 to {MAX_DIMS}")
        _require(batch >= 1, "batch must be at least 1")
        _require(timeout_s > 0 and math.isfinite(timeout_s), "timeout_s must be positive")
        _require(retries >= 0, "retries must be 0 or more")
        _require(
            max_response_bytes is None or max_response_bytes >= 1024,
            "max_response_bytes must be at least 1024",
        )
        _require(min(backoff_s, max_backoff_s, max_retry_after_s) >= 0, "waits must be >= 0")
        if api_key is not None and (not api_key or one_line(api_key, 4096) != api_key):
            raise EmbedderError(f"http: the API key ({SETTINGS}_API_KEY) must be one line")
        self._model = model
        self._key = api_key
        self._dims = dims
        self._dims_from = "configured" if dims is not None else "learned from its first answer"
        self._dims_lock = threading.Lock()
        self._batch = batch
        self._timeout_s = timeout_s
        self._retries = retries
        self._max_response_bytes = max_response_bytes
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._max_retry_after_s = max_retry_after_s
        self.name = f"http:{safe_name(model)}"
        digest = hashlib.sha256(f"{self._endpoint.identity}\n{model}".encode()).hexdigest()
        own = f"{safe_name(model)}@{digest[:VERSION_HEX]}"
        self.version = safe_name(version) if version is not None else own
        headers = {"Accept": "application/json", "Accept-Encoding": "gzip, deflate"}
        if api_key is not None:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout_s), follow_redirects=False
        )
        host = urlsplit(self._endpoint.url).hostname or ""
        if api_key is not None and self._endpoint.url.startswith("http:") and host not in _LOCAL:
            log.warning("embedder.key_in_clear", url=self._endpoint.url)

    @property
    def url(self) -> str:
        """The route POSTed to, without credentials."""
        return self._endpoint.url

    @property
    def dims(self) -> int:
        if self._dims is None:
            self.embed([PROBE])
        assert self._dims is not None
        return self._dims

    @dims.setter
    def dims(self, value: int) -> None:
        self._dims = value

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        if not texts:
            return []
        vectors: list[bytes] = []
        for start in range(0, len(texts), self._batch):
            vectors.extend(self._embed_batch(list(texts[start : start + self._batch])))
        return vectors

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpEmbedder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        key = ", key set" if self._key is not None else ""
        return f"<HttpEmbedder {self.name}/{self.version} at {self.url}{key}>"

    # --- one batch -------------------------------------------------------------------

    def _embed_batch(self, texts: list[str]) -> list[bytes]:
        started = time.monotonic()
        attempts = self._retries + 1
        for attempt in range(1, attempts + 1):
            try:
                rows = self._post(texts)
                break
            except _Retryable as failure:
                if attempt == attempts:
                    self._unavailable(
                        f"is unavailable: {failure.what} ({attempts} attempt(s) over "
                        f"{time.monotonic() - started:.1f} s)",
                        "check that the server is running and reachable from this host, and "
                        f"that {SETTINGS}_TIMEOUT_S gives it time to answer a batch",
                    )
                delay = self._delay(attempt, failure.retry_after)
                log.warning(
                    "embedder.retry",
                    url=self.url,
                    attempt=attempt,
                    of=attempts,
                    delay_s=round(delay, 3),
                    error=failure.what,
                )
                time.sleep(delay)
        return to_unit_bytes(rows, dims=self._dims_of(rows))

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._max_retry_after_s)
        ceiling = min(self._max_backoff_s, self._backoff_s * 2.0 ** (attempt - 1))
        return ceiling * (0.5 + random.random() / 2)

    def _post(self, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
        limit = self._limit(len(texts))
        deadline = time.monotonic() + self._timeout_s
        try:
            with self._client.stream(
                "POST", self.url, json={"model": self._model, "input": texts}
            ) as response:
                status = response.status_code
                if status in _RETRIED_STATUS or status >= 500:
                    said = self._quote(response, deadline)
                    raise _Retryable(f"HTTP {status}{said}", _retry_after(response))
                if not 200 <= status < 300:
                    self._refused(status, self._quote(response, deadline), len(texts))
                body = self._read(response, limit, deadline, len(texts))
        except httpx.TimeoutException:
            raise _Retryable(f"no answer within {self._timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"{type(exc).__name__}: {self._clean(str(exc))}") from None
        return self._parse(body, len(texts))

    def _limit(self, count: int) -> int:
        if self._max_response_bytes is not None:
            return self._max_response_bytes
        return ENVELOPE_BYTES + count * (self._dims or UNKNOWN_DIMS) * BYTES_PER_NUMBER

    def _read(self, response: httpx.Response, limit: int, deadline: float, count: int) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            self._invalid(f"announced a {int(declared):,}-byte answer", count, limit)
        parts: list[bytes] = []
        size = 0
        try:
            for data in _decoded(response, limit, self):
                size += len(data)
                if size > limit:
                    raise _Overflow
                if time.monotonic() > deadline:
                    raise _Retryable(f"the answer took more than {self._timeout_s:g} s")
                parts.append(data)
        except _Overflow:
            self._invalid("sent a larger answer", count, limit)
        return b"".join(parts)

    def _parse(self, body: bytes, count: int) -> np.ndarray[Any, np.dtype[np.float64]]:
        try:
            answer = json.loads(body, parse_constant=_non_finite)
        except _NonFinite:
            self._bad("sent NaN or Infinity in a vector", body)
        except ValueError:  # JSON and Unicode decoding errors are ValueErrors
            self._bad("answered with what is not JSON", body)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list):
            self._bad("answered without a `data` list", body)
        if len(data) != count:
            self._bad(f"sent {len(data)} embedding(s) for {count} text(s)", body)
        rows: list[list[float] | None] = [None] * count
        for position, item in enumerate(data):
            index = item.get("index") if isinstance(item, dict) else None
            if type(index) is not int or not 0 <= index < count:
                self._bad(f"sent item {position} without an index from 0 to {count - 1}", body)
            if rows[index] is not None:
                self._bad(f"sent index {index} twice", body)
            rows[index] = self._numbers(item.get("embedding"), index, body)
        lengths = {len(row) for row in rows if row is not None}
        if len(lengths) != 1:
            self._bad(f"sent vectors of different lengths ({sorted(lengths)[:5]})", body)
        matrix = np.asarray(rows, dtype=np.float64)
        if not np.isfinite(matrix).all():
            self._bad("sent a vector holding NaN or infinity", body)
        return matrix

    def _numbers(self, embedding: object, index: int, body: bytes) -> list[float]:
        if isinstance(embedding, str):  # encoding_format=base64: float32 little-endian
            try:
                raw = base64.b64decode(embedding, validate=True)
            except (binascii.Error, ValueError):
                self._bad(f"sent index {index}'s embedding as a string that is not base64", body)
            if not raw or len(raw) % 4:
                self._bad(f"sent index {index}'s embedding as base64 of no float32s", body)
            return [float(x) for x in np.frombuffer(raw, dtype="<f4")]
        if not isinstance(embedding, list) or not embedding:
            self._bad(f"sent index {index} without an `embedding` list", body)
        if not all(type(x) is float or type(x) is int for x in embedding):
            self._bad(f"sent index {index}'s embedding with what is not a number", body)
        return embedding

    def _dims_of(self, rows: np.ndarray[Any, np.dtype[np.float64]]) -> int:
        length = int(rows.shape[1])
        with self._dims_lock:
            if self._dims is None:
                if length > MAX_DIMS:
                    self._bad(f"sent vectors of {length} dimensions, more than {MAX_DIMS}", b"")
                self._dims = length
                log.info("embedder.dims_learned", url=self.url, dims=length, embedder=self.name)
            expected = self._dims
        if length != expected:
            self._bad(
                f"sent vectors of {length} dimensions, not the {expected} "
                f"{self._dims_from} ({SETTINGS}_DIMS); vectors of two lengths cannot be "
                "compared: point it at the model the index was embedded with, or change "
                "the model and run `govindex reembed`",
                b"",
            )
        return expected

    # --- what went wrong, said -------------------------------------------------------

    def _quote(self, response: httpx.Response, deadline: float) -> str:
        """`: <what the server said>`, from the first bytes of a refusal."""
        kept = b""
        try:
            for data in _decoded(response, ERROR_BODY_BYTES, self):
                kept += data
                if len(kept) >= ERROR_BODY_BYTES or time.monotonic() > deadline:
                    break
        except (httpx.HTTPError, EmbeddingUnavailable, _Overflow):
            pass
        said = self._clean(kept[:ERROR_BODY_BYTES].decode("utf-8", "replace"))
        return f": {said}" if said else ""

    def _clean(self, text: str) -> str:
        """A server's or library's words, with our key blanked, on one short line."""
        if self._key:
            text = text.replace(self._key, "***")
        return one_line(text)

    def _refused(self, status: int, said: str, count: int) -> NoReturn:
        if status in (401, 403):
            todo = f"set {SETTINGS}_API_KEY to a key it accepts"
        elif 300 <= status < 400:
            todo = "redirects are not followed: give the URL it redirects to"
        elif status in (404, 405):
            todo = (
                "give the server's base URL (the part before /v1/embeddings) and check that "
                "it serves OpenAI-compatible embeddings"
            )
        else:
            todo = (
                f"check {SETTINGS}_MODEL names a model it serves; if it says a text is too "
                "long, have the server truncate inputs (text-embeddings-inference: "
                f"--auto-truncate) or lower {SETTINGS}_BATCH"
            )
        self._unavailable(f"refused a batch of {count} text(s) with HTTP {status}{said}", todo)

    def _unavailable(self, what: str, todo: str) -> NoReturn:
        raise EmbeddingUnavailable(f"the embeddings endpoint {self.url} {what}; {todo}")

    def _invalid(self, what: str, count: int, limit: int) -> NoReturn:
        budget = "a fixed" if self._max_response_bytes is not None else "64 KiB plus 32 a number"
        raise InvalidEmbeddingResponse(
            f"the embeddings endpoint {self.url} {what} for {count} text(s), past the "
            f"{limit:,} bytes they may take ({budget}); refused. Set {SETTINGS}_DIMS to the "
            f"model's size, or {SETTINGS}_MAX_RESPONSE_BYTES if its answers really are larger"
        )

    def _bad(self, what: str, body: bytes) -> NoReturn:
        sent = f" (it sent: {self._clean(body[:300].decode('utf-8', 'replace'))})" if body else ""
        raise InvalidEmbeddingResponse(
            f"the embeddings endpoint {self.url} {what}{sent}; nothing was stored. Check "
            "that it serves OpenAI-compatible embeddings for the configured model"
        )


class _NonFinite(ValueError):
    pass


class _Overflow(Exception):
    """A body past its limit."""


def _non_finite(constant: str) -> NoReturn:
    raise _NonFinite(constant)


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise EmbedderError(f"http: {what}")


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds a 429 or 503 asks us to wait: a number, or an HTTP date."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _decoded(response: httpx.Response, limit: int, owner: HttpEmbedder) -> Iterator[bytes]:
    """The body's bytes, decompressed as they come and never past `limit` (then
    _Overflow): a gzip bomb is refused like an oversized body, not inflated first."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        yield from response.iter_raw(READ_BLOCK)
        return
    if encoding not in ("gzip", "x-gzip", "deflate"):
        owner._bad(f"sent a body in {one_line(encoding, 40)!r} encoding, not asked for", b"")
    inflater = zlib.decompressobj(wbits=32 + zlib.MAX_WBITS)  # gzip or zlib, by its header
    produced = 0
    try:
        for raw in response.iter_raw(READ_BLOCK):
            data = inflater.decompress(raw, limit + 1 - produced)
            produced += len(data)
            if produced > limit or inflater.unconsumed_tail:
                raise _Overflow
            yield data
        rest = inflater.flush()
        if produced + len(rest) > limit:
            raise _Overflow
        yield rest
    except zlib.error:
        owner._bad(f"sent a body that is not valid {encoding}", b"")
