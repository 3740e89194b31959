"""Packs kept under an Idempotency-Key, on the real embedded servers through the HTTP API:
a retry gets the same pack id and bytes without retrieving again, another body under the
key is 409; the pack, its audit record and its `pack.built` event are written together; a
kept pack is served by id re-judged now, withholding a deleted pin (410 when nothing is
left); its items are lineage artifacts, so the purge of a deletion removes their text and
says so; retention expires it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from govindex.core import events
from govindex_client import AsyncGovindexClient, Conflict, Gone, NotFound
from reader.app import ReadServer
from reader.models import Pack, StoredPack
from tests.support.pipeline import Pipeline, read_topic

pytestmark = pytest.mark.e2e

TOKEN = "kept-packs-token-0123456789"
QUERY = "orders-db failover replica promote"
ORDERS = "# Orders DB failover\n\nPromote the replica when the orders-db primary fails over.\n"
LEDGER = "# Ledger DB failover\n\nPromote the ledger replica; orders-db failover comes first.\n"


@pytest.fixture
async def api(shared_pipeline: Pipeline) -> AsyncIterator[tuple[Pipeline, str]]:
    p = shared_pipeline
    ids = p.publish(p.change("orders.md", 1, ORDERS), p.change("ledger.md", 1, LEDGER))
    await p.wait_processed(ids)
    await p.rt.index.refresh()
    server = ReadServer(p.rt, {TOKEN: [p.tenant]})
    url = await server.start()
    yield p, url
    await server.stop()


def _body(p: Pipeline, **fields: Any) -> dict[str, Any]:
    return {
        "tenant": p.tenant,
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "query": QUERY,
        "hydration": {"neighbours": 0, "parent": False},
        **fields,
    }


async def _post(url: str, body: dict[str, Any], key: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": key}
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        return await http.post("/v1/packs", json=body, headers=headers)


def _cli(p: Pipeline, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A CLI command on this test's servers (GOVINDEX_* settings, an empty state dir)."""
    s = p.settings
    env = {
        **os.environ,
        "GOVINDEX_PG_DSN": s.pg_dsn,
        "GOVINDEX_KAFKA_BOOTSTRAP": s.kafka_bootstrap,
        "GOVINDEX_OPENSEARCH_URL": s.opensearch_url,
        "GOVINDEX_REDIS_URL": s.redis_url or "",
        "GOVINDEX_NAMESPACE": s.namespace,
    }
    command = [sys.executable, "-m", "govindex.cli.main", *args, "--state-dir", str(state)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


def _client(p: Pipeline, url: str, principals: list[str] | None = None) -> AsyncGovindexClient:
    return AsyncGovindexClient(
        url, TOKEN, tenant=p.tenant, purpose="support", principals=principals or ["group:eng"]
    )


async def test_a_retry_gets_the_same_pack_and_another_body_under_the_key_is_409(
    api: tuple[Pipeline, str],
) -> None:
    p, url = api
    key = f"retry-{uuid.uuid4()}"
    first = await _post(url, _body(p), key)
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    pack = Pack.model_validate_json(first.content)
    assert pack.items and pack.manifest.pack_id

    # A new version lands: a fresh retrieval would pin it; the retry does not retrieve.
    newer = ORDERS + "\nFence the old primary first.\n"
    await p.wait_processed(p.publish(p.change("orders.md", 2, newer)))
    again = await _post(url, _body(p), key)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content  # the same pack id and bytes

    async with _client(p, url) as client:
        with pytest.raises(Conflict) as refused:
            await client.pack(QUERY, idempotency_key=key, budget={"max_items": 1})
        assert refused.value.status == 409 and "another request" in str(refused.value)
        fresh = await client.pack(QUERY, idempotency_key=f"other-{uuid.uuid4()}")
    assert fresh.manifest.pack_id != pack.manifest.pack_id

    # Kept with its audit record (one transaction) and its pack.built event.
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM read_audit WHERE tenant = %s AND pack_hash = %s",
            (p.tenant, pack.manifest.pack_hash),
        )
        (audited,) = await cur.fetchone() or (0,)
    assert audited == 2  # the build and its replay
    deadline = time.monotonic() + 30
    built: list[dict[str, Any]] = []
    while not built and time.monotonic() < deadline:
        built = [
            json.loads(r.value)
            for r in read_topic(p.settings.kafka_bootstrap, p.settings.topics.receipts)
            if dict(r.headers).get("ce_type") == events.PACK_BUILT.encode()
            and json.loads(r.value)["pack_id"] == pack.manifest.pack_id
        ]
        await asyncio.sleep(0.3)
    assert len(built) == 1 and built[0]["pack_hash"] == pack.manifest.pack_hash
    assert built[0]["documents"] == sorted(
        {f"{p.tenant}/{p.source}/{i.anchor.doc_id}" for i in pack.items}
    )
    assert "Promote" not in json.dumps(built[0])  # ids and hashes, never text


async def test_a_kept_pack_withholds_a_deleted_pin_and_the_purge_removes_its_text(
    api: tuple[Pipeline, str], tmp_path: Path
) -> None:
    p, url = api
    key = f"kept-{uuid.uuid4()}"
    async with _client(p, url) as client:
        pack = await client.pack(QUERY, idempotency_key=key, hydration={"neighbours": 0})
        docs = {i.anchor.doc_id: i.key for i in pack.items}
        assert set(docs) == {"orders.md", "ledger.md"}
        assert pack.manifest.pack_id is not None
        pack_id = pack.manifest.pack_id
        whole = await client.stored_pack(pack_id)
        assert whole.status == "valid" and whole.withheld == []
        assert whole.pack.model_dump_json() == pack.model_dump_json()

        # Another subject (one the pack was not built for) learns nothing of it.
        async with _client(p, url, ["group:hr"]) as stranger:
            with pytest.raises(NotFound):
                await stranger.stored_pack(pack_id)

        p.publish(p.deletion("orders.md", 3), topic=p.settings.topics.deletions)
        receipt = await p.wait_purged("orders.md", 3)
        summaries = next(s for s in receipt["sinks"] if s["sink"] == "summaries")
        assert summaries["removed"] >= 1 and summaries["remaining"] == 0, receipt
        async with p.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT artifact_id, text IS NULL, status FROM derived_artifacts WHERE "
                "tenant_id = %s AND kind = 'pack' ORDER BY artifact_id",
                (p.tenant,),
            )
            rows = {a: (purged, status) for a, purged, status in await cur.fetchall()}
        assert rows[f"{pack_id}:{docs['orders.md']}"] == (True, "invalidated")
        assert rows[f"{pack_id}:{docs['ledger.md']}"] == (False, "valid")

        kept: StoredPack = await client.stored_pack(pack_id)
        assert kept.status == "partial"
        assert [i.anchor.doc_id for i in kept.pack.items] == ["ledger.md"]
        assert [(w.key, w.chunk_id) for w in kept.withheld] == [
            (
                docs["orders.md"],
                next(i.anchor.chunk_id for i in pack.items if i.key == docs["orders.md"]),
            )
        ]
        assert "deleted" in kept.withheld[0].reason
        assert "Promote the replica when" not in kept.model_dump_json()
        shown = _cli(p, tmp_path, "packs", "show", pack_id, "--tenant", p.tenant)
        assert shown.returncode == 2, shown.stderr  # some items withheld
        assert f"{docs['orders.md']} " in shown.stdout and "withheld" in shown.stdout
        assert "Promote" not in shown.stdout  # without --json: no text

        p.publish(p.deletion("ledger.md", 2), topic=p.settings.topics.deletions)
        await p.wait_purged("ledger.md", 2)
        with pytest.raises(Gone):
            await client.stored_pack(pack_id)
        with pytest.raises(Gone):  # the retry too: nothing of it may be served
            await client.pack(QUERY, idempotency_key=key, hydration={"neighbours": 0})


async def test_retention_expires_a_kept_pack_and_its_text(api: tuple[Pipeline, str]) -> None:
    p, url = api
    async with _client(p, url) as client:
        pack = await client.pack(QUERY, idempotency_key=f"old-{uuid.uuid4()}")
        pack_id = pack.manifest.pack_id
        assert pack_id is not None
        async with p.pool.connection() as conn:
            await conn.execute(
                "UPDATE stored_packs SET expires_at = now() - interval '1 second' "
                "WHERE pack_id = %s",
                (pack_id,),
            )
        with pytest.raises(NotFound):  # expired: no longer served, even before the sweep
            await client.stored_pack(pack_id)
        assert await p.rt.packs.expire() >= 1
        async with p.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT (SELECT count(*) FROM stored_packs WHERE pack_id = %s), "
                " (SELECT count(*) FROM derived_artifacts WHERE kind = 'pack' AND "
                "  artifact_id LIKE %s)",
                (pack_id, f"{pack_id}:%"),
            )
            assert await cur.fetchone() == (0, 0)
