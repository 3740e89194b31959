"""Every chunk says which evidence types it can support: the union, sorted and distinct, of
its document's frontmatter (`evidence`, `supports_claims`), the source's evidence_rules
that select it by path and kind, and its kind's own. Hostile values are refused with the
field and the rule, never lower-cased or guessed at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from govindex.core.errors import InvalidFrontmatter, ManifestError
from govindex.core.manifests import load_manifests
from govindex.core.records import ChunkKind, SourceManifest
from indexer.frontmatter import Frontmatter
from indexer.stamping import KIND_EVIDENCE, resolve_evidence
from tests.support.builders import MANIFEST_YAML, manifest, version_plan

INCIDENT = """\
# Orders outage

What happened.

## Timeline

- 10:42 paged
- 10:50 rolled back

## Steps

1. Restart the primary.
2. Check replication.

## Action items

- [ ] alert on replication lag (owner: ana)
"""


def with_frontmatter(body: str, **fields: str) -> str:
    lines = "".join(f"{name}: {value}\n" for name, value in fields.items())
    return f"---\ntitle: Orders outage\n{lines}---\n{body}"


def evidence_by_kind(m: SourceManifest, doc_id: str, text: str) -> dict[str, set[tuple[str, ...]]]:
    found: dict[str, set[tuple[str, ...]]] = {}
    for chunk in version_plan(m, doc_id, 1, text).chunks:
        found.setdefault(chunk.kind, set()).add(chunk.evidence)
    return found


def only(found: dict[str, set[tuple[str, ...]]], kind: str) -> tuple[str, ...]:
    (evidence,) = found[kind]
    return evidence


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(InvalidFrontmatter) as caught:
        Frontmatter.of(raw)
    assert caught.value.reason == "invalid_frontmatter"
    assert len(str(caught.value)) < 1000
    return str(caught.value)


def rules(*rule: dict[str, Any]) -> SourceManifest:
    return manifest("s", "t", evidence_rules=list(rule))


# --- what is stamped ----------------------------------------------------------------------


def test_a_kind_that_is_evidence_by_what_it_is_supports_its_own_type_and_nothing_else_does() -> (
    None
):
    found = evidence_by_kind(manifest("s", "t"), "incidents/orders.md", INCIDENT)
    assert only(found, "timeline_entry") == ("timeline_entry",)
    assert only(found, "step") == ("step",)
    assert only(found, "action_item") == ("action_item",)
    assert only(found, "section") == ()
    assert set(KIND_EVIDENCE) == {
        ChunkKind.TIMELINE_ENTRY,
        ChunkKind.FINDING,
        ChunkKind.ROOT_CAUSE,
        ChunkKind.ACTION_ITEM,
        ChunkKind.STEP,
        ChunkKind.CLAUSE,
    }
    assert all(KIND_EVIDENCE[kind] == kind.value for kind in KIND_EVIDENCE)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"evidence": "deployment_record"}, ("deployment_record",)),
        (
            {"evidence": "[deployment_record, change-ticket]"},
            ("change-ticket", "deployment_record"),
        ),
        ({"supports_claims": "rollback_tested"}, ("rollback_tested",)),
        ({"supports_claims": "[b2, a1]"}, ("a1", "b2")),
        (
            {"evidence": "[deployment_record, b]", "supports_claims": "[deployment_record, a]"},
            ("a", "b", "deployment_record"),
        ),
    ],
)
def test_frontmatter_evidence_and_supports_claims_apply_to_every_chunk_of_the_document(
    fields: dict[str, str], expected: tuple[str, ...]
) -> None:
    plan = version_plan(manifest("s", "t"), "d.md", 1, with_frontmatter(INCIDENT, **fields))
    assert plan.chunks
    for chunk in plan.chunks:
        own = (chunk.kind,) if ChunkKind(chunk.kind) in KIND_EVIDENCE else ()
        assert chunk.evidence == tuple(sorted({*expected, *own}))


def test_a_rule_applies_to_the_documents_its_path_selects_and_only_to_its_kinds() -> None:
    """Patterns read as `include` reads them (.gitignore): `incidents/` at any depth,
    `/postmortems/` at the root only, `!` takes a match back."""
    m = rules(
        {"path": "incidents/", "kinds": ["timeline_entry"], "evidence": ["incident_timeline"]},
        {"path": ["*.md", "!drafts/**"], "evidence": ["handbook"]},
        {"path": "deploys/**/*.md", "evidence": ["deployment_record"]},
        {"path": "/postmortems/", "kinds": ["step", "section"], "evidence": ["postmortem"]},
    )
    incident = evidence_by_kind(m, "incidents/2025/orders.md", INCIDENT)
    assert only(incident, "timeline_entry") == ("handbook", "incident_timeline", "timeline_entry")
    assert only(incident, "step") == ("handbook", "step")
    assert only(incident, "section") == ("handbook",)

    draft = evidence_by_kind(m, "drafts/incidents/orders.md", INCIDENT)
    assert only(draft, "timeline_entry") == ("incident_timeline", "timeline_entry")
    assert only(draft, "section") == ()  # `!drafts/**` took it back from `*.md`

    deploy = evidence_by_kind(m, "deploys/api/2025-03-01.md", INCIDENT)
    assert only(deploy, "section") == ("deployment_record", "handbook")
    assert only(deploy, "timeline_entry") == ("deployment_record", "handbook", "timeline_entry")

    postmortem = evidence_by_kind(m, "postmortems/orders.md", INCIDENT)
    assert only(postmortem, "step") == ("handbook", "postmortem", "step")
    assert only(postmortem, "action_item") == ("action_item", "handbook")
    nested = evidence_by_kind(m, "teams/postmortems/orders.md", INCIDENT)
    assert only(nested, "step") == ("handbook", "step")

    text = evidence_by_kind(m, "notes/orders.txt", "Orders went down.\n")
    assert only(text, "paragraph") == ()


def test_the_union_is_sorted_and_distinct_whichever_says_a_type_first() -> None:
    m = rules(
        {"path": "*", "evidence": ["step", "zeta", "alpha"]},
        {"path": "*", "kinds": ["step"], "evidence": ["alpha", "step"]},
    )
    text = with_frontmatter(INCIDENT, evidence="[zeta, step]", supports_claims="alpha")
    found = evidence_by_kind(m, "runbooks/orders.md", text)
    assert only(found, "step") == ("alpha", "step", "zeta")
    assert only(found, "section") == ("alpha", "step", "zeta")
    assert only(found, "timeline_entry") == ("alpha", "step", "timeline_entry", "zeta")


def test_resolve_evidence_computes_each_kind_once_from_the_document_and_the_rules() -> None:
    m = rules({"path": "a/", "kinds": ["finding", "clause"], "evidence": ["audit"]})
    by_kind = resolve_evidence(
        m, "a/b.md", ("x",), [ChunkKind.FINDING, ChunkKind.PARAGRAPH, ChunkKind.FINDING]
    )
    assert by_kind == {ChunkKind.FINDING: ("audit", "finding", "x"), ChunkKind.PARAGRAPH: ("x",)}
    assert resolve_evidence(m, "b/a.md", (), [ChunkKind.CLAUSE]) == {ChunkKind.CLAUSE: ("clause",)}


def test_a_metadata_only_plan_carries_the_evidence_of_todays_rules_at_the_same_ordinals() -> None:
    """update_metadata re-stamps kept chunks by ordinal: the same bytes and parser give the
    same ordinals and kinds, so only the rules can move a chunk's evidence."""
    before = version_plan(manifest("s", "t"), "incidents/a.md", 1, INCIDENT)
    m = rules({"path": "incidents/", "evidence": ["incident"]})
    after = version_plan(m, "incidents/a.md", 2, INCIDENT)
    assert [(c.ordinal, c.kind) for c in before.chunks] == [
        (c.ordinal, c.kind) for c in after.chunks
    ]
    for old, new in zip(before.chunks, after.chunks, strict=True):
        assert new.evidence == tuple(sorted({*old.evidence, "incident"}))


def test_frontmatter_evidence_is_known_not_dropped_as_an_unread_list() -> None:
    fm = Frontmatter.of({"evidence": ["a"], "supports_claims": "b", "tags": ["x"]})
    assert (fm.evidence, fm.supports_claims, fm.left_out) == (("a",), ("b",), ("tags",))
    assert fm.evidence_types() == ("a", "b")
    assert Frontmatter.of({"evidence": None}).evidence_types() == ()


# --- what is refused ----------------------------------------------------------------------


@pytest.mark.parametrize("field", ["evidence", "supports_claims"])
@pytest.mark.parametrize(
    "value",
    [
        "Deployment_Record",
        "deployment record",
        "1st_record",
        "_record",
        "déploiement",
        "record\n",
        "x" * 65,
        "",
    ],
)
def test_a_value_that_is_not_an_evidence_type_is_refused_naming_the_field_and_the_rule(
    field: str, value: str
) -> None:
    error = refused({field: ["ok", value]})
    assert f"field '{field}[1]'" in error
    assert "lower-case letter" in error or "at most 64 characters" in error


@pytest.mark.parametrize("field", ["evidence", "supports_claims"])
def test_a_nested_mapping_a_number_or_a_list_of_mappings_is_refused(field: str) -> None:
    error = refused({field: {"type": "deployment_record"}})
    assert f"field '{field}'" in error and "a string or a list of strings" in error
    assert "a mapping" in error
    error = refused({field: 42})
    assert f"field '{field}'" in error and "a string or a list of strings" in error
    error = refused({field: [{"type": "deployment_record"}]})
    assert f"field '{field}[0]'" in error


def test_more_than_sixteen_types_in_one_document_are_refused() -> None:
    error = refused({"evidence": [f"e{n}" for n in range(17)]})
    assert "field 'evidence': at most 16 entries" in error
    error = refused({"supports_claims": [f"c{n}" for n in range(10_000)]})
    assert "field 'supports_claims': at most 16 entries" in error
    error = refused(
        {"evidence": [f"e{n}" for n in range(9)], "supports_claims": [f"c{n}" for n in range(9)]}
    )
    assert "'evidence' and 'supports_claims' name 18 evidence types" in error
    assert "at most 16 per document" in error
    both = {
        "evidence": [f"e{n}" for n in range(16)],
        "supports_claims": [f"e{n}" for n in range(16)],
    }
    assert len(Frontmatter.of(both).evidence_types()) == 16  # the same sixteen, said twice


def test_a_document_with_refused_evidence_is_never_stamped() -> None:
    text = with_frontmatter(INCIDENT, evidence="Deployment Record")
    with pytest.raises(InvalidFrontmatter, match="field 'evidence"):
        version_plan(manifest("s", "t"), "d.md", 1, text)


def manifest_errors(*rule: Any) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as caught:
        rules(*rule)
    return [(".".join(map(str, e["loc"])), e["msg"]) for e in caught.value.errors()]


def test_a_rule_with_a_bad_pattern_is_refused_naming_the_rule() -> None:
    ((where, message),) = manifest_errors({"path": ["docs/", "!"], "evidence": ["a"]})
    assert where == "evidence_rules.0.path" and "Invalid git pattern: '!'" in message
    assert ".gitignore syntax" in message
    ((where, message),) = manifest_errors({"path": {"glob": "*"}, "evidence": ["a"]})
    assert where == "evidence_rules.0.path" and "a pattern or a list of patterns" in message


def test_a_rule_with_a_bad_type_or_kind_is_refused_with_a_readable_message() -> None:
    ((where, message),) = manifest_errors(
        {"path": "*", "evidence": ["a"]}, {"path": "*", "evidence": ["ok", "Deploy Record"]}
    )
    assert where == "evidence_rules.1.evidence.1"
    assert "must be an evidence type: a lower-case letter" in message
    ((where, message),) = manifest_errors({"path": "*", "kinds": ["chapter"], "evidence": ["a"]})
    assert where == "evidence_rules.0.kinds.0" and "'timeline_entry'" in message
    ((where, message),) = manifest_errors({"path": "*", "kinds": [], "evidence": ["a"]})
    assert where == "evidence_rules.0.kinds" and "leave the field out" in message
    ((where, _),) = manifest_errors({"path": "*", "evidence": []})
    assert where == "evidence_rules.0.evidence"
    ((where, _),) = manifest_errors({"path": "*", "evidence": ["a"], "types": ["b"]})
    assert where == "evidence_rules.0.types"
    errors = manifest_errors(*[{"path": "*", "evidence": ["a"]}] * 65)
    assert [where for where, _ in errors] == ["evidence_rules"]


def test_a_manifest_file_with_a_bad_rule_is_refused_naming_the_file_rule_and_field(
    tmp_path: Path,
) -> None:
    path = tmp_path / "handbook.yaml"
    path.write_text(
        f"source_id: handbook\nsource_type: git\n{MANIFEST_YAML}"
        "evidence_rules:\n  - path: deploys/\n    evidence: [Deployment_Record]\n"
    )
    with pytest.raises(ManifestError) as caught:
        load_manifests([path])
    message = str(caught.value)
    assert f"{path}: field 'evidence_rules.0.evidence.0'" in message
    assert "lower-case letter" in message and "(got 'Deployment_Record')" in message
    path.write_text(
        f"source_id: handbook\nsource_type: git\n{MANIFEST_YAML}"
        "evidence_rules:\n  - path: deploys/\n    evidence: [deployment_record]\n"
        "  - path: [incidents/, '!incidents/drafts/']\n    kinds: [timeline_entry]\n"
        "    evidence: [incident_timeline]\n"
    )
    (loaded,) = load_manifests([path])
    first, second = loaded.evidence_rules
    assert (first.path, first.kinds, first.evidence) == (["deploys/"], None, ["deployment_record"])
    assert second.path == ["incidents/", "!incidents/drafts/"]
    assert second.kinds == [ChunkKind.TIMELINE_ENTRY]
