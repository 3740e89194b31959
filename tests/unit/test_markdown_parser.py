"""Invariant 6: chunks are faithful — exact spans that cover the document."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from govindex.errors import InvalidEvent
from indexer.parsing import MarkdownParser, ParsedDocument, split_frontmatter

PARSER = MarkdownParser()


def parse(text: str) -> ParsedDocument:
    """Parse, setting aside documents whose frontmatter is not YAML (rejected on purpose)."""
    try:
        return PARSER.parse(text)
    except InvalidEvent:
        assume(False)
        raise


line = st.one_of(
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 7), st.text(max_size=30)),
    st.sampled_from(
        [
            "```",
            "~~~",
            "````",
            "",
            "   ",
            "---",
            "# ",
            "#",
            "####### x",
            "    # indented code",
            "## Ünïcödé 標題 ##",
            "text with #hash",
        ]
    ),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60),
)
documents = st.builds(
    lambda lines, newline, frontmatter: (
        ("---" + newline + "acl: [a]" + newline + "---" + newline if frontmatter else "")
        + newline.join(lines)
    ),
    st.lists(line, max_size=40),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(documents)
def test_every_chunk_is_the_exact_source_text_at_its_span(text: str) -> None:
    parsed = parse(text)
    for chunk in parsed.chunks:
        assert text[chunk.span.char_start : chunk.span.char_end] == chunk.text
        assert chunk.span.line_start == text.count("\n", 0, chunk.span.char_start) + 1
        assert chunk.span.line_end >= chunk.span.line_start


@settings(max_examples=400, deadline=None)
@given(documents)
def test_chunks_cover_the_body_with_no_gap_or_overlap(text: str) -> None:
    parsed = parse(text)
    position = parsed.body_start
    for chunk in parsed.chunks:
        assert chunk.span.char_start >= position, "overlap"
        assert text[position : chunk.span.char_start].strip() == "", "gap holding text"
        position = chunk.span.char_end
    assert text[position:].strip() == ""


@settings(max_examples=200, deadline=None)
@given(documents)
def test_parsing_is_deterministic(text: str) -> None:
    assert parse(text) == parse(text)


def test_frontmatter_that_is_not_yaml_is_rejected_rather_than_ignored() -> None:
    # It may carry the ACL: ignoring it would index the document with the wrong access.
    with pytest.raises(InvalidEvent, match="frontmatter"):
        PARSER.parse("---\nacl: [group:hr\n---\n# Salaries\n")


def test_sections_follow_the_heading_hierarchy_and_ignore_fenced_headings() -> None:
    text = "intro\n# A\na\n## B\n```\n# not a heading\n```\n### C\nc\n# D\n"
    chunks = PARSER.parse(text).chunks
    assert [(c.kind.value, c.heading_path, c.parent_ordinal) for c in chunks] == [
        ("preamble", (), None),
        ("section", ("A",), None),
        ("section", ("A", "B"), 1),
        ("section", ("A", "B", "C"), 2),
        ("section", ("D",), None),
    ]
    assert "# not a heading" in chunks[2].text


def test_duplicate_headings_get_distinct_anchors() -> None:
    chunks = PARSER.parse("# Steps\n1\n# Steps\n2\n").chunks
    assert [c.anchor for c in chunks] == ["steps", "steps-1"]


def test_frontmatter_is_metadata_not_a_chunk() -> None:
    meta, start = split_frontmatter("---\nacl: [group:a]\ntitle: T\n---\n# H\n")
    assert meta == {"acl": ["group:a"], "title": "T"}
    assert start == len("---\nacl: [group:a]\ntitle: T\n---\n")
