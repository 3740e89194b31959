"""docs/design/guarantees.md#hostile-input-stays-small for YAML: aliases, depth, long numbers and
oversized fields are refused small,
with a reason, before anything is built from them (frontmatter, manifests, YAML files)."""

from __future__ import annotations

import contextlib
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import pytest

from govindex.core import yamlsafe
from govindex.core.errors import InvalidFrontmatter, ManifestError, MissingAcl
from govindex.core.events import DocumentChanged
from govindex.core.manifests import load_manifests
from govindex.core.records import SourceManifest
from indexer.frontmatter import Classification, Frontmatter
from indexer.graph import extract_edges
from indexer.parsers import PARSERS, split_frontmatter
from indexer.parsers.markdown import MarkdownParser
from indexer.stamping import resolve_access, resolve_validity
from tests.support.builders import change_payload
from tests.support.builders import manifest as source_manifest

MB = 1024 * 1024


def manifest(**overrides: Any) -> SourceManifest:
    return source_manifest("s", "t", **overrides)


def event() -> DocumentChanged:
    return change_payload("t", "s", "runbooks/a.md", 1, "# A\n")


def laughs(levels: int, last: str) -> str:
    """A billion laughs: each level lists ten aliases of the one before (×10 per level)."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*{previous}"] * 10) + "]")
        previous = f"l{level}"
    return "\n".join([*lines, f"{last}: *{previous}"]) + "\n"


BOMB = laughs(8, "classification")  # ~500 bytes; 10^9 strings once expanded


def peak_of(action: Callable[[], object]) -> int:
    """Peak Python memory allocated while `action` runs (it may raise)."""
    tracemalloc.start()
    try:
        with contextlib.suppress(Exception):  # the caller asserts on the error apart
            action()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


@pytest.fixture(params=["libyaml", "python"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both event sources the loader runs on refuse the same things."""
    if request.param == "python":
        monkeypatch.setattr(yamlsafe, "_Loader", yamlsafe._PythonLoader)
    elif not yaml_has_libyaml():
        pytest.fail("PyYAML is installed without libyaml: the fast loader is not tested")
    return str(request.param)


def yaml_has_libyaml() -> bool:
    import yaml

    return bool(yaml.__with_libyaml__)


def test_a_billion_laughs_in_frontmatter_is_refused_before_it_expands(loader: str) -> None:
    text = f"---\n{BOMB}---\n# Title\nBody.\n"
    assert len(BOMB) < 600
    with pytest.raises(InvalidFrontmatter) as caught:
        MarkdownParser().parse(text)
    error = caught.value
    assert error.reason == "invalid_frontmatter"
    assert "anchors and aliases" in str(error) and "field 'a'" in str(error)
    assert len(str(error)) < 300
    assert peak_of(lambda: split_frontmatter(text)) < MB


def test_every_alias_and_anchor_is_refused_even_a_harmless_one(loader: str) -> None:
    for text in ("base: &b {x: 1}\nother: *b\n", "a: &x 1\n", "<<: *undefined\n"):
        with pytest.raises(yamlsafe.YamlRefused, match="anchors and aliases"):
            yamlsafe.load(text)


def test_the_manifest_loader_refuses_an_alias_bomb_in_a_short_message(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(
        "source_id: s\ntenant: t\nsource_type: git\nclassification: internal\n"
        "allowed_purposes: [x]\ntrust_level: reviewed\n" + laughs(5, "owner_team")
    )
    with pytest.raises(ManifestError) as caught:
        load_manifests([path])
    message = str(caught.value)
    assert len(message) < 2000
    assert f"{path}: not valid YAML: YAML anchors and aliases" in message


def test_a_manifest_field_of_any_size_is_reported_in_a_short_message(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(f"source_id: {'x' * 200_000}\ntenant: [{', '.join(['t'] * 50_000)}]\n")
    with pytest.raises(ManifestError) as caught:
        load_manifests([path])
    message = str(caught.value)
    assert len(message) < 2000
    assert f"{path}: field 'source_id': String should match pattern" in message
    assert "(200000 chars)" in message and "a list of 50000 items" in message


def test_a_multi_document_yaml_file_with_an_alias_bomb_gets_no_huge_label(loader: str) -> None:
    text = "kind: Service\nmetadata:\n  name: api\n---\n" + laughs(8, "kind")
    parsed = PARSERS["yaml"].parse(text)
    assert "".join(c.text for c in parsed.chunks) == text  # cut as text, never dropped
    assert all(len(label) < 300 for c in parsed.chunks for label in c.labels)
    assert peak_of(lambda: PARSERS["yaml"].parse(text)) < 4 * MB


def test_resource_labels_are_short_one_line_strings_or_none_at_all() -> None:
    long_name = "n" * 300
    text = (
        "kind: Service\nmetadata:\n  name: api\n---\n"
        f"kind: Deployment\nmetadata:\n  name: {long_name}\n---\n"
        'kind: [a, b]\nmetadata:\n  name: "two\\nlines"\n'
    )
    chunks = PARSERS["yaml"].parse(text).chunks
    assert [c.labels for c in chunks] == [
        ("kind:Service", "name:api"),
        ("kind:Deployment",),
        (),
    ]


@pytest.mark.parametrize("depth", [100, 10_000, 200_000])
def test_nesting_deeper_than_the_cap_is_refused_not_recursed_into(loader: str, depth: int) -> None:
    with pytest.raises(yamlsafe.YamlRefused, match=r"nest|depth"):
        yamlsafe.load("a: " + "[" * depth + "]" * depth)
    with pytest.raises(InvalidFrontmatter):
        split_frontmatter("---\nacl: " + "[" * depth + "]" * depth + "\n---\n# H\n")


def test_nesting_within_the_cap_loads() -> None:
    depth = yamlsafe.MAX_DEPTH - 1
    value: Any = yamlsafe.load("[" * depth + "]" * depth)
    for _ in range(depth - 1):
        (value,) = value
    assert value == []


def test_more_values_than_the_budget_are_refused(loader: str) -> None:
    text = "[" + ",".join(["1"] * 200) + "]"
    assert len(yamlsafe.load(text, max_nodes=201)) == 200
    with pytest.raises(yamlsafe.YamlRefused, match="more than 200 values"):
        yamlsafe.load(text, max_nodes=200)


def test_long_numbers_and_odd_tags_are_refused_not_computed(loader: str) -> None:
    """A base-60 integer of 10,000 parts costs quadratic arithmetic; a 5,000-digit decimal
    trips Python's int limit (ValueError); `!!timestamp` on a non-date is AttributeError in
    PyYAML. All are refusals with a reason, never a crash that would be retried."""
    for value in (":".join(["1"] * 10_000), "1" * 5_000, "!!int " + "2" * 5_000):
        with pytest.raises(yamlsafe.YamlRefused, match="a number of"):
            yamlsafe.load(f"x: {value}\n")
    with pytest.raises(yamlsafe.YamlRefused, match="does not construct"):
        yamlsafe.load("x: !!timestamp nope\n")
    with pytest.raises(InvalidFrontmatter):
        split_frontmatter("---\nvalid_from: !!timestamp nope\n---\n# H\n")


def test_a_parser_error_quoting_a_huge_tag_stays_short(loader: str) -> None:
    with pytest.raises(yamlsafe.YamlRefused) as caught:
        yamlsafe.load(f"x: !<{'t' * 100_000}> v\n")
    assert len(str(caught.value)) < 500


def refused(action: Callable[[], object]) -> InvalidFrontmatter:
    with pytest.raises(InvalidFrontmatter) as caught:
        action()
    assert caught.value.reason == "invalid_frontmatter"
    assert len(str(caught.value)) < 1000
    return caught.value


def test_a_classification_outside_the_manifests_values_is_refused() -> None:
    error = refused(lambda: resolve_access(manifest(), event(), {"classification": "secret"}))
    assert "field 'classification'" in str(error) and "'restricted'" in str(error)


def test_a_validity_that_is_a_mapping_is_refused() -> None:
    error = refused(lambda: resolve_validity(manifest(), event(), {"valid_from": {"at": 1}}))
    assert "field 'valid_from'" in str(error) and "a mapping of 1 key" in str(error)
    error = refused(
        lambda: resolve_validity(manifest(), event(), {"valid_to": "2025-01-01T00:00:00"})
    )
    assert "field 'valid_to'" in str(error) and "time zone" in str(error)
    by_field = manifest(valid_time_field="effective")
    error = refused(lambda: resolve_validity(by_field, event(), {"effective": {"at": 1}}))
    assert "field 'effective'" in str(error) and "a list or a mapping" in str(error)


def test_a_label_of_ten_thousand_characters_is_refused_quoted_short() -> None:
    long_name = "x" * 10_000
    for fm in ({"owner": long_name}, {"service": ["db", long_name]}, {"title": long_name}):
        error = refused(lambda fm=fm: extract_edges("s", "runbooks/a.md", fm))  # type: ignore[misc]
        (field,) = fm
        assert f"field '{field}" in str(error) and "(10000 chars)" in str(error)


def test_an_acl_that_is_not_a_list_of_principals_is_refused() -> None:
    error = refused(lambda: resolve_access(manifest(), event(), {"acl": {"group": "eng"}}))
    assert "field 'acl'" in str(error)
    error = refused(lambda: resolve_access(manifest(), event(), {"acl": ["group:a", "a b"]}))
    assert "field 'acl[1]'" in str(error)
    error = refused(lambda: resolve_access(manifest(), event(), {"acl": ["g"] * 1000}))
    assert "at most 256 entries" in str(error)


def test_unbounded_metadata_and_field_names_are_refused() -> None:
    error = refused(lambda: Frontmatter.of({"summary": "s" * 5000}))
    assert "field 'summary': at most 1024 characters" in str(error)
    refused(lambda: Frontmatter.of({f"k{n}": n for n in range(100)}))
    refused(lambda: Frontmatter.of({"k" * 1000: 1}))


def test_accepted_frontmatter_still_stamps_graphs_and_keeps_metadata_as_before() -> None:
    text = (
        "---\ntitle: Database failover\ntype: Runbook\nservice: Orders DB\nowner: team-data\n"
        "alerts: [DbDown, 42]\nacl: group:sre\nclassification: confidential\n"
        "valid_from: 2025-03-01T00:00:00Z\nvalid_to: '2025-06-01T00:00:00+00:00'\n"
        "tags: [a, b]\nreviewed: true\nversion: 3\nsummary: |\n  Two lines\n  of text.\n"
        "---\n# Failover\nSteps.\n"
    )
    raw = MarkdownParser().parse(text).frontmatter
    fm = Frontmatter.of(raw)
    access = resolve_access(manifest(), event(), fm)
    assert (access.acl, access.classification) == (("group:sre",), "confidential")
    assert resolve_validity(manifest(), event(), fm) == (
        datetime(2025, 3, 1, tzinfo=UTC),
        datetime(2025, 6, 1, tzinfo=UTC),
    )
    assert fm.title == "Database failover"
    assert fm.metadata() == {
        "title": "Database failover",
        "type": "Runbook",
        "service": "Orders DB",
        "owner": "team-data",
        "classification": "confidential",
        "reviewed": "True",
        "version": "3",
        "summary": "Two lines\nof text.\n",
    }
    edges = {(e.subject, e.relation, e.object) for e in extract_edges("hb", "x.md", raw)}
    assert edges == {
        ("document:hb/x.md", "GOVERNS", "service:orders-db"),
        ("service:orders-db", "OWNED_BY", "team:team-data"),
        ("service:orders-db", "FIRES", "alert:dbdown"),
        ("service:orders-db", "FIRES", "alert:42"),
    }


def test_an_explicitly_empty_acl_still_fails_closed() -> None:
    empty: list[dict[str, Any]] = [{"acl": None}, {"acl": []}]
    for raw in empty:
        with pytest.raises(MissingAcl, match="empty"):
            resolve_access(manifest(default_acl=None), event(), raw)


def test_a_number_or_date_as_title_is_left_to_the_heading_as_before() -> None:
    assert Frontmatter.of({"title": 1984}).title is None
    assert Frontmatter.of({"title": 1984}).metadata() == {"title": "1984"}


def test_the_frontmatter_classifications_are_the_manifests() -> None:
    annotation = SourceManifest.model_fields["classification"].annotation
    assert get_args(Classification) == get_args(annotation)


def test_a_key_given_twice_is_refused_not_silently_last_one_wins(loader: str) -> None:
    text = '---\nacl: ["group:eng"]\ntitle: A\nacl: ["group:everyone"]\n---\n# A\n'
    with pytest.raises(InvalidFrontmatter, match="'acl' appears twice"):
        split_frontmatter(text)
    with pytest.raises(yamlsafe.YamlRefused, match="appears twice"):
        yamlsafe.load_all("kind: A\n---\nmetadata: {name: x, name: y}\n")


def test_a_parser_that_crashes_dead_letters_the_document_instead_of_retrying_it() -> None:
    """A crash is permanent (parsers are pure): retried, it would block its partition."""
    from govindex.core.errors import ParserFailed
    from indexer.parsers import parse

    class Crashing:
        name, version = "crashing", "1.0.0"

        def parse(self, text: str) -> Any:
            raise RecursionError("maximum recursion depth exceeded")

    with pytest.raises(ParserFailed, match=r"parser crashing 1\.0\.0 failed.*RecursionError"):
        parse(Crashing(), "# A\n")  # type: ignore[arg-type]
    assert ParserFailed.reason == "parser_failed"
    with pytest.raises(InvalidFrontmatter):  # permanent errors of a parser pass as they are
        parse(PARSERS["markdown"], BOMB.join(["---\n", "---\n# A\n"]))


def test_a_control_character_is_named_with_its_line_not_the_stream() -> None:
    """PyYAML names the stream `<unicode string>` and a character position; the refusal
    says the character and the line a person can go to."""
    with pytest.raises(yamlsafe.YamlRefused) as refused:
        yamlsafe.load("a: 1\nb: \x07bell\n")
    assert str(refused.value) == (
        "unacceptable #x0007 at column 4: control characters are not allowed (line 2)"
    )
    assert refused.value.line == 2
