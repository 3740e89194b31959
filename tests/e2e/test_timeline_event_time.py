"""Timeline entries on the real servers: an incident's `- 10:02` entries are stored at their
own instants (its frontmatter `date` and `timezone`), an event_time range finds the 10:02
entry and not the 11:30 one, and a reparse stamps the same times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from indexer.parsers.markdown import MarkdownParser
from indexer.reparse import reparse
from reader.app import read_service
from reader.models import SearchRequest
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

DOC = "incidents/checkout-outage.md"
INCIDENT = """---
title: Checkout outage
service: checkout-api
date: 2025-03-01
timezone: Europe/Berlin
---
# Checkout outage

Checkout answered 502 for an hour after a deploy.

## Timeline

- 10:02 deploy of checkout-api v7.3 started
- 11:30 deploy of checkout-api v7.3 rolled back
- the checkout-api deploy was reviewed later

## Findings

- The checkout-api deploy skipped the canary.
"""


async def _stamped(p: Pipeline) -> dict[str, tuple[str, datetime | None, list[str]]]:
    """Each chunk of the incident by its first line: kind, event_time and labels, as stored."""
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT text, kind, event_time, labels FROM chunks WHERE tenant_id = %s "
            "AND doc_id = %s AND superseded_at IS NULL",
            (p.tenant, DOC),
        )
        rows: list[Any] = await cur.fetchall()
    return {text.splitlines()[0]: (kind, at, list(labels)) for text, kind, at, labels in rows}


async def test_timeline_entries_are_stored_at_their_own_instants_and_filtered_by_them(
    shared_pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = shared_pipeline
    await p.wait_processed(p.publish(p.change(DOC, 1, INCIDENT)))
    await p.rt.index.refresh()
    assert len(await p.pg_chunks(DOC)) == len(MarkdownParser().parse(INCIDENT).chunks)
    stamped = await _stamped(p)
    # 1 March is winter time in Berlin (UTC+1).
    assert stamped["- 10:02 deploy of checkout-api v7.3 started"] == (
        "timeline_entry",
        datetime(2025, 3, 1, 9, 2, tzinfo=UTC),
        ["at:10:02"],
    )
    assert stamped["- 11:30 deploy of checkout-api v7.3 rolled back"][1] == datetime(
        2025, 3, 1, 10, 30, tzinfo=UTC
    )
    assert stamped["- the checkout-api deploy was reviewed later"] == (
        "timeline_entry",
        None,  # the document has no event_time of its own
        ["event_time:unresolved:no_time"],
    )
    assert {at for kind, at, _ in stamped.values() if kind != "timeline_entry"} == {None}

    service = read_service(p.rt)
    scope = {
        "tenant": p.tenant,
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "cache": "bypass",
        "query": "checkout-api deploy v7.3",
    }
    window = {"event_from": "2025-03-01T10:00:00+01:00", "event_to": "2025-03-01T10:30:00+01:00"}
    for channel in ("bm25", "fulltext"):
        hits = await service.search(
            SearchRequest.model_validate({**scope, "channels": [channel], "filters": window})
        )
        assert [h.text.splitlines()[0] for h in hits.hits] == [
            "- 10:02 deploy of checkout-api v7.3 started"
        ], channel
        assert hits.hits[0].event_time == datetime(2025, 3, 1, 9, 2, tzinfo=UTC)

    # A new parser version re-cuts the stored content: the same instants are stamped.
    monkeypatch.setattr(MarkdownParser, "version", MarkdownParser.version + "-next")
    report = await reparse(
        versions=p.rt.versions,
        chunks=p.rt.chunks,
        registry=p.rt.registry,
        index=p.rt.index,
        source_id=p.source,
        generation=1,
    )
    assert report.reparsed == [f"{p.tenant}/{p.source}/{DOC}"] and not report.failed
    assert await _stamped(p) == stamped
    await p.assert_sinks_agree(DOC)
