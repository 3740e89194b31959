"""Evidence types reach both stores on the real embedded servers: a source's evidence rule
and a document's frontmatter stamp every chunk in Postgres and OpenSearch; a new version
with other frontmatter evidence, a metadata-only change under changed rules and a reparse
each leave the current chunks with the evidence they stamp now."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.parsers.markdown import MarkdownParser
from indexer.reparse import reparse
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

DOC = "deploys/api.md"
BODY = """\
# Deploy api 2025.03

Shipped the new checkout flow.

## Steps

1. Drain the blue pool.
2. Switch traffic to green.
"""
RULES = [
    {"path": "deploys/", "evidence": ["deployment_record"]},
    {"path": ["deploys/", "!deploys/drafts/"], "kinds": ["step"], "evidence": ["change_step"]},
    {"path": "incidents/", "evidence": ["incident_report"]},
]


def document(front: str) -> str:
    return f"---\ntitle: Deploy api\n{front}---\n{BODY}"


async def current(p: Pipeline, doc_id: str = DOC) -> list[dict[str, Any]]:
    """The current chunks' evidence as Postgres holds it (with what identifies them)."""
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT chunk_id, version_id, kind, evidence FROM chunks WHERE tenant_id = %s "
            "AND doc_id = %s AND superseded_at IS NULL ORDER BY ordinal",
            (p.tenant, doc_id),
        )
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in await cur.fetchall()]


def by_kind(rows: list[dict[str, Any]]) -> dict[str, set[tuple[str, ...]]]:
    found: dict[str, set[tuple[str, ...]]] = {}
    for row in rows:
        found.setdefault(row["kind"], set()).add(tuple(row["evidence"]))
    return found


async def assert_opensearch_agrees(p: Pipeline, rows: list[dict[str, Any]]) -> None:
    """OpenSearch holds the current chunks with Postgres's evidence arrays."""
    await p.rt.index.refresh()
    held = {d["chunk_id"]: d for d in p.os_chunks(DOC) if d.get("superseded_at") is None}
    assert set(held) == {r["chunk_id"] for r in rows}
    for row in rows:
        assert held[row["chunk_id"]]["evidence"] == list(row["evidence"])


async def test_rules_and_frontmatter_stamp_evidence_in_both_stores_and_changes_restamp_it(
    shared_pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = shared_pipeline
    await p.register(evidence_rules=RULES)
    v1 = document("evidence: change_ticket\n")
    await p.wait_processed(p.publish(p.change(DOC, 1, v1)))
    first = await current(p)
    assert by_kind(first) == {
        "section": {("change_ticket", "deployment_record")},
        "step": {("change_step", "change_ticket", "deployment_record", "step")},
    }
    await assert_opensearch_agrees(p, first)

    # The same body, other frontmatter evidence: the bytes differ, so a new version, whose
    # chunks carry the new types; the old version's chunks keep what they were stamped with.
    v2 = document("evidence: [rollback_tested]\nsupports_claims: [zero_downtime, step]\n")
    await p.wait_processed(p.publish(p.change(DOC, 2, v2)))
    second = await current(p)
    assert {r["version_id"] for r in second}.isdisjoint({r["version_id"] for r in first})
    assert by_kind(second) == {
        "section": {("deployment_record", "rollback_tested", "step", "zero_downtime")},
        "step": {("change_step", "deployment_record", "rollback_tested", "step", "zero_downtime")},
    }
    await assert_opensearch_agrees(p, second)
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT DISTINCT evidence FROM chunks WHERE tenant_id = %s AND doc_id = %s "
            "AND superseded_at IS NOT NULL AND kind = 'section'",
            (p.tenant, DOC),
        )
        assert [list(row[0]) for row in await cur.fetchall()] == [
            ["change_ticket", "deployment_record"]
        ]

    # The same bytes again under changed rules: a metadata-only change (the same chunks are
    # kept, re-stamped), whose evidence follows today's rules in both stores.
    await p.register(
        evidence_rules=[
            {"path": "deploys/*.md", "evidence": ["release_note"]},
            {"path": "deploys/", "kinds": ["section"], "evidence": ["deployment_record"]},
        ]
    )
    await p.wait_processed(p.publish(p.change(DOC, 3, v2)))
    third = await current(p)
    assert [r["chunk_id"] for r in third] == [r["chunk_id"] for r in second]
    assert by_kind(third) == {
        "section": {
            ("deployment_record", "release_note", "rollback_tested", "step", "zero_downtime")
        },
        "step": {("release_note", "rollback_tested", "step", "zero_downtime")},
    }
    await assert_opensearch_agrees(p, third)

    # A reparse cuts anew and stamps evidence the way a new version would.
    monkeypatch.setattr(MarkdownParser, "version", f"{MarkdownParser.version}-evidence")
    report = await reparse(
        versions=p.rt.versions,
        chunks=p.rt.chunks,
        registry=p.rt.registry,
        index=p.rt.index,
        source_id=p.source,
        generation=1,
    )
    assert report.reparsed == [f"{p.tenant}/{p.source}/{DOC}"] and not report.failed
    fourth = await current(p)
    assert {r["chunk_id"] for r in fourth}.isdisjoint({r["chunk_id"] for r in third})
    assert by_kind(fourth) == by_kind(third)
    await assert_opensearch_agrees(p, fourth)


async def test_a_document_no_rule_selects_gets_only_its_own_and_its_kinds_evidence(
    shared_pipeline: Pipeline,
) -> None:
    p = shared_pipeline
    await p.register(evidence_rules=RULES)
    await p.wait_processed(p.publish(p.change("deploys/drafts/api.md", 1, document(""))))
    rows = await current(p, "deploys/drafts/api.md")
    assert by_kind(rows) == {
        "section": {("deployment_record",)},
        "step": {("deployment_record", "step")},
    }
    await p.wait_processed(p.publish(p.change("runbooks/api.md", 1, BODY)))
    rows = await current(p, "runbooks/api.md")
    assert by_kind(rows) == {"section": {()}, "step": {("step",)}}
    await p.rt.index.refresh()
    held = {d["chunk_id"]: d["evidence"] for d in p.os_chunks("runbooks/api.md")}
    assert held == {r["chunk_id"]: list(r["evidence"]) for r in rows}
