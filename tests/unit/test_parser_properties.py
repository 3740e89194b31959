"""Invariant 6 for every parser: chunk text is exactly the source at its span, the spans of a
document's chunks cover it with only whitespace between them, and parsing is deterministic."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from govindex.core.errors import InvalidEvent
from indexer.parsers import PARSERS, ParsedDocument, Parser
from indexer.parsers.base import SizePolicy
from tests.support.builders import csv_text

NEWLINE = re.compile(r"\r\n|\r|\n")
SMALL = SizePolicy(max_chars=200, min_chars=40)  # forces splits and merges in small inputs


def check_faithful(text: str, parsed: ParsedDocument) -> None:
    position = parsed.body_start
    for chunk in parsed.chunks:
        start, end = chunk.span.char_start, chunk.span.char_end
        assert text[start:end] == chunk.text
        assert chunk.span.line_start == len(NEWLINE.findall(text[:start])) + 1
        assert chunk.span.line_end >= chunk.span.line_start
        assert start >= position, "overlap"
        assert text[position:start].strip() == "", f"gap holding text: {text[position:start]!r}"
        assert chunk.text.strip(), "empty chunk"
        if chunk.parent_ordinal is not None:
            assert 0 <= chunk.parent_ordinal < len(parsed.chunks)
            assert chunk.parent_ordinal != chunk.ordinal
        position = end
    assert text[position:].strip() == ""


def parse(parser: Parser, text: str) -> ParsedDocument:
    try:
        return parser.parse(text)
    except InvalidEvent:
        # Only Markdown refuses input: frontmatter that is not YAML (it may carry the ACL).
        assert parser.name == "markdown"
        assume(False)
        raise


newlines = st.sampled_from(["\n", "\r\n", "\r"])
words = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)

md_line = st.one_of(
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 7), words),
    st.builds(lambda n, t: f"{n}. {t}", st.integers(1, 12), words),
    st.builds(lambda t: f"- {t}", words),
    st.builds(lambda n: "## " + "heading " * n, st.integers(300, 800)),  # huge headings
    st.builds(
        lambda c, t: f"{c} {t}", st.sampled_from(["§ 4", "4.1", "4.1.2", "(a)", "(b)"]), words
    ),
    st.sampled_from(
        [
            "| id | name |",
            "|---|---|",
            "| 1 | a |",
            "| 2 | b |",
            "```",
            "~~~",
            "",
            "   ",
            "---",
            "## Steps",
            "## Timeline",
            "## Action items",
            "## Definitions",
            "- **Operator** means a person",
            "    indented",
            "- [x] done @ana",
            "10:42 paged",
            "## § 2 Scope",
            "## Ünïcödé 標題 ##",
            "Setext",
            "======",
            "> # quoted",
            "> 1. quoted step",
            "<div>",
            "</div>",
            "   1. nested",
            "      - nested bullet",
            "\t- tabbed",
            "        1. indented code",
        ]
    ),
    words,
)
markdown_docs = st.builds(
    lambda lines, nl, fm: (
        ("---" + nl + "acl: [a]" + nl + "---" + nl if fm else "") + nl.join(lines)
    ),
    st.lists(md_line, max_size=50),
    newlines,
    st.booleans(),
)
csv_docs = st.builds(
    lambda rows, header: csv_text([["id", "name", "note"]] * header + rows),
    st.lists(st.lists(st.text(max_size=12), min_size=1, max_size=4), max_size=60),
    st.booleans(),
)
py_line = st.sampled_from(
    [
        "import os",
        "X = 1",
        "def f(a):",
        "    return a",
        "class C:",
        "    y = 2",
        "    def m(self):",
        "        pass",
        "@decorator",
        "async def g():",
        "    await x",
        "",
        "# comment",
        "def broken(:",
        "    '''doc",
        "'''",
        "if True:",
        "    z = 3",
    ]
)
python_docs = st.builds(lambda ls, nl: nl.join(ls), st.lists(py_line, max_size=40), newlines)
yaml_docs = st.one_of(
    st.builds(
        lambda d: _yaml(d),
        st.dictionaries(
            st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
            st.one_of(st.integers(), st.text(max_size=10), st.lists(st.integers(), max_size=3)),
            max_size=8,
        ),
    ),
    st.builds(
        lambda n: "\n---\n".join(
            f"kind: Deployment\nmetadata:\n  name: app{i}\nspec:\n  replicas: {i}\n"
            for i in range(n)
        ),
        st.integers(1, 5),
    ),
    words,
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
json_docs = st.one_of(
    st.builds(
        lambda v, indent: json.dumps(v, indent=indent), json_values, st.sampled_from([None, 2])
    ),
    words,
)
hcl_line = st.sampled_from(
    [
        'resource "aws_s3_bucket" "logs" {',
        '  bucket = "x"',
        "}",
        'variable "region" {',
        '  default = "eu"',
        'module "vpc" {',
        '  source = "./vpc"',
        "locals {",
        "# note",
        "",
        'output "id" {',
        "  value = 1",
    ]
)
hcl_docs = st.builds(lambda ls, nl: nl.join(ls), st.lists(hcl_line, max_size=40), newlines)

GENERATORS = {
    "markdown": markdown_docs,
    "csv": csv_docs,
    "python": python_docs,
    "yaml": yaml_docs,
    "json": json_docs,
    "hcl": hcl_docs,
    "text": st.text(max_size=400),
}


def _yaml(d: dict[str, object]) -> str:
    import yaml

    return yaml.safe_dump(d, sort_keys=False)


@pytest.mark.parametrize("name", sorted(GENERATORS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_chunks_are_exact_spans_that_cover_the_document(name: str, data: st.DataObject) -> None:
    text = data.draw(st.one_of(GENERATORS[name], st.text(max_size=300)))
    check_faithful(text, parse(PARSERS[name], text))


@pytest.mark.parametrize("name", sorted(GENERATORS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_size_policy_keeps_spans_exact(name: str, data: st.DataObject) -> None:
    text = data.draw(GENERATORS[name])
    parser = type(PARSERS[name])(policy=SMALL)  # type: ignore[call-arg]
    parsed = parse(parser, text)
    check_faithful(text, parsed)
    for chunk in parsed.chunks:
        part = next((x for x in chunk.labels if x.startswith("part:")), None)
        if part and not part.startswith("part:1/"):
            assert text[chunk.span.char_start - 1].isspace(), "split mid-word"
        longest_word = max((len(w) for w in chunk.text.split()), default=0)
        assert len(chunk.text) <= SMALL.max_chars + longest_word + 2


@pytest.mark.parametrize("name", sorted(GENERATORS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_parsing_is_deterministic(name: str, data: st.DataObject) -> None:
    text = data.draw(GENERATORS[name])
    assert parse(PARSERS[name], text) == parse(PARSERS[name], text)
