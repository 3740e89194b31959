"""Freshness on the real servers: a sync stamps its source; a source older than its
refresh_sla has its chunks flagged stale_source in searches and packs, and the gauges the
GovindexSourceStale alert compares say so."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from govindex.adapters.postgres.inspect import PostgresGauges
from ingest.app import sync_source
from reader.app import read_service
from reader.models import PackRequest, SearchRequest
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e


async def test_a_source_past_its_refresh_sla_is_flagged_stale_in_every_answer(
    shared_pipeline: Pipeline, tmp_path: Path
) -> None:
    p = shared_pipeline
    fresh, quiet = f"fresh-{p.tenant}", f"quiet-{p.tenant}"
    for source in (fresh, quiet):
        await p.register(source_id=source, source_type="folder", refresh_sla=timedelta(hours=1))
        folder = tmp_path / source
        folder.mkdir()
        (folder / f"{source}.md").write_text(f"# {source} failover\n\nPromote the replica.\n")
        await sync_source(p.rt, source, folder)
        await p.wait_caught_up(source)
    await p.rt.index.refresh()
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT source_id, now() - last_synced_at < interval '1 minute' FROM sources "
            "WHERE tenant_id = %s AND source_id = ANY (%s) ORDER BY source_id",
            (p.tenant, [fresh, quiet]),
        )
        assert await cur.fetchall() == [(fresh, True), (quiet, True)]  # the syncs stamped them
        await conn.execute(  # the quiet source's last sync was two hours ago
            "UPDATE sources SET last_synced_at = now() - interval '2 hours' WHERE source_id = %s",
            (quiet,),
        )
    scope = {
        "tenant": p.tenant,
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "query": "failover promote replica",
        "cache": "bypass",
    }
    service = read_service(p.rt)
    hits = (await service.search(SearchRequest.model_validate(scope))).hits
    assert {h.anchor.source_id: h.stale_source for h in hits} == {fresh: False, quiet: True}
    pack = await service.pack(PackRequest.model_validate(scope))
    assert {i.anchor.source_id: i.stale_source for i in pack.items} == {fresh: False, quiet: True}

    sample = await PostgresGauges(p.rt.pool).sample()  # the gauges the alert reads
    assert sample["sources_stale"] == 1  # this module's database: these two sources
    assert sample["source_freshness_s"] >= 7200
