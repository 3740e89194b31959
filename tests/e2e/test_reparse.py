"""A parser version change: stored content is re-chunked in both stores, nothing else moves."""

from __future__ import annotations

import pytest

from indexer.parsers.markdown import MarkdownParser
from indexer.reparse import reparse
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

RUNBOOK = "# Failover\n\nIntro.\n\n## Steps\n\n1. Freeze.\n2. Promote.\n"


async def test_reparse_replaces_chunks_of_outdated_versions_and_skips_the_rest(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = pipeline
    await p.wait_processed(
        p.publish(
            p.change("old.md", 1, RUNBOOK, acl=["group:sre"]),
            p.change("new.md", 1, RUNBOOK),
            p.change("gone.md", 1, RUNBOOK),
        )
    )
    await p.wait_processed(p.publish(p.deletion("gone.md", 2)))
    await p.wait_purged("gone.md", 2)
    before = await p.pg_chunks("old.md")
    # The Markdown parser ships a new version; new.md was already cut by it (by a worker
    # running the new code), old.md was not.
    monkeypatch.setattr(MarkdownParser, "version", "2.0.1")
    async with p.pool.connection() as conn:
        await conn.execute(
            "UPDATE document_versions SET parser_version = '2.0.1' WHERE tenant_id = %s "
            "AND doc_id = 'new.md'",
            (p.tenant,),
        )
    seen: list[str] = []
    report = await reparse(
        versions=p.rt.versions,
        chunks=p.rt.chunks,
        registry=p.rt.registry,
        index=p.rt.index,
        source_id=p.source,
        generation=1,
        progress=lambda done, total, key: seen.append(key),
    )
    assert report.reparsed == [f"{p.tenant}/{p.source}/old.md"]
    assert report.unchanged == 1 and not report.failed and len(seen) == 2
    after = await p.pg_chunks("old.md")
    assert {r["chunk_id"] for r in after}.isdisjoint({r["chunk_id"] for r in before})
    assert {d["chunk_id"] for d in p.os_chunks("old.md")} == {r["chunk_id"] for r in after}
    assert {d["parser_version"] for d in p.os_chunks("old.md")} == {"2.0.1"}
    expected = [c.text for c in MarkdownParser().parse(RUNBOOK).chunks]
    assert sorted(r["text"] for r in after) == sorted(expected)
    assert all(list(r["acl"]) == ["group:sre"] and r["version_sequence"] == 1 for r in after)
    assert await p.pg_chunks("gone.md") == [] and p.os_chunks("gone.md") == []
    await p.assert_sinks_agree()
