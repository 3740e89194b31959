"""Each parser's business structure on worked examples: runbooks, policies, incidents,
tables, code and configuration; the size policy and parser choice."""

from __future__ import annotations

import pytest

from govindex.core.errors import InvalidEvent
from govindex.core.records import ChunkKind
from indexer.parsers import PARSERS, parser_for, split_frontmatter
from indexer.parsers.base import SizePolicy
from indexer.parsers.markdown import MarkdownParser
from tests.support.builders import csv_text

SMALL = SizePolicy(max_chars=200, min_chars=40)  # forces splits and merges in small inputs

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


COMMONMARK = """\
Intro before any heading.

Setext section
==============

> # Quoted heading
> stays inside the quote

<div>
# not a heading either
</div>

    # indented code, not a heading

Sub
---

1. Build.
   1. a nested step stays in step 1
   - and so does a nested bullet
2. Ship:

       1. indented code inside a step

## Täble ✓

| key | value |
|-----|-------|
| a   | 1     |
"""


def test_block_structure_is_commonmarks() -> None:
    """Setext headings are sections; headings in quotes, HTML and indented code are not;
    nested list items stay in their step; spans are exact past non-ASCII text."""
    chunks = MarkdownParser().parse(COMMONMARK).chunks
    shape = [(c.kind.value, c.parent_ordinal, c.heading_path[-1:], c.labels) for c in chunks]
    assert shape == [
        ("preamble", None, (), ()),
        ("section", None, ("Setext section",), ()),
        ("section", 1, ("Sub",), ()),
        ("step", 2, ("Sub",), ("step:1",)),
        ("step", 2, ("Sub",), ("step:2",)),
        ("section", 1, ("Täble ✓",), ()),
        ("row_group", 5, ("Täble ✓",), ("key:a",)),
    ]
    assert "# Quoted heading" in chunks[1].text and "# not a heading" in chunks[1].text
    assert "nested bullet" in chunks[3].text and "indented code" in chunks[4].text
    for c in chunks:
        assert COMMONMARK[c.span.char_start : c.span.char_end] == c.text
    crlf = MarkdownParser().parse("# Ä\r\nè\r\n\r\n1. ü\r\n2. ö\r\n").chunks
    assert [c.text for c in crlf] == ["# Ä\r\nè\r\n\r\n", "1. ü\r\n", "2. ö\r\n"]


def test_csv_row_groups_repeat_the_header_and_keep_primary_keys() -> None:
    text = csv_text([["id", "owner"]] + [[f"svc-{i}", f"team{i % 3}"] for i in range(60)])
    chunks = PARSERS["csv"].parse(text).chunks
    assert [c.kind for c in chunks] == [ChunkKind.ROW_GROUP] * 3
    assert chunks[1].context == "id,owner\r\n"
    assert chunks[1].labels[0] == "key:svc-25"
    headerless = csv_text([["1", "2"], ["3", "4"], ["5", "6"]])
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


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_input_nested_thousands_deep_is_chunked_not_a_crash(name: str) -> None:
    """Python's JSON and YAML loaders recurse: a hostile file must not become an event that
    fails (and is retried) forever. It falls back to plain paragraphs, covered whole."""
    text = "a: " + "[" * 5000 + "]" * 5000 + "\n"
    parsed = PARSERS[name].parse(text)
    assert parsed.chunks
    assert "".join(c.text for c in parsed.chunks).replace("\n", "") == text.replace("\n", "")
