"""The connectors' table of file types (core.formats) says what the indexer does: a type
sent as bytes has a binary extractor, every type the default include takes has an
extractor or a parser, and nothing else is sent as bytes."""

from __future__ import annotations

from govindex.core import formats
from govindex.core.records import FolderSettings, GitSettings
from indexer.extractors import EXTRACTORS, extractor_for
from indexer.parsers import BY_SUFFIX


def test_binary_types_are_exactly_the_binary_extractors() -> None:
    extractor_for("x.pdf")  # fills the registry
    binary = {s for e in EXTRACTORS.values() if e.binary for s in e.suffixes}
    assert binary == set(formats.BINARY)
    text = {s for e in EXTRACTORS.values() if not e.binary for s in e.suffixes}
    assert text <= set(formats.TEXT)


def test_every_default_include_type_is_extracted_or_parsed() -> None:
    for suffix in formats.TEXT:
        assert extractor_for(f"a{suffix}") is not None or suffix in BY_SUFFIX, suffix
    for suffix in formats.BINARY:
        assert extractor_for(f"a{suffix}") is not None, suffix
    default = FolderSettings(path="/srv/docs").include
    assert default == GitSettings(repository="a/b", remote_url="/srv/a").include
    assert {"*.pdf", "*.docx", "*.html", "*.go", "*.md"} <= set(default)
