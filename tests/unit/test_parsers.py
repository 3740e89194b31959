"""Invariant 6 for every parser: chunk text is exactly the source at its span, the spans of a
document's chunks cover it with only whitespace between them, and parsing is deterministic."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from govindex.core.errors import InvalidEvent
from govindex.core.records import ChunkKind
from indexer.parsers import PARSERS, ParsedDocument, Parser, parser_for, split_frontmatter
from indexer.parsers.base import SizePolicy
from indexer.parsers.markdown import MarkdownParser

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
    lambda rows, header: _csv([["id", "name", "note"]] * header + rows),
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


def _csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


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


RUNBOOK = """\
# Database failover

Use when the primary stops accepting writes.

## Steps

1. Freeze deploys.
2. Promote the replica:
   ```
   # not a heading
   dbctl promote
   ```
3. Confirm writes.

Afterwards, tell the channel.

## Rollback

Demote the replica.
"""


def test_runbook_sections_and_numbered_steps() -> None:
    chunks = MarkdownParser().parse(RUNBOOK).chunks
    shape = [(c.kind.value, c.parent_ordinal, c.labels) for c in chunks]
    assert shape == [
        ("section", None, ()),
        ("section", 0, ("role:steps",)),
        ("step", 1, ("step:1",)),
        ("step", 1, ("step:2",)),
        ("step", 1, ("step:3",)),
        ("paragraph", 1, ()),
        ("section", 0, ("role:rollback",)),
    ]
    assert "# not a heading" in chunks[3].text


POLICY = """\
# Access policy

## Definitions

- **Operator** means a person on the on-call rotation.

## § 4 Access

4.1 An Operator may access production.

4.1.2 Access is logged.

(a) Logs are kept for a year.

4.2 Contractors may not.
"""


def test_policy_clauses_nest_and_keep_references_to_definitions() -> None:
    chunks = MarkdownParser().parse(POLICY).chunks
    by_clause = {label: c for c in chunks for label in c.labels if label.startswith("clause:")}
    assert set(by_clause) == {"clause:4", "clause:4.1", "clause:4.1.2", "clause:(a)", "clause:4.2"}
    ordinal = {label: c.ordinal for label, c in by_clause.items()}
    assert by_clause["clause:4.1"].parent_ordinal == ordinal["clause:4"]
    assert by_clause["clause:4.1.2"].parent_ordinal == ordinal["clause:4.1"]
    assert by_clause["clause:(a)"].parent_ordinal == ordinal["clause:4.1.2"]
    assert by_clause["clause:4.2"].parent_ordinal == ordinal["clause:4"]
    assert "ref:Operator" in by_clause["clause:4.1"].labels


INCIDENT = """\
# INC-42 checkout outage

## Timeline

- 10:42 Alerts fire for checkout latency.
- 10:50 Rollback started.

## Findings

- The cache was cold after the deploy.

## Root cause

A config change disabled cache warming.

## Action items

- [ ] Add a warm-up check @ana
- [x] Revert the config @bo
"""


def test_incident_reports_cut_into_entries_findings_root_cause_and_actions() -> None:
    chunks = MarkdownParser().parse(INCIDENT).chunks
    kinds = [c.kind for c in chunks]
    assert kinds.count(ChunkKind.TIMELINE_ENTRY) == 2
    assert kinds.count(ChunkKind.FINDING) == 1
    assert kinds.count(ChunkKind.ROOT_CAUSE) == 1
    actions = [c for c in chunks if c.kind is ChunkKind.ACTION_ITEM]
    assert [a.labels for a in actions] == [
        ("status:open", "owner:ana"),
        ("status:done", "owner:bo"),
    ]
    assert next(c.labels for c in chunks if c.kind is ChunkKind.TIMELINE_ENTRY) == ("at:10:42",)


def test_markdown_tables_become_row_groups_that_carry_the_header() -> None:
    rows = "\n".join(f"| {i} | host-{i} |" for i in range(45))
    text = f"# Hosts\n\n| id | host |\n|----|------|\n{rows}\n\nAfter the table.\n"
    chunks = MarkdownParser().parse(text).chunks
    groups = [c for c in chunks if c.kind is ChunkKind.ROW_GROUP]
    assert len(groups) == 3
    assert groups[0].text.startswith("| id | host |") and groups[0].context == ""
    assert all(g.context == "| id | host |\n|----|------|\n" for g in groups[1:])
    assert groups[1].labels[0] == "key:20"
    assert chunks[-1].kind is ChunkKind.PARAGRAPH and "After the table" in chunks[-1].text


def test_csv_row_groups_repeat_the_header_and_keep_primary_keys() -> None:
    text = _csv([["id", "owner"]] + [[f"svc-{i}", f"team{i % 3}"] for i in range(60)])
    chunks = PARSERS["csv"].parse(text).chunks
    assert [c.kind for c in chunks] == [ChunkKind.ROW_GROUP] * 3
    assert chunks[1].context == "id,owner\r\n"
    assert chunks[1].labels[0] == "key:svc-25"
    headerless = _csv([["1", "2"], ["3", "4"], ["5", "6"]])
    assert PARSERS["csv"].parse(headerless).chunks[0].context == ""


PYTHON = '''\
"""Module doc."""
import os

@cache
def load(path):
    return open(path).read()


class Store:
    """A store."""

    def get(self, key):
        return key

    async def put(self, key, value):
        pass

CONSTANT = 3
'''


def test_python_is_cut_by_function_and_class_with_methods_as_children() -> None:
    chunks = PARSERS["python"].parse(PYTHON).chunks
    shape = [(c.kind.value, c.labels, c.parent_ordinal) for c in chunks]
    assert shape == [
        ("module", (), None),
        ("function", ("function:load",), None),
        ("class", ("class:Store",), None),
        ("function", ("method:get",), 2),
        ("function", ("method:put",), 2),
        ("module", (), None),
    ]
    assert chunks[1].text.startswith("@cache")
    assert (chunks[1].span.line_start, chunks[1].span.line_end) == (4, 8)


def test_code_that_does_not_parse_is_kept_and_labelled() -> None:
    chunks = PARSERS["python"].parse("def broken(:\n    pass\n\nx = 1\n").chunks
    assert chunks and all("unparsed" in c.labels for c in chunks)


def test_yaml_json_and_hcl_by_top_level_key_resource_or_block() -> None:
    yaml_chunks = PARSERS["yaml"].parse("a: 1\nb:\n  c: 2\n").chunks
    assert [c.labels for c in yaml_chunks] == [("key:a",), ("key:b",)]
    resources = (
        PARSERS["yaml"]
        .parse(
            "kind: Service\nmetadata:\n  name: api\n---\nkind: Deployment\nmetadata:\n  name: api\n"
        )
        .chunks
    )
    assert [c.labels for c in resources] == [
        ("kind:Service", "name:api"),
        ("kind:Deployment", "name:api"),
    ]
    json_chunks = PARSERS["json"].parse('{\n  "a": 1,\n  "b": {"c": [1, 2]}\n}\n').chunks
    assert [c.labels for c in json_chunks] == [("key:a",), ("key:b",)]
    hcl = PARSERS["hcl"].parse(
        'resource "aws_s3_bucket" "logs" {\n  bucket = "x"\n}\n\nvariable "region" {}\n'
    )
    assert [c.labels for c in hcl.chunks] == [
        ("block:resource", "label:aws_s3_bucket", "label:logs"),
        ("block:variable", "label:region"),
    ]


def test_a_too_large_section_is_split_at_paragraphs_never_mid_word() -> None:
    para = " ".join(["word"] * 60)
    text = "# Big\n\n" + "\n\n".join([para] * 6) + "\n"
    chunks = MarkdownParser(policy=SizePolicy(max_chars=700)).parse(text).chunks
    assert len(chunks) > 1
    assert all(c.text.rstrip().endswith("word") for c in chunks)
    first_part = next(x for x in chunks[0].labels if x.startswith("part:"))
    assert first_part == f"part:1/{len(chunks)}"
    assert all(c.parent_ordinal in (None, 0) for c in chunks)


def test_tiny_paragraphs_are_merged_and_the_merge_is_recorded() -> None:
    # The long paragraph is over the budget (split in two), so only the tiny ones merge.
    chunks = PARSERS["text"].parse("a\n\nb\n\nc\n\n" + "long " * 500).chunks
    assert chunks[0].labels == ("merged:3",) and chunks[0].text == "a\n\nb\n\nc\n\n"
    assert [c.labels for c in chunks[1:]] == [("part:1/2",), ("part:2/2",)]


def test_parser_choice_from_manifest_or_file_type() -> None:
    assert parser_for("auto", "x/y.tf").name == "hcl"
    assert parser_for("auto", "README").name == "text"
    assert parser_for("csv", "x.md").name == "csv"
    with pytest.raises(InvalidEvent, match="known parsers"):
        parser_for("docx")


def test_frontmatter_that_is_not_yaml_is_rejected_rather_than_ignored() -> None:
    with pytest.raises(InvalidEvent, match="frontmatter"):
        MarkdownParser().parse("---\nacl: [group:hr\n---\n# Salaries\n")
    meta, start = split_frontmatter("---\nacl: [group:a]\n---\n# H\n")
    assert meta == {"acl": ["group:a"]} and start == len("---\nacl: [group:a]\n---\n")
