"""The pluggable embedders: specs parsed with clear errors, WordLlama unchanged, a real
model2vec model built here and loaded from its directory, the HTTP embedder against a real
loopback server (batching, retries, Retry-After, down, refused answers, the key kept
secret), and sentence-transformers refused with the extra to install when it is absent."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

import govindex.adapters.embedder as legacy
import govindex.adapters.embedders.wordllama as wordllama_adapter
from govindex.adapters.embedders import (
    EmbedderError,
    EmbedderSpec,
    EmbeddingUnavailable,
    HttpEmbedder,
    HttpOptions,
    InvalidEmbeddingResponse,
    Model2VecEmbedder,
    WordLlamaEmbedder,
    check_embedder,
    make_embedder,
    parse_embedder,
)
from govindex.adapters.embedders.http_api import PROBE
from govindex.adapters.embedders.wordllama import _tokens
from govindex.core.errors import TransientError
from tests.support.embedding_server import EmbeddingServer
from tests.support.models import M2V_DIMS, build_model2vec

KEY = "sk-test-0123456789abcdef"
MODEL = "wordllama-served"

# --- specs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("bert", "unknown embedder 'bert'"),
        ("", "unknown embedder ''"),
        ("model2vec", "unknown embedder 'model2vec'"),
        ("openai:sk-pasted-key", "unknown embedder 'openai:…' in GOVINDEX_EMBEDDER: use one of"),
        ("model2vec:", "names no directory: write model2vec:DIR"),
        ("sentence-transformers:  ", "names no directory"),
        ("http:", "names no URL: write http:URL"),
        ("model2vec:https://huggingface.co/minishlab/potion-base-8M", "never downloaded"),
        ("http:ftp://models.internal", "is not an http(s) URL"),
        ("http:https://", "is not an http(s) URL"),
        ("http:https://models.internal:99999", "is not a URL"),
        ("http:https://models.internal/?key=abc", "has a query or fragment"),
    ],
)
def test_a_bad_spec_says_what_was_wrong_and_what_is_accepted(value: str, said: str) -> None:
    with pytest.raises(EmbedderError) as caught:
        parse_embedder(value, http=HttpOptions(model=MODEL))
    assert said in str(caught.value)
    assert isinstance(caught.value, ValueError)  # settings validators report ValueErrors


def test_the_unknown_spec_error_lists_every_accepted_form() -> None:
    with pytest.raises(EmbedderError) as caught:
        parse_embedder("bert")
    for form in ("wordllama", "none", "model2vec:DIR", "sentence-transformers:DIR", "http:URL"):
        assert form in str(caught.value)


def test_credentials_in_the_url_are_refused_without_being_repeated() -> None:
    with pytest.raises(EmbedderError) as caught:
        parse_embedder("http:https://embed:hunter2@models.internal/", http=HttpOptions(model="m"))
    message = str(caught.value)
    assert "holds credentials" in message and "GOVINDEX_EMBEDDER_API_KEY" in message
    assert "hunter2" not in message and "embed:" not in message
    with pytest.raises(EmbedderError) as caught:  # a URL that does not even parse
        parse_embedder(
            "http:https://embed:hunter2@models.internal:99999/", http=HttpOptions(model="m")
        )
    assert "is not a URL" in str(caught.value) and "hunter2" not in str(caught.value)


def test_http_needs_a_model_and_says_which_setting() -> None:
    with pytest.raises(EmbedderError, match="GOVINDEX_EMBEDDER_MODEL"):
        parse_embedder("http:https://models.internal")


def test_good_specs_parse_and_print_back() -> None:
    assert parse_embedder("wordllama") == EmbedderSpec(kind="wordllama")
    assert parse_embedder("  WordLlama ").kind == "wordllama"
    assert parse_embedder("none").kind == "none"
    local = parse_embedder("model2vec:~/models/potion")
    assert local.kind == "model2vec" and local.path == Path.home() / "models" / "potion"
    assert str(local) == f"model2vec:{Path.home()}/models/potion"
    st = parse_embedder("sentence-transformers:/models/bge-small")
    assert (
        st.path == Path("/models/bge-small")
        and str(st) == "sentence-transformers:/models/bge-small"
    )
    options = HttpOptions(model="bge-small", api_key=SecretStr(KEY))
    http = parse_embedder("http:https://tei.internal:8080/", http=options)
    assert http.kind == "http" and str(http) == "http:https://tei.internal:8080/"
    assert parse_embedder("https://tei.internal:8080/", http=options) == http  # bare URL
    assert KEY not in repr(http) and KEY not in str(http)
    assert make_embedder(parse_embedder("none")) is None


def test_a_spec_cannot_mix_kinds() -> None:
    with pytest.raises(ValueError, match="takes no directory"):
        EmbedderSpec(kind="wordllama", path=Path("/models/x"))
    with pytest.raises(ValueError, match="needs the model's directory"):
        EmbedderSpec(kind="model2vec")


# --- wordllama ---------------------------------------------------------------------------

TEXTS = [
    "The payments service is owned by the payments team.",
    "Rotate the database credentials every ninety days.",
]
# The first components of TEXTS' vectors before embedders/ existed (wordllama 0.4.0.post1).
BEFORE = [
    [0.01304, -0.0192, 0.06872, 0.10944, -0.00146, 0.13467],
    [0.05832, 0.10501, 0.03136, 0.0384, 0.12884, 0.02209],
]


def test_wordllama_is_unchanged_and_still_importable_from_its_old_place() -> None:
    assert legacy.WordLlamaEmbedder is WordLlamaEmbedder
    embedder = make_embedder(parse_embedder("wordllama"))
    assert isinstance(embedder, WordLlamaEmbedder)
    assert (embedder.name, embedder.version, embedder.dims) == (
        "wordllama-l2_supercat-256",
        version("wordllama"),
        256,
    )
    vectors = embedder.embed(TEXTS)
    assert [len(v) for v in vectors] == [256 * 4, 256 * 4]
    for vector, before in zip(vectors, BEFORE, strict=True):
        row = np.frombuffer(vector, dtype="<f4")
        assert np.allclose(row[:6], before, atol=1e-4)
        assert math.isclose(float(np.linalg.norm(row)), 1.0, abs_tol=1e-5)
    # Exactly what the library itself gives with the loader's arguments of before.
    import wordllama
    from wordllama import WordLlama

    model = WordLlama.load(
        config="l2_supercat",
        dim=256,
        cache_dir=Path(wordllama.__file__).parent,
        disable_download=True,
    )
    direct = np.asarray(model.embed(TEXTS, norm=True), dtype="<f4")
    assert vectors == [row.tobytes() for row in direct]
    assert embedder.embed([]) == []


def _library_vectors(texts: list[str]) -> list[bytes]:
    from govindex.adapters.embedders.wordllama import _model

    return [row.tobytes() for row in np.asarray(_model().embed(texts, norm=True), dtype="<f4")]


_TEXT_PARTS = st.sampled_from([*"ab xyz  \n\t.,-é中😀\u2581#`", "the ", "database "])
_TEXTS = st.lists(_TEXT_PARTS, min_size=1, max_size=40).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXTS, min_size=1, max_size=8))
def test_wordllama_tokens_by_piece_are_the_tokenizers_own(texts: list[str]) -> None:
    from govindex.adapters.embedders.wordllama import _model

    tokens, tokenizer = _tokens(), _model().tokenizer
    for text in texts:  # the tokenizer's own answer for the whole text
        assert tokens.ids(text) == tokenizer.encode(text, add_special_tokens=False).ids
    assert WordLlamaEmbedder().embed(texts) == _library_vectors(texts)


def test_wordllama_vectors_are_the_librarys_bit_for_bit_in_any_grouping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    words = [
        "rotate",
        "the",
        "database",
        "credentials",
        "before",
        "the",
        "failover",
        "window",
        "closes",
    ]
    texts = [" ".join(words[: 1 + i % len(words)]) * (1 + i % 5) for i in range(120)]
    texts += ["x" * 3000, "  leading and trailing  ", "tabs\tand\nnewlines", "été 中文 😀"]
    expected = _library_vectors(texts)
    assert WordLlamaEmbedder().embed(texts) == expected
    # Small groups and a long text summed in blocks add in the same order: the same bits.
    monkeypatch.setattr(wordllama_adapter, "_CELLS", 7)
    assert WordLlamaEmbedder().embed(texts) == expected
    empty = np.frombuffer(WordLlamaEmbedder().embed([""])[0], dtype="<f4")
    assert np.isnan(empty).all()  # no tokens: NaN, as the library gives


# --- model2vec ---------------------------------------------------------------------------


def cosine(a: bytes, b: bytes) -> float:
    return float(np.frombuffer(a, dtype="<f4") @ np.frombuffer(b, dtype="<f4"))


@pytest.fixture(scope="module")
def potion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_model2vec(tmp_path_factory.mktemp("models") / "potion-test")


def test_a_model2vec_model_loads_from_its_directory_and_embeds_meaningfully(potion: Path) -> None:
    spec = check_embedder(parse_embedder(f"model2vec:{potion}"))
    embedder = make_embedder(spec)
    assert isinstance(embedder, Model2VecEmbedder)
    assert embedder.name == "model2vec:potion-test"
    assert embedder.dims == M2V_DIMS
    assert len(embedder.version) == 12 and int(embedder.version, 16) >= 0
    texts = [
        "payments team refunds invoices",
        "invoice refunds for card payments",
        "database replica failover",
    ]
    vectors = embedder.embed(texts)
    assert [len(v) for v in vectors] == [M2V_DIMS * 4] * 3
    for vector in vectors:
        assert math.isclose(float(np.linalg.norm(np.frombuffer(vector, "<f4"))), 1, abs_tol=1e-5)
    assert embedder.embed(texts) == vectors  # deterministic
    again = make_embedder(spec)
    assert again is not None and again.version == embedder.version
    assert again.embed(texts) == vectors
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2]) + 0.1
    assert embedder.embed([]) == []
    # A text with no token the model knows matches nothing (zeros), and is no error.
    (unknown,) = embedder.embed(["zzz qqq"])
    assert not np.frombuffer(unknown, "<f4").any()


def test_another_model_in_the_same_directory_is_another_version(tmp_path: Path) -> None:
    directory = build_model2vec(tmp_path / "m", seed=1)
    first = Model2VecEmbedder.from_directory(directory)
    build_model2vec(directory, seed=2)
    second = Model2VecEmbedder.from_directory(directory)
    assert first.name == second.name and first.version != second.version
    (directory / "README.md").write_text("edited model card\n")
    assert Model2VecEmbedder.from_directory(directory).version == second.version


def test_a_missing_model2vec_directory_is_named_and_never_downloaded(tmp_path: Path) -> None:
    missing = tmp_path / "minishlab" / "potion-base-8M"
    for call in (make_embedder, check_embedder):
        with pytest.raises(EmbedderError) as caught:
            call(parse_embedder(f"model2vec:{missing}"))
        assert str(missing) in str(caught.value) and "never downloaded" in str(caught.value)


def test_a_directory_without_a_model_is_named_with_what_it_lacks(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(EmbedderError) as caught:
        make_embedder(parse_embedder(f"model2vec:{tmp_path}"))
    message = str(caught.value)
    assert str(tmp_path) in message and "is not a model2vec model directory" in message
    assert "model.safetensors" in message and "notes.txt" in message
    with pytest.raises(EmbedderError, match="is a file"):
        make_embedder(parse_embedder(f"model2vec:{tmp_path / 'notes.txt'}"))


# --- sentence-transformers ---------------------------------------------------------------


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is not None,
    reason="sentence-transformers is installed here",
)
def test_sentence_transformers_without_the_library_says_which_extra_to_install(
    potion: Path,
) -> None:
    spec = parse_embedder(f"sentence-transformers:{potion}")
    for call in (make_embedder, check_embedder):
        with pytest.raises(EmbedderError) as caught:
            call(spec)
        message = str(caught.value)
        assert "needs the `sentence-transformers` library" in message
        assert "pip install 'govindex[sentence-transformers]'" in message


# --- http --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer() as running:
        yield running


@pytest.fixture(autouse=True)
def _fresh(request: pytest.FixtureRequest) -> None:
    if "server" in request.fixturenames:
        running: EmbeddingServer = request.getfixturevalue("server")
        running.start()
        running.clear()
        running.key = None


def http(server: EmbeddingServer, **options: Any) -> HttpEmbedder:
    return HttpEmbedder(server.url, model=MODEL, backoff_s=0.01, **options)


def local(texts: list[str]) -> np.ndarray:
    return np.stack([np.frombuffer(v, "<f4") for v in WordLlamaEmbedder().embed(texts)])


def test_texts_go_in_batches_and_come_back_in_order(server: EmbeddingServer) -> None:
    texts = [f"runbook {i}: restart the payments worker number {i}" for i in range(10)]
    with http(server, batch=4) as embedder:
        vectors = embedder.embed(texts)
    assert [len(r.body["input"]) for r in server.requests] == [4, 4, 2]
    assert {r.path for r in server.requests} == {"/v1/embeddings"}
    assert {r.body["model"] for r in server.requests} == {MODEL}
    assert [r.body["input"] for r in server.requests] == [texts[:4], texts[4:8], texts[8:]]
    got = np.stack([np.frombuffer(v, "<f4") for v in vectors])
    assert got.dtype == np.dtype("<f4") and got.shape == (10, 256)
    assert np.allclose(got, local(texts), atol=1e-6)  # the server answers in reverse order
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-6)
    assert embedder.dims == 256


def test_an_empty_list_asks_nothing(server: EmbeddingServer) -> None:
    assert http(server).embed([]) == []
    assert server.requests == []


def test_name_and_version_stamp_the_model_and_the_endpoint(server: EmbeddingServer) -> None:
    embedder = http(server)
    assert embedder.name == f"http:{MODEL}"
    assert embedder.version.startswith(f"{MODEL}@") and len(embedder.version) == len(MODEL) + 13
    # The base, with /v1 or the whole route: the same endpoint, the same version.
    for base in (f"{server.url}/", f"{server.url}/v1", f"{server.url}/v1/embeddings"):
        same = HttpEmbedder(base, model=MODEL)
        assert (same.url, same.version) == (f"{server.url}/v1/embeddings", embedder.version)
    assert HttpEmbedder("http://127.0.0.1:1/", model=MODEL).version != embedder.version
    assert HttpEmbedder(server.url, model="other").version != embedder.version
    assert HttpEmbedder(server.url, model=MODEL, version="bge-1.5").version == "bge-1.5"
    assert len(http(server).embed(["x"])) == 1


def test_the_factory_builds_it_from_a_spec_and_its_options(server: EmbeddingServer) -> None:
    spec = parse_embedder(f"http:{server.url}", http=HttpOptions(model=MODEL, batch=2, dims=256))
    embedder = make_embedder(spec)
    assert isinstance(embedder, HttpEmbedder) and embedder.dims == 256
    assert len(embedder.embed(["a", "b", "c"])) == 3
    assert len(server.requests) == 2


def test_503s_are_retried_then_it_succeeds(server: EmbeddingServer) -> None:
    server.fail_next(2, status=503)
    (vector,) = http(server, retries=3).embed(["promote the replica"])
    assert len(server.requests) == 3
    assert np.allclose(np.frombuffer(vector, "<f4"), local(["promote the replica"])[0], atol=1e-6)


def test_429_retry_after_is_honoured(server: EmbeddingServer) -> None:
    server.throttle_next("1")
    started = time.monotonic()
    http(server).embed(["rate limited"])
    assert time.monotonic() - started >= 0.95
    assert len(server.requests) == 2


def test_retry_after_is_honoured_up_to_its_cap_also_as_a_date(server: EmbeddingServer) -> None:
    server.throttle_next("3600")
    started = time.monotonic()
    http(server, max_retry_after_s=0.3).embed(["capped"])
    assert 0.25 <= time.monotonic() - started < 3
    server.throttle_next(format_datetime(datetime.now(UTC) + timedelta(seconds=5), usegmt=True))
    started = time.monotonic()
    http(server, max_retry_after_s=0.4).embed(["dated"])
    assert 0.35 <= time.monotonic() - started < 3


def test_a_server_failing_past_the_retries_is_unavailable(server: EmbeddingServer) -> None:
    server.fail_next(5, status=502)
    with pytest.raises(EmbeddingUnavailable) as caught:
        http(server, retries=2).embed(["x"])
    assert len(server.requests) == 3
    message = str(caught.value)
    assert f"{server.url}/v1/embeddings" in message and "HTTP 502" in message
    assert "3 attempt(s)" in message and "check that the server is running" in message


def test_a_server_too_slow_to_answer_times_out_and_is_retried(server: EmbeddingServer) -> None:
    server.stall_next(1.0)
    assert len(http(server, timeout_s=0.3).embed(["slow once"])) == 1
    assert len(server.requests) == 2
    server.stall_next(1.0, count=2)
    with pytest.raises(EmbeddingUnavailable, match=r"no answer within 0.3 s \(2 attempt"):
        http(server, timeout_s=0.3, retries=1).embed(["slow twice"])


def test_a_stopped_server_is_unavailable_then_used_again_once_restarted(
    server: EmbeddingServer,
) -> None:
    server.key = KEY
    embedder = http(server, api_key=KEY, retries=2)
    assert len(embedder.embed(["warm the pool"])) == 1  # a kept-alive connection to lose
    server.stop()
    started = time.monotonic()
    with pytest.raises(EmbeddingUnavailable) as caught:
        embedder.embed(["while down"])
    assert time.monotonic() - started < 5
    assert isinstance(caught.value, TransientError)  # retried later, never dead-lettered
    message = str(caught.value)
    assert f"{server.url}/v1/embeddings" in message and "3 attempt(s)" in message
    assert "Connect" in message and KEY not in message
    server.start()
    assert len(embedder.embed(["back up"])) == 1


def test_a_vector_of_another_length_is_refused_once_dims_are_learned(
    server: EmbeddingServer,
) -> None:
    embedder = http(server)
    assert embedder.dims == 256  # learned with one probe
    assert [r.body["input"] for r in server.requests] == [[PROBE]]
    server.wrong_length_next()
    with pytest.raises(InvalidEmbeddingResponse) as caught:
        embedder.embed(["one", "two"])
    assert "different lengths ([255, 256])" in str(caught.value)
    server.wrong_length_next()
    with pytest.raises(InvalidEmbeddingResponse) as caught:
        embedder.embed(["only one"])
    assert "255 dimensions, not the 256 learned from its first answer" in str(caught.value)


def test_configured_dims_are_enforced_from_the_first_answer(server: EmbeddingServer) -> None:
    with pytest.raises(InvalidEmbeddingResponse, match="256 dimensions, not the 128 configured"):
        http(server, dims=128).embed(["x"])


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        ("nan_next", "sent NaN or Infinity"),
        ("no_index_next", "without an index from 0 to 1"),
        ("fewer_next", "sent 1 embedding(s) for 2 text(s)"),
    ],
)
def test_answers_that_are_not_embeddings_are_refused_naming_what_was_sent(
    server: EmbeddingServer, spoil: str, said: str
) -> None:
    getattr(server, spoil)()
    with pytest.raises(InvalidEmbeddingResponse) as caught:
        http(server).embed(["first text", "second text"])
    message = str(caught.value)
    assert said in message and "(it sent: {" in message and "…" in message  # truncated
    assert len(server.requests) == 1  # a broken answer is not retried here


def test_an_oversized_body_is_refused_while_streaming(server: EmbeddingServer) -> None:
    embedder = http(server, dims=256)
    limit = 64 * 1024 + 256 * 32
    server.oversized_next(200 * 1024 * 1024)  # chunked: no length to judge it by
    started = time.monotonic()
    with pytest.raises(InvalidEmbeddingResponse) as caught:
        embedder.embed(["one text"])
    assert time.monotonic() - started < 5
    assert f"sent a larger answer for 1 text(s), past the {limit:,} bytes" in str(caught.value)
    assert server.oversized_sent < 32 * 1024 * 1024  # we hung up, not 200 MiB later
    server.oversized_next(1024 * 1024 * 1024, gzip=True)  # 1 GiB inflated, ~1 MiB sent
    with pytest.raises(InvalidEmbeddingResponse, match="sent a larger answer"):
        embedder.embed(["one text"])
    server.oversized_next(50 * 1024 * 1024, declare_length=True)
    with pytest.raises(InvalidEmbeddingResponse, match="announced a 52,428,800-byte answer"):
        embedder.embed(["one text"])
    # A body within the configured cap is read.
    server.oversized_next(512 * 1024)
    assert len(http(server, max_response_bytes=1024 * 1024).embed(["padded"])) == 1
    assert len(embedder.embed(["fine again"])) == 1


def test_the_bearer_key_is_sent_and_never_shown(server: EmbeddingServer) -> None:
    server.key = KEY
    embedder = http(server, api_key=KEY)
    assert len(embedder.embed(["with the key"])) == 1
    assert server.requests[-1].authorization == f"Bearer {KEY}"
    assert KEY not in repr(embedder) and "key set" in repr(embedder)
    wrong = "sk-wrong-9876543210"
    with pytest.raises(EmbeddingUnavailable) as caught:
        http(server, api_key=wrong).embed(["with the wrong key"])
    message = str(caught.value)
    # The server echoed the key it was sent; the error blanks it.
    assert "HTTP 401" in message and "Incorrect API key provided: Bearer ***" in message
    assert wrong not in message and KEY not in message and "GOVINDEX_EMBEDDER_API_KEY" in message
    with pytest.raises(EmbeddingUnavailable, match="HTTP 401"):
        http(server).embed(["without a key"])
    spec = parse_embedder(server.url, http=HttpOptions(model=MODEL, api_key=SecretStr(KEY)))
    built = make_embedder(spec)
    assert built is not None and KEY not in repr(built) and KEY not in repr(spec)
    assert len(built.embed(["from the spec"])) == 1


def test_a_refusal_says_what_to_do(server: EmbeddingServer) -> None:
    server.fail_next(1, status=413)
    with pytest.raises(EmbeddingUnavailable) as caught:
        http(server).embed(["a very long text"])
    assert "HTTP 413" in str(caught.value) and "--auto-truncate" in str(caught.value)
    assert len(server.requests) == 1  # a refusal is not retried here
    with pytest.raises(EmbeddingUnavailable, match="base URL"):
        HttpEmbedder(f"{server.url}/other", model=MODEL).embed(["x"])


def test_bad_options_are_refused_at_construction() -> None:
    with pytest.raises(EmbedderError, match="model name"):
        HttpEmbedder("http://127.0.0.1:1", model=" ")
    with pytest.raises(EmbedderError, match="batch"):
        HttpEmbedder("http://127.0.0.1:1", model="m", batch=0)
    with pytest.raises(EmbedderError, match="dims"):
        HttpEmbedder("http://127.0.0.1:1", model="m", dims=0)


async def test_the_server_serves_async_tests_too(server: EmbeddingServer) -> None:
    embedder = http(server, retries=1)
    await server.astop()
    with pytest.raises(EmbeddingUnavailable):
        await asyncio.to_thread(embedder.embed, ["down"])
    await server.astart()
    (vector,) = await asyncio.to_thread(embedder.embed, ["up"])
    assert np.allclose(np.frombuffer(vector, "<f4"), local(["up"])[0], atol=1e-6)


def test_a_model_that_fails_to_load_at_start_does_not_stop_the_indexer() -> None:
    """Start-up warms each local model; one that fails is left to the batches, which
    commit chunks without its vectors and queue them (`embedding.deferred`)."""
    from types import SimpleNamespace
    from typing import cast

    from govindex.runtime.composition import Runtime
    from indexer.app import warm_up

    warmed: list[str] = []

    class Broken:
        name, version, dims = "broken", "1", 4

        def warm(self) -> None:
            raise OSError("model files unreadable")

    class Fine:
        name, version, dims = "fine", "1", 4

        def warm(self) -> None:
            warmed.append(self.name)

    warm_up(cast(Runtime, SimpleNamespace(embedders=(Broken(), Fine()))))
    assert warmed == ["fine"]
