"""Files written by public projects, committed unchanged with their provenance and license
(tests/fixtures/formats/README.md): per language a real source file cut by declaration,
methods under their class, faithful spans, nothing `unparsed`, the same cut twice; and a
Jupyter notebook cut cell by cell: headings as sections, code by the Python parser under
the section before it, outputs dropped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from govindex.core.records import ChunkDraft, ChunkKind
from indexer.extractors.base import Limits
from indexer.extractors.notebook import NOTEBOOK
from indexer.extractors.regions import cut
from indexer.parsers import PARSERS, ParsedDocument, parser_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
NEWLINE = re.compile(r"\r\n|\r|\n")
DECLARED = ("module:", "class:", "function:", "method:")


def check_faithful(text: str, parsed: ParsedDocument) -> None:
    """Every chunk is the source at its span; only whitespace lies between chunks (the rule
    of test_parser_treesitter)."""
    position = parsed.body_start
    for chunk in parsed.chunks:
        start, end = chunk.span.char_start, chunk.span.char_end
        assert text[start:end] == chunk.text
        assert chunk.span.line_start == len(NEWLINE.findall(text[:start])) + 1
        assert start >= position, "overlap"
        assert text[position:start].strip() == "", f"gap holding text: {text[position:start]!r}"
        assert chunk.text.strip(), "empty chunk"
        if chunk.parent_ordinal is not None:
            assert 0 <= chunk.parent_ordinal < len(parsed.chunks)
            assert chunk.parent_ordinal != chunk.ordinal
        position = end
    assert text[position:].strip() == ""


def parent(parsed: ParsedDocument, chunk: ChunkDraft) -> ChunkDraft | None:
    return None if chunk.parent_ordinal is None else parsed.chunks[chunk.parent_ordinal]


# --- code ---------------------------------------------------------------------------------

# (fixture, parser, labels it must hold, (child, parent): every chunk labelled `child` hangs
# under a chunk labelled `parent`, top: labels whose chunks are at the top level)
CODE = [
    (
        "go-example-indenthandler4-indent_handler.go",
        "go",
        {
            "class:IndentHandler",
            "class:Options",
            "function:New",
            "function:allocBuf",
            "function:freeBuf",
            "method:Enabled",
            "method:WithGroup",
            "method:WithAttrs",
            "method:Handle",
            "method:appendAttr",
        },
        # Go's methods are declared outside their type: they are put under it.
        [
            ("method:Handle", "class:IndentHandler"),
            ("method:WithAttrs", "class:IndentHandler"),
            ("method:appendAttr", "class:IndentHandler"),
        ],
        {"class:IndentHandler", "class:Options", "function:New", "function:freeBuf"},
    ),
    (
        "rust-walkdir-dent.rs",
        "rust",
        {
            "class:DirEntry",
            "class:DirEntryExt",
            "method:path",
            "method:into_path",
            "method:metadata",
            "method:file_type",
            "method:depth",
            "method:from_path",
            "method:clone",
            "method:fmt",
            "method:ino",
        },
        # `impl DirEntry`, `impl Clone for DirEntry`, `impl DirEntryExt for DirEntry`.
        [
            ("method:path", "class:DirEntry"),
            ("method:from_path", "class:DirEntry"),
            ("method:clone", "class:DirEntry"),
            ("method:fmt", "class:DirEntry"),
            ("method:ino", "class:DirEntry"),
        ],
        {"class:DirEntry", "class:DirEntryExt"},
    ),
    (
        "java-gson-JsonObject.java",
        "java",
        {
            "class:JsonObject",
            "method:JsonObject",
            "method:deepCopy",
            "method:add",
            "method:addProperty",
            "method:remove",
            "method:getAsJsonArray",
            "method:asMap",
            "method:equals",
            "method:hashCode",
        },
        [
            ("method:JsonObject", "class:JsonObject"),
            ("method:deepCopy", "class:JsonObject"),
            ("method:addProperty", "class:JsonObject"),
            ("method:hashCode", "class:JsonObject"),
        ],
        {"class:JsonObject"},
    ),
    (
        "typescript-p-queue-priority-queue.ts",
        "typescript",
        {
            "class:PriorityQueue",
            "method:enqueue",
            "method:setPriority",
            "method:remove",
            "method:dequeue",
            "method:filter",
            "method:size",
            "method:#compact",
        },
        [
            ("method:enqueue", "class:PriorityQueue"),
            ("method:dequeue", "class:PriorityQueue"),
            ("method:#compact", "class:PriorityQueue"),
        ],
        {"class:PriorityQueue"},
    ),
    (
        "csharp-mediatr-Mediator.cs",
        "csharp",
        {
            "class:Mediator",
            "method:Mediator",
            "method:Send",
            "method:Publish",
            "method:PublishCore",
            "method:PublishNotification",
            "method:CreateStream",
        },
        [
            ("method:Mediator", "class:Mediator"),
            ("method:Send", "class:Mediator"),
            ("method:PublishNotification", "class:Mediator"),
            ("method:CreateStream", "class:Mediator"),
        ],
        {"class:Mediator"},
    ),
    (
        "ruby-sinatra-indifferent_hash.rb",
        "ruby",
        {
            "module:Sinatra",
            "class:IndifferentHash",
            "method:[]",
            "method:default=",
            "method:fetch",
            "method:key?",
            "method:merge!",
            "method:transform_keys!",
            "method:convert_key",
            "method:convert_value",
            "method:except",  # `def except … end if Gem::Version…`
        },
        [
            ("class:IndifferentHash", "module:Sinatra"),
            ("method:except", "class:IndifferentHash"),
            ("method:[]", "class:IndifferentHash"),
            ("method:merge!", "class:IndifferentHash"),
            ("method:convert_value", "class:IndifferentHash"),
        ],
        {"module:Sinatra"},
    ),
    (
        "kotlin-timber-Timber.kt",
        "kotlin",
        {
            "class:Timber",
            "class:Tree",
            "class:DebugTree",
            "class:Forest",
            "method:isLoggable",
            "method:prepareLog",
            "method:getStackTraceString",
            "method:createStackElementTag",
            "method:asTree",
            "method:plant",
            "method:uproot",
            "method:uprootAll",
        },
        # Nested classes and a named companion object, each under the outer class.
        [
            ("class:Tree", "class:Timber"),
            ("class:DebugTree", "class:Timber"),
            ("class:Forest", "class:Timber"),
            ("method:prepareLog", "class:Tree"),
            ("method:createStackElementTag", "class:DebugTree"),
            ("method:plant", "class:Forest"),
            ("method:uprootAll", "class:Forest"),
        ],
        {"class:Timber"},
    ),
    (
        "hcl-terraform-aws-s3-bucket-notification-main.tf",
        "hcl",
        {
            "block:data",
            "block:locals",
            "block:resource",
            "label:aws_s3_bucket_notification",
            "label:aws_sqs_queue_policy",
            "label:aws_iam_policy_document",
        },
        [],  # Terraform's blocks are all top-level
        {"block:resource", "block:data", "block:locals"},
    ),
]


@pytest.mark.parametrize(
    ("fixture", "name", "labels", "under", "top"), CODE, ids=[c[1] for c in CODE]
)
def test_real_source_files_are_cut_by_declaration_with_methods_under_their_class(
    fixture: str,
    name: str,
    labels: set[str],
    under: list[tuple[str, str]],
    top: set[str],
) -> None:
    path = FIXTURES / "code" / fixture
    assert parser_for("auto", str(path)).name == name
    text = path.read_bytes().decode("utf-8")  # line endings as written (Mediator.cs: CRLF)
    parsed = PARSERS[name].parse(text)
    check_faithful(text, parsed)
    found = {x for c in parsed.chunks for x in c.labels}
    assert labels <= found
    assert "unparsed" not in found
    for child, container in under:
        placed = [c for c in parsed.chunks if child in c.labels]
        assert placed, child
        for chunk in placed:
            outer = parent(parsed, chunk)
            assert outer is not None and container in outer.labels, (child, chunk.span)
    for label in top:
        assert all(c.parent_ordinal is None for c in parsed.chunks if label in c.labels), label
    for chunk in parsed.chunks:  # a declaration's name ends the path to it
        named = [x.split(":", 1)[1] for x in chunk.labels if x.startswith(DECLARED)]
        if named:
            assert chunk.heading_path[-1] == named[0]
    assert parsed == PARSERS[name].parse(text)


def test_the_csharp_file_keeps_its_crlf_line_endings_in_the_chunks() -> None:
    text = (FIXTURES / "code" / "csharp-mediatr-Mediator.cs").read_bytes().decode("utf-8")
    assert text.count("\r\n") == text.count("\n") > 100
    parsed = PARSERS["csharp"].parse(text)
    (publish_core,) = [c for c in parsed.chunks if "method:PublishCore" in c.labels]
    assert "\r\n" in publish_core.text and "\n" not in publish_core.text.replace("\r\n", "")
    assert text.splitlines()[publish_core.span.line_end - 1] in publish_core.text


# --- notebooks ----------------------------------------------------------------------------


def code_cells(data: bytes) -> list[str]:
    """The source of each non-empty code cell, as the extractor keeps it."""
    cells = json.loads(data)["cells"]
    sources = ("".join(c["source"]).strip("\r\n").rstrip() for c in cells)
    return [s for c, s in zip(cells, sources, strict=True) if c["cell_type"] == "code" and s]


def section_before(parsed: ParsedDocument, chunk: ChunkDraft) -> ChunkDraft:
    sections = [c for c in parsed.chunks[: chunk.ordinal] if c.kind is ChunkKind.SECTION]
    return sections[-1]


def test_a_real_notebook_is_its_sections_and_code_cells_without_their_outputs() -> None:
    """jupyter/notebook's "Running Code": Markdown headings, nine Python cells (one
    mostly comments, which are not headings), streamed outputs of up to 40 KB."""
    data = (FIXTURES / "notebook-jupyter-running-code.ipynb").read_bytes()
    extracted = NOTEBOOK.extract(data, Limits())
    text = extracted.text
    parsed = cut(extracted)
    check_faithful(text, parsed)
    sections = [c for c in parsed.chunks if c.kind is ChunkKind.SECTION]
    assert [s.heading_path[-1] for s in sections] == [
        "Running Code",
        "Code cells allow you to enter and run code",
        "Managing the Kernel",
        "Cell menu",
        "Restarting the kernels",
        "sys.stdout and sys.stderr",
        "Output is asynchronous",
        "Large outputs",
    ]
    assert sections[0].heading_path == ("Running Code",) and sections[0].parent_ordinal is None
    assert sections[1].heading_path == (
        "Running Code",
        "Code cells allow you to enter and run code",
    )
    assert sections[1].parent_ordinal == sections[0].ordinal
    # Every later `##` heading nests under the `#` one, code cells between them or not.
    for section in sections[1:]:
        assert section.heading_path == ("Running Code", section.heading_path[-1])
        assert section.parent_ordinal == sections[0].ordinal
    # Markdown that goes on after a code cell is the section's paragraph, on its own line.
    (after,) = [c for c in parsed.chunks if c.text.startswith("There are two other keyboard")]
    assert after.kind is ChunkKind.PARAGRAPH and after.parent_ordinal == sections[1].ordinal
    assert text.splitlines()[after.span.line_start - 1].startswith("There are two other")
    # Each code cell is one region the Python parser cuts, under the section before it.
    cells = code_cells(data)
    assert len(cells) == 9
    assert [text[r.start : r.end] for r in extracted.regions] == cells
    assert {r.parser for r in extracted.regions} == {"python"}
    code = [c for c in parsed.chunks if c.kind is ChunkKind.MODULE]
    assert [c.text for c in code] == cells
    for chunk in code:
        section = section_before(parsed, chunk)
        assert chunk.parent_ordinal == section.ordinal
        assert chunk.heading_path == section.heading_path
    assert section_before(parsed, code[-1]).heading_path[-1] == "Large outputs"
    assert "# This will crash a Linux or Mac system" in code[3].text
    # Outputs are dropped: 2**i - 1 is printed only by the last cell's run.
    for printed in (str(2**100 - 1), str(2**499 - 1)):
        assert printed.encode() in data and printed not in text
    assert "output_type" not in text and "execution_count" not in text
    assert "unparsed" not in {x for c in parsed.chunks for x in c.labels}
    again = NOTEBOOK.extract(data, Limits())
    assert again == extracted and cut(again) == parsed


def test_the_comment_above_a_ruby_class_is_the_classs_not_its_modules() -> None:
    """Sinatra documents IndifferentHash in 37 comment lines between `module Sinatra` and
    `class IndifferentHash < Hash`: they open the class's chunk."""
    text = (FIXTURES / "code" / "ruby-sinatra-indifferent_hash.rb").read_text(encoding="utf-8")
    chunks = PARSERS["ruby"].parse(text).chunks
    (module,) = [c for c in chunks if "module:Sinatra" in c.labels]
    (cls,) = [c for c in chunks if "class:IndifferentHash" in c.labels]
    assert module.text.strip() == "module Sinatra"
    assert cls.text.lstrip().startswith("#") and "class IndifferentHash < Hash" in cls.text
