"""The shortcuts the parsers take for speed give what the plain code gives.

Line starts are found by splitting text with one kind of line end, and chunk records are
built by filling their slots (`indexer.parsers.base`); both must agree, on any input, with
the regex and the constructors they stand in for. The Markdown cutter matches a line where
it starts in the document, which must find what matching the line alone finds.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from govindex.core.records import ChunkDraft, ChunkKind, Span
from indexer.parsers import base, markdown
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


# Every line break str.splitlines() knows: the texts that must leave its fast path.
breaks = st.text(
    alphabet=st.sampled_from(list("ab \r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029é")), max_size=60
)


@settings(max_examples=500, deadline=None)
@given(st.one_of(breaks, texts))
def test_line_starts_ignore_the_line_breaks_that_are_not_cr_or_lf(text: str) -> None:
    assert LineIndex(text).starts == [0, *(m.end() for m in NEWLINE.finditer(text))]


# What the cutter matched on each line, sliced out and stripped of its line end.
ITEM_LINE = re.compile(r"^( {0,3})(\d{1,9}[.)]|[-*+])[ \t]+(.*)$")
line_texts = st.lists(
    st.text(alphabet=st.sampled_from(list(" \t§()*.-+:ab19٣²|\u2028\x0b")), max_size=16),
    min_size=1,
    max_size=6,
).map(lambda lines: [*lines, "1. " + lines[0], "  (a) x", "**4.1 y", " § 2 z"])


@settings(max_examples=500, deadline=None)
@given(line_texts, st.sampled_from(["\n", "\r\n", "\r"]))
def test_lines_match_where_they_start_as_they_match_alone(lines: list[str], nl: str) -> None:
    text = nl.join(lines)
    index = LineIndex(text)
    ends = [*index.starts[1:], len(text)]
    for start, end in zip(index.starts, ends, strict=True):
        line = text[start:end].rstrip("\r\n")
        alone = ITEM_LINE.match(line)
        item, step = markdown._ITEM_AT.match(text, start), markdown._STEP_AT.match(text, start)
        assert (alone and alone.groups()) == (item and item.groups())
        assert (alone and alone.group(2)) == (step and step.group(1))
        clause = markdown._CLAUSE.match(line)
        assert (clause and clause.group(1)) == (
            (found := markdown._CLAUSE_AT.match(text, start)) and found.group(1)
        )
