"""The shortcuts the parsers take for speed give what the plain code gives.

Line starts are found by splitting text with one kind of line end, and chunk records are
built by filling their slots (`indexer.parsers.base`); both must agree, on any input, with
the regex and the constructors they stand in for.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from govindex.core.records import ChunkDraft, ChunkKind, Span
from indexer.parsers import base
from indexer.parsers.base import NEWLINE, LineIndex
from indexer.parsers.markdown import _byte_line_starts

# Line ends of every kind, mixed or not, and characters str.splitlines() would also split on.
texts = st.text(alphabet=st.sampled_from(list("ab \t\r\n\u2028\x0b\x1cé")), max_size=80)
lf_texts = st.text(alphabet=st.sampled_from(list("ab \t\n\u2028é")), max_size=80)


@settings(max_examples=500, deadline=None)
@given(st.one_of(texts, lf_texts, lf_texts.map(lambda t: t.replace("\n", "\r\n"))))
def test_line_starts_are_where_the_regex_finds_line_ends(text: str) -> None:
    assert LineIndex(text).starts == [0, *(m.end() for m in NEWLINE.finditer(text))]
    data = text.encode()
    assert _byte_line_starts(data) == [0, *(m.end() for m in re.finditer(rb"\r\n|\r|\n", data))]


def test_chunk_records_built_from_slots_equal_the_constructed_ones() -> None:
    assert base._SPAN_SLOTS and base._DRAFT_SLOTS, "ChunkDraft or Span changed: fast path off"
    built = base._chunk(3, ChunkKind.STEP, "1. x", 10, 14, 2, 2, ("a", "b"), "a", 1, ("x",), "c")
    made = ChunkDraft(
        ordinal=3,
        kind=ChunkKind.STEP,
        text="1. x",
        span=Span(char_start=10, char_end=14, line_start=2, line_end=2),
        heading_path=("a", "b"),
        anchor="a",
        parent_ordinal=1,
        labels=("x",),
        context="c",
    )
    assert built == made
    assert hash(built) == hash(made)
    assert built.as_json() == made.as_json()
