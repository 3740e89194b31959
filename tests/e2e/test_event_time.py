"""event_time on the real servers: a deployment recorded after it happened is visible at an
as_of between the event and its commit; searches filter by an event_time range; hits,
pack items and relations show it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reader.app import read_service
from reader.models import PackRequest, RelationsRequest, SearchRequest
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e


def _deploy(finished: datetime) -> str:
    return f"""---
service: payment-api
event_time: {finished.isoformat()}
---
# Deploy payment-api v2.14.0

Rolled out payment-api v2.14.0: lowered the database pool from 50 to 10.
"""


RUNBOOK = "# Payment API runbook\n\nIf payment-api answers 503, check the database pool.\n"


async def test_a_deployment_is_visible_between_its_event_and_its_commit(
    shared_pipeline: Pipeline,
) -> None:
    p = shared_pipeline
    committed = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    finished = committed - timedelta(minutes=9)  # it ran, then its record was committed
    ids = p.publish(
        p.change("deploys/v2.14.0.md", 1, _deploy(finished), observed_at=committed),
        p.change("runbooks/payment.md", 1, RUNBOOK, observed_at=committed - timedelta(days=3)),
    )
    await p.wait_processed(ids)
    await p.rt.index.refresh()
    service = read_service(p.rt)
    between = committed - timedelta(minutes=4)
    scope = {
        "tenant": p.tenant,
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "cache": "bypass",
    }
    query = "payment-api database pool 503"

    pack = await service.pack(
        PackRequest.model_validate({**scope, "query": query, "as_of": between.isoformat()})
    )
    deploys = [i for i in pack.items if i.anchor.doc_id == "deploys/v2.14.0.md"]
    assert deploys, [i.anchor.doc_id for i in pack.items]  # visible before its commit
    assert deploys[0].event_time == finished and deploys[0].valid_from == finished
    runbook = next(i for i in pack.items if i.anchor.doc_id == "runbooks/payment.md")
    assert runbook.event_time is None

    before = await service.search(
        SearchRequest.model_validate(
            {**scope, "query": query, "as_of": (finished - timedelta(minutes=1)).isoformat()}
        )
    )
    assert {h.anchor.doc_id for h in before.hits} == {"runbooks/payment.md"}  # not yet

    window = {
        "event_from": (finished - timedelta(minutes=30)).isoformat(),
        "event_to": committed.isoformat(),
    }
    for channel in ("bm25", "fulltext", "dense"):
        hits = await service.search(
            SearchRequest.model_validate(
                {**scope, "query": query, "channels": [channel], "filters": window}
            )
        )
        assert {h.anchor.doc_id for h in hits.hits} == {"deploys/v2.14.0.md"}, channel
    late = {"event_from": committed.isoformat()}
    assert (
        await service.search(
            SearchRequest.model_validate({**scope, "query": query, "filters": late})
        )
    ).hits == []

    found = await service.relations(
        RelationsRequest.model_validate(
            {
                **{k: v for k, v in scope.items() if k != "cache"},
                "entity": "service:payment-api",
                "as_of": between.isoformat(),
            }
        )
    )
    (about,) = [e for e in found.edges if e.evidence.doc_id == "deploys/v2.14.0.md"]
    assert about.event_time == finished and about.valid_from == finished
