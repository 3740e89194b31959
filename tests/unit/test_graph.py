"""Graph extraction from frontmatter is deterministic and keyed by business ids."""

from __future__ import annotations

from indexer.graph import Edge, document_kind, extract_edges


def test_runbook_governs_its_service_and_the_service_is_owned_by_the_team() -> None:
    edges = extract_edges("hb", "runbooks/db.md", {"service": "Orders DB", "owner": "team-data"})
    assert edges == [
        Edge(
            "document:hb/runbooks/db.md",
            "GOVERNS",
            "service:orders-db",
            "runbooks/db.md",
            "Orders DB",
        ),
        Edge("service:orders-db", "OWNED_BY", "team:team-data", "Orders DB", "team-data"),
    ]


def test_policies_apply_to_services_and_documents_supersede_documents() -> None:
    edges = extract_edges(
        "pol",
        "policies/access-2025.md",
        {"applies_to": ["api", "web"], "supersedes": "policies/access-2024.md"},
    )
    assert {(e.relation, e.object) for e in edges} == {
        ("APPLIES_TO", "service:api"),
        ("APPLIES_TO", "service:web"),
        ("SUPERSEDES", "document:pol/policies/access-2024.md"),
    }


def test_kind_from_frontmatter_type_or_path() -> None:
    assert document_kind("x.md", {"type": "Incident"}) == "incident"
    assert document_kind("postmortems/2025-01.md", {}) == "incident"
    assert document_kind("notes.md", {}) == "document"
    assert extract_edges("s", "notes.md", {}) == []


def test_alerts_hang_off_their_service_or_their_document() -> None:
    edges = extract_edges(
        "cat", "services/checkout.md", {"service": "checkout", "alerts": ["KubeHpaMaxedOut"]}
    )
    assert ("service:checkout", "FIRES", "alert:kubehpamaxedout") in {
        (e.subject, e.relation, e.object) for e in edges
    }
    alone = extract_edges("rb", "KubeHpaMaxedOut.md", {"alerts": "KubeHpaMaxedOut"})
    assert [(e.relation, e.object) for e in alone] == [("ABOUT", "alert:kubehpamaxedout")]


def test_depends_on_and_deployed_as_state_edges_from_the_service() -> None:
    fm = {"service": "payment-api", "depends_on": ["ledger", "Fraud Check"], "deployed_as": "d-7"}
    edges = {(e.subject, e.relation, e.object) for e in extract_edges("s", "deploys/d7.md", fm)}
    assert {
        ("service:payment-api", "DEPENDS_ON", "service:ledger"),
        ("service:payment-api", "DEPENDS_ON", "service:fraud-check"),
        ("service:payment-api", "DEPLOYED_AS", "deployment:d-7"),
    } <= edges
    alone = extract_edges("s", "notes.md", {"depends_on": "ledger"})
    assert [(e.subject, e.relation, e.object) for e in alone] == [
        ("document:s/notes.md", "DEPENDS_ON", "service:ledger")
    ]
