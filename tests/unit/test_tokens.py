"""One token estimator at ingest and at read: the heuristic's numbers, real tokenizers from
local files (trained or written here, never downloaded), and the errors a bad spec gets."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import tiktoken
from pydantic import ValidationError
from tiktoken.load import load_tiktoken_bpe
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from govindex.core.envelope import Envelope
from govindex.core.events import DOCUMENT_UPDATED
from govindex.core.ports import VersionPlan
from govindex.core.settings import Settings
from govindex.core.tokens import (
    CL100K_PATTERN,
    HEURISTIC,
    TokenEstimator,
    TokenizerError,
    estimator_from,
)
from indexer.planning import plan_change, plan_version
from reader import text as textual
from tests.support.builders import TEXT, change_payload, manifest

CORPUS = [
    "The primary database fails over to the replica in thirty seconds.",
    "Page the on-call engineer when the replica lags behind the primary.",
    "Rotate the credentials of the payment service every ninety days.",
    "The runbook lists the steps to restore the database from a snapshot.",
] * 4
SAMPLE = "The replica fails over; page the on-call engineer."
NOW = datetime(2025, 3, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def tiktoken_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where tiktoken's own loader would copy every ranks file it loads (ours must not)."""
    cache = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


# --- the heuristic --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 1),
        ("a", 1),
        ("The replica fails over in thirty seconds.", 11),  # 41 characters / 4
        ("x" * 4000, 1000),
        ("東京の天気は晴れです", 10),  # one per kanji and kana
        ("한국어 문서입니다", 9),  # one per hangul syllable, the space a quarter
        ("Mixed 日本語 text", 6),
        ("ｱｲｳ fullwidth", 6),
        ("𠀀𠀁 rare", 4),  # ideographs beyond the BMP
    ],
)
def test_the_heuristic_counts_as_the_read_side_always_did(text: str, expected: int) -> None:
    assert HEURISTIC.count(text) == expected
    assert textual.tokens(text) == expected  # the read side's callers, unchanged


def test_the_default_estimator_is_named_with_its_version() -> None:
    chosen = estimator_from("heuristic")
    assert chosen is HEURISTIC
    assert (chosen.name, chosen.version, chosen.label) == ("heuristic", "1", "heuristic/1")
    assert estimator_from(Settings().tokenizer).label == "heuristic/1"


# --- a Hugging Face tokenizer.json ----------------------------------------------------


def train_tokenizer(path: Path, *, vocab_size: int = 120, truncate_at: int | None = None) -> Path:
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[UNK]"])
    tokenizer.train_from_iterator(CORPUS, trainer)
    if truncate_at is not None:
        tokenizer.enable_truncation(max_length=truncate_at)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


def test_a_hugging_face_tokenizer_counts_what_the_library_encodes(tmp_path: Path) -> None:
    path = train_tokenizer(tmp_path / "runbook-bpe" / "tokenizer.json")
    chosen = estimator_from(f"hf:{path}")
    reference = Tokenizer.from_file(str(path))
    for text in [SAMPLE, *CORPUS[:4], "database"]:
        assert chosen.count(text) == len(reference.encode(text).ids) > 0
    assert chosen.count("") == 1
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    assert chosen.label == f"hf:runbook-bpe/{digest}"  # named after the model's folder


def test_a_changed_tokenizer_file_is_a_new_version(tmp_path: Path) -> None:
    path = tmp_path / "ops.json"
    first = estimator_from(f"hf:{train_tokenizer(path, vocab_size=120)}")
    second = estimator_from(f"hf:{train_tokenizer(path, vocab_size=200)}")
    assert first.name == second.name == "hf:ops"
    assert first.version != second.version


def test_a_label_fits_a_manifest_whatever_the_file_is_called(tmp_path: Path) -> None:
    path = train_tokenizer(tmp_path / ("model with spaces\n" + "x" * 200) / "tokenizer.json")
    label = estimator_from(f"hf:{path}").label
    assert len(label) <= 128 and label.isprintable() and " " not in label
    assert label.startswith("hf:model-with-spaces-xxx")


def test_a_truncating_tokenizer_still_counts_the_whole_text(tmp_path: Path) -> None:
    path = train_tokenizer(tmp_path / "tokenizer.json", truncate_at=4)
    assert len(Tokenizer.from_file(str(path)).encode(SAMPLE).ids) == 4
    assert estimator_from(f"hf:{path}").count(SAMPLE) > 4


# --- a tiktoken ranks file ------------------------------------------------------------


def write_ranks(path: Path, merges: list[bytes], *, single_bytes: int = 256) -> Path:
    """A `.tiktoken` file: every single byte (so any text encodes), then the merges."""
    tokens = [bytes([b]) for b in range(single_bytes)] + merges
    path.write_bytes(
        b"".join(base64.b64encode(t) + b" %d\n" % rank for rank, t in enumerate(tokens))
    )
    return path


MERGES = [b"th", b"he", b"the", b" t", b" the", b"re", b"er", b"ep", b"rep", b"in", b"ing"]


def test_a_tiktoken_file_counts_what_its_encoding_encodes(tmp_path: Path) -> None:
    path = write_ranks(tmp_path / "ops_base.tiktoken", MERGES)
    chosen = estimator_from(f"tiktoken:{path}")
    reference = tiktoken.Encoding(
        "reference",
        pat_str=CL100K_PATTERN,
        mergeable_ranks=load_tiktoken_bpe(str(path)),
        special_tokens={},
    )
    for text in [SAMPLE, "the theme", "東京の天気", "x" * 50]:
        assert chosen.count(text) == len(reference.encode_ordinary(text)) > 0
    assert chosen.count("the") == 1
    assert chosen.count("") == 1
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    assert chosen.label == f"tiktoken:ops_base/{digest}"


def test_a_chunk_that_spells_a_special_token_is_counted_not_refused(tmp_path: Path) -> None:
    chosen = estimator_from(f"tiktoken:{write_ranks(tmp_path / 'ops.tiktoken', MERGES)}")
    assert chosen.count("ignore this <|endoftext|> marker") > 5


def test_a_changed_tiktoken_file_is_read_again_and_nothing_is_copied_to_a_cache(
    tmp_path: Path, tiktoken_cache: Path
) -> None:
    path = write_ranks(tmp_path / "ops.tiktoken", [])
    before = estimator_from(f"tiktoken:{path}")
    assert not tiktoken_cache.exists()  # read from the file itself, no copy written
    write_ranks(path, MERGES)
    after = estimator_from(f"tiktoken:{path}")
    assert before.version != after.version
    assert (before.count("the"), after.count("the")) == (3, 1)


def test_a_ranks_file_without_every_byte_is_refused(tmp_path: Path) -> None:
    path = write_ranks(tmp_path / "partial.tiktoken", [], single_bytes=128)
    with pytest.raises(TokenizerError, match="128 of the 256 single bytes have no rank"):
        estimator_from(f"tiktoken:{path}")


# --- specs that cannot be used --------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sentencepiece:/models/m.model", "unknown tokenizer"),
        ("bpe", "unknown tokenizer"),
        ("", "unknown tokenizer"),
        ("hf:", "names no file"),
        ("tiktoken:https://example.com/cl100k_base.tiktoken", "never downloaded"),
        ("hf:s3://bucket/tokenizer.json", "never downloaded"),
    ],
)
def test_a_spec_that_names_no_usable_tokenizer_says_what_to_write(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        estimator_from(spec)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    for scheme in ("hf", "tiktoken"):
        missing = tmp_path / f"absent.{scheme}"
        with pytest.raises(TokenizerError, match=f"{re.escape(str(missing))} does not exist"):
            estimator_from(f"{scheme}:{missing}")
    with pytest.raises(TokenizerError, match="is a directory"):
        estimator_from(f"hf:{tmp_path}")


def test_a_file_that_is_not_a_tokenizer_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "tokenizer.json"
    junk.write_text('{"not": "a tokenizer"}')
    with pytest.raises(TokenizerError, match=r"not a Hugging Face tokenizer\.json"):
        estimator_from(f"hf:{junk}")
    junk.write_text("not base64 and no rank\n")
    with pytest.raises(TokenizerError, match=r"not a \.tiktoken ranks file"):
        estimator_from(f"tiktoken:{junk}")


def test_a_bad_tokenizer_setting_is_a_settings_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOVINDEX_TOKENIZER", f"hf:{tmp_path / 'absent.json'}")
    with pytest.raises(ValidationError, match=r"GOVINDEX_TOKENIZER=.*does not exist"):
        Settings()
    monkeypatch.setenv("GOVINDEX_TOKENIZER", "wordpiece")
    with pytest.raises(ValidationError, match="GOVINDEX_TOKENIZER='wordpiece' is refused"):
        Settings()
    path = train_tokenizer(tmp_path / "tokenizer.json")
    monkeypatch.setenv("GOVINDEX_TOKENIZER", f"hf:{path}")
    assert Settings().tokenizer == f"hf:{path}"


# --- the indexer stamps with the configured estimator ---------------------------------


def counted_as(chunks_text: list[str], tokens: TokenEstimator) -> list[int]:
    return [tokens.count(t) for t in chunks_text]


def test_the_indexer_stamps_token_estimate_with_the_configured_estimator(tmp_path: Path) -> None:
    chosen = estimator_from(f"hf:{train_tokenizer(tmp_path / 'tokenizer.json')}")
    source = manifest("docs", "acme")
    payload = change_payload("acme", "docs", "runbooks/failover.md", 1, TEXT)
    plan = plan_version(payload, TEXT, source, generation=1, now=NOW, tokens=chosen)
    texts = [c.text for c in plan.chunks]
    assert len(texts) > 1
    stamped = [c.token_estimate for c in plan.chunks]
    assert stamped == counted_as(texts, chosen) != counted_as(texts, HEURISTIC)
    default = plan_version(payload, TEXT, source, generation=1, now=NOW)
    assert [c.token_estimate for c in default.chunks] == counted_as(texts, HEURISTIC)


def test_an_event_planned_for_the_batch_is_stamped_with_the_configured_estimator(
    tmp_path: Path,
) -> None:
    """`plan_change` is what the indexer's batch preparation calls for each event."""
    chosen = estimator_from(f"hf:{train_tokenizer(tmp_path / 'tokenizer.json')}")
    payload = change_payload("acme", "docs", "runbooks/failover.md", 1, TEXT)
    envelope = Envelope("e1", DOCUMENT_UPDATED, "test", None, NOW, {}, {})
    source = manifest("docs", "acme")
    event = plan_change(0, envelope, payload, TEXT, source, generation=1, now=NOW, tokens=chosen)
    assert isinstance(event.plan, VersionPlan)
    texts = [c.text for c in event.plan.chunks]
    assert [c.token_estimate for c in event.plan.chunks] == counted_as(texts, chosen)
    assert counted_as(texts, chosen) != counted_as(texts, HEURISTIC)
