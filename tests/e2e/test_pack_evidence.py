"""Packs carry their evidence's time, authority and omissions, and verify honestly, on the
real embedded servers: every item says when it holds, how far it is trusted, how it is
classified and where a person opens it; each version refused for time is an omission naming
the version that replaces it; a pack about a past as_of stays valid after a newer version
lands, while a pack asked as of now goes stale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest

from reader.app import ReadServer, read_service
from reader.models import ChunkView, Pack, PackRequest, SearchRequest, Subject
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

ENG = Subject(principals=["group:eng"])
TOKEN = "evidence-read-token-0123456789"
WEB_URL = "https://git.example.test/acme/handbook/blob/{revision}/{path}#L{line_start}-L{line_end}"


def _runbook(step: str) -> str:
    return f"""---
title: Orders DB recovery
---
# Orders DB recovery

When the orders-db primary stops answering, recover the replica: {step}
"""


V1, V2, V3 = (
    _runbook("restart it in place."),
    _runbook("fence the old primary, then promote the replica."),
    _runbook("fail over with the operator, then rebuild the replica."),
)
QUERY = "orders-db recover replica primary"
HR_OLD = "# Payroll recovery\n\nRecover the payroll replica; the orders-db primary is unrelated.\n"


def _pack_request(p: Pipeline, **fields: Any) -> PackRequest:
    body = {
        "tenant": p.tenant,
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "query": QUERY,
        "cache": "bypass",
        "trace": True,
        **fields,
    }
    return PackRequest.model_validate(body)


async def _three_versions(p: Pipeline, now: datetime) -> dict[int, str]:
    """The runbook valid from 90, 30 and 5 days ago (each ends the one before), and an
    HR-only document the eng subject may not see, valid only long ago; version ids by
    sequence."""
    await p.register(web_url=WEB_URL)
    for sequence, (text, days) in enumerate(((V1, 90), (V2, 30), (V3, 5)), 1):
        record = p.change(
            "runbooks/orders-db.md",
            sequence,
            text,
            observed_at=now - timedelta(days=days),
            version=f"git:{sequence:040x}",
        )
        await p.wait_processed(p.publish(record))
    hr = p.change(
        "hr/payroll.md",
        1,
        HR_OLD,
        acl=["group:hr"],
        observed_at=now - timedelta(days=400),
        valid_to=now - timedelta(days=300),
    )
    await p.wait_processed(p.publish(hr))
    await p.rt.index.refresh()
    rows = await p.pg_chunks()
    return {r["version_sequence"]: r["version_id"] for r in rows if r["doc_id"].startswith("run")}


async def test_every_item_says_when_it_holds_how_trusted_how_classified_and_where_it_lives(
    shared_pipeline: Pipeline,
) -> None:
    p, now = shared_pipeline, datetime.now(UTC)
    versions = await _three_versions(p, now)
    service = read_service(p.rt)
    as_of = now - timedelta(days=10)
    pack = await service.pack(_pack_request(p, as_of=as_of.isoformat()))
    (item, *_) = pack.items
    assert item.anchor.version_id == versions[2]
    assert item.title == "Orders DB recovery"
    assert item.trust_level == "authoritative" and item.classification == "internal"
    assert item.valid_from == item.observed_at and item.valid_from <= as_of
    assert item.valid_to is not None and as_of < item.valid_to <= now - timedelta(days=5)
    assert item.recorded_at >= item.observed_at
    anchor = item.anchor
    assert item.source_url == (
        f"https://git.example.test/acme/handbook/blob/{2:040x}/runbooks/orders-db.md"
        f"#L{anchor.line_start}-L{anchor.line_end}"
    )
    for hydrated in item.hydrated:
        assert hydrated.valid_from == item.valid_from and hydrated.trust_level == "authoritative"
        assert hydrated.source_url is not None and hydrated.title == item.title

    search = SearchRequest.model_validate(
        {
            "tenant": p.tenant,
            "subject": {"principals": ["group:eng"]},
            "purpose": "support",
            "query": QUERY,
            "as_of": as_of.isoformat(),
        }
    )
    (hit, *_) = (await service.search(search)).hits
    assert hit.anchor.version_id == versions[2] and hit.title == "Orders DB recovery"
    assert (hit.valid_from, hit.valid_to) == (item.valid_from, item.valid_to)
    assert hit.source_url is not None and f"/blob/{2:040x}/runbooks/orders-db.md#L" in (
        hit.source_url
    )


async def test_each_version_refused_for_time_is_an_omission_naming_its_replacement(
    shared_pipeline: Pipeline,
) -> None:
    p, now = shared_pipeline, datetime.now(UTC)
    versions = await _three_versions(p, now)
    hr_ids = {r["chunk_id"] for r in await p.pg_chunks() if r["doc_id"] == "hr/payroll.md"}
    pack = await read_service(p.rt).pack(
        _pack_request(p, as_of=(now - timedelta(days=10)).isoformat())
    )
    assert {i.anchor.version_id for i in pack.items} == {versions[2]}
    timed = [o for o in pack.manifest.omissions if o.stage == "time"]
    assert {o.version_id for o in timed} == {versions[1], versions[3]}
    for o in timed:
        assert o.reason.startswith("not valid at as_of (valid ")
        assert o.replacement is not None and o.replacement.version_id == versions[2]
        assert o.doc == f"{p.tenant}/{p.source}/runbooks/orders-db.md"
    traced = {t.chunk_id for t in pack.trace or [] if t.stage == "valid_time"}
    assert {o.chunk_id for o in timed} <= traced | {
        t.chunk_id for t in pack.trace or [] if t.decision == "refused"
    }
    # The HR-only version is out of time too, but refused for ACL first: never told.
    told = {o.chunk_id for o in pack.manifest.omissions} | {
        t.chunk_id for t in pack.trace or [] if t.chunk_id
    }
    assert not told & hr_ids
    assert "payroll" not in pack.model_dump_json().lower()

    # Asked about now, the newest version is the item and the two older ones are omitted,
    # each naming the one valid now.
    current = await read_service(p.rt).pack(_pack_request(p))
    assert {i.anchor.version_id for i in current.items} == {versions[3]}
    replaced = {
        o.version_id: o.replacement.version_id if o.replacement else None
        for o in current.manifest.omissions
        if o.stage == "time"
    }
    assert replaced == {versions[1]: versions[3], versions[2]: versions[3]}


async def test_a_past_pack_stays_valid_after_a_newer_version_and_a_pack_of_now_goes_stale(
    shared_pipeline: Pipeline,
) -> None:
    p, now = shared_pipeline, datetime.now(UTC)
    await _three_versions(p, now)
    service = read_service(p.rt)
    past: Pack = await service.pack(_pack_request(p, as_of=(now - timedelta(days=10)).isoformat()))
    of_now: Pack = await service.pack(_pack_request(p))
    manifest = past.manifest
    assert manifest.schema_version == 2 and manifest.pack_id and manifest.built_at is not None
    assert manifest.as_of < manifest.built_at and of_now.manifest.as_of == of_now.manifest.built_at
    assert manifest.versions is not None and manifest.versions.packer.startswith("govindex-")
    assert manifest.versions.estimator
    assert (await service.verify(manifest)).status == "valid"
    assert (await service.verify(of_now.manifest)).status == "valid"

    v4 = _runbook("page the database on-call, then follow their plan.")
    await p.wait_processed(p.publish(p.change("runbooks/orders-db.md", 4, v4)))

    assert (await service.verify(manifest)).status == "valid"  # still the version at as_of
    stale = await service.verify(of_now.manifest)
    assert stale.status == "stale"
    assert {v.reason for v in stale.pins if v.status == "stale"} == {
        "superseded by a newer version"
    }

    # A correction valid from before the past pack's as_of: its pin no longer holds then.
    fix = _runbook("fence the old primary, then promote the replica (corrected).")
    await p.wait_processed(
        p.publish(p.change("runbooks/orders-db.md", 5, fix, observed_at=now - timedelta(days=20)))
    )
    corrected = await service.verify(manifest)
    assert corrected.status == "stale"
    assert any("no longer valid at as_of" in (v.reason or "") for v in corrected.pins)

    # A deletion is still invalid, whatever the as_of.
    await p.wait_processed(p.publish(p.deletion("runbooks/orders-db.md", 6)))
    assert (await service.verify(manifest)).status == "invalid"


async def test_a_chunk_view_says_what_the_chunk_is(shared_pipeline: Pipeline) -> None:
    p, now = shared_pipeline, datetime.now(UTC)
    await _three_versions(p, now)
    item = (await read_service(p.rt).pack(_pack_request(p))).items[0]
    server = ReadServer(p.rt, {TOKEN: [p.tenant]})
    url = await server.start()
    try:
        query = {"tenant": p.tenant, "principal": "group:eng", "purpose": "support"}
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"{url}/v1/chunks/{item.anchor.chunk_id}",
                params=query,
                headers={"Authorization": f"Bearer {TOKEN}"},
            ) as resp,
        ):
            assert resp.status == 200
            view = ChunkView.model_validate_json(await resp.read())
    finally:
        await server.stop()
    assert (view.title, view.kind, view.trust_level) == (
        "Orders DB recovery",
        item.kind,
        "authoritative",
    )
    assert (view.valid_from, view.valid_to, view.source_url) == (
        item.valid_from,
        item.valid_to,
        item.source_url,
    )


DEPLOY = """---
evidence: [deployment_record]
---
# Deploy 2025-06-30: orders-db replica config

Rolled out the replica config that changed how the orders-db primary fails over.
"""


async def test_required_evidence_is_selected_first_and_what_is_missing_is_said(
    shared_pipeline: Pipeline,
) -> None:
    p, now = shared_pipeline, datetime.now(UTC)
    await _three_versions(p, now)
    record = p.change("deploys/2025-06-30.md", 1, DEPLOY, observed_at=now - timedelta(days=15))
    await p.wait_processed(p.publish(record))
    await p.rt.index.refresh()
    service = read_service(p.rt)
    as_of = (now - timedelta(days=10)).isoformat()
    # One item only: by rank alone the runbook takes it.
    plain = await service.pack(_pack_request(p, as_of=as_of, budget={"max_items": 1}))
    assert [i.anchor.doc_id for i in plain.items] == ["runbooks/orders-db.md"]
    assert plain.manifest.status == "complete" and plain.manifest.missing_evidence == []

    asked = _pack_request(
        p,
        as_of=as_of,
        budget={"max_items": 1},
        required_evidence=[{"type": "deployment_record"}, {"type": "root_cause", "min": 2}],
    )
    pack = await service.pack(asked)
    assert [i.anchor.doc_id for i in pack.items] == ["deploys/2025-06-30.md"]
    assert pack.items[0].evidence == ["deployment_record"]
    manifest = pack.manifest
    assert manifest.status == "partial"
    assert [(m.type, m.min, m.found, m.why) for m in manifest.missing_evidence] == [
        ("root_cause", 2, 0, "none_admissible")
    ]
    assert [r.type for r in manifest.required_evidence] == ["deployment_record", "root_cause"]
    assert (await service.verify(manifest)).status == "valid"
