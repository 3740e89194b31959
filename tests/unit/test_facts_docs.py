"""The facts page's worked examples do what the page says: its manifests are accepted and
its example files state the edges the page names."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from govindex.core.manifests import load_manifests
from indexer.facts import parse_facts
from tests.unit.test_docs import DOCS, titled

PAGE = DOCS / "sources" / "facts.md"
COMMITTED = datetime(2025, 3, 1, 2, 10, tzinfo=UTC)


def _mapping(tmp_path: Path, title: str) -> object:
    path = tmp_path / title
    path.write_text(titled(PAGE, title))
    (manifest,) = load_manifests([path])
    return manifest


def test_the_catalog_example_states_the_edges_the_page_names(tmp_path: Path) -> None:
    manifest = _mapping(tmp_path, "catalog-source.yaml")
    text = titled(PAGE, "catalog-info.yaml")
    mapping = manifest.fact_mapping("svc/catalog-info.yaml")  # type: ignore[attr-defined]
    facts = parse_facts(
        mapping, "svc/catalog-info.yaml", text, document_from=COMMITTED, document_to=None
    )
    stated = {(e.subject, e.relation, e.object) for e in facts.edges}
    assert {
        ("service:payment-api", "OWNED_BY", "team:payments-core"),
        ("service:payment-api", "DEPENDS_ON", "service:ledger"),
        ("service:payment-api", "DEPENDS_ON", "service:fraud-check"),
        ("service:payment-api", "ABOUT", "system:payments"),
    } <= stated
    declared = {e.entity_id: e.aliases for e in facts.entities}
    assert declared["service:payment-api"] == ("Payment API",)
    assert "team:payments-core" not in declared  # unresolved until an entry declares it


def test_the_deployments_example_dates_each_row_by_its_finish(tmp_path: Path) -> None:
    manifest = _mapping(tmp_path, "deployments-source.yaml")
    text = titled(PAGE, "deployments.csv")
    mapping = manifest.fact_mapping("deploy/prod.csv")  # type: ignore[attr-defined]
    facts = parse_facts(mapping, "deploy/prod.csv", text, document_from=COMMITTED, document_to=None)
    first = facts.edges[0]
    assert (first.subject, first.relation, first.object) == (
        "service:payment-api",
        "DEPLOYED_AS",
        "deployment:d-1041",
    )
    assert first.event_time == first.valid_from == datetime(2025, 3, 1, 2, 1, 22, tzinfo=UTC)


def test_the_ownership_example_is_a_cdc_mapping_with_validity_fields(tmp_path: Path) -> None:
    manifest = _mapping(tmp_path, "ownership-source.yaml")
    mapping = manifest.fact_mapping("public.ownership/7")  # type: ignore[attr-defined]
    assert mapping is not None and mapping.table == "public.ownership"
    assert {"service", "team", "valid_from", "valid_to"} <= mapping.fields()
