"""Emission is durable: the broker is a transport, never the only copy, and holds nothing a
purge cannot reach."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from govindex.adapters.kafka import ensure_topics
from govindex.control.status import collect_status, render_status
from govindex.control.workers import Workers
from govindex.core.envelope import decode
from govindex.runtime.relay import RelayPolicy
from ingest.app import sync_source
from tests.support.pipeline import Pipeline, read_topic, until

pytestmark = pytest.mark.e2e


async def _pending(p: Pipeline) -> int:
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM outbox WHERE awaits IS NOT NULL AND settled_at IS NULL"
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def _last_sequence(p: Pipeline, source: str, doc_id: str) -> int:
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT last_sequence FROM documents WHERE source_id = %s AND doc_id = %s",
            (source, doc_id),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


def _readable(p: Pipeline, record: Any, blobs: dict[str, str | None]) -> str:
    """Everything a consumer can read of a record: its bytes, headers, and the content its
    claim check resolves to (looked up beforehand in `blobs`)."""
    parts = [record.value.decode(errors="replace") if record.value else ""]
    parts += [f"{k}={v.decode(errors='replace')}" for k, v in record.headers or []]
    try:
        data = decode(record.key, record.value, list(record.headers or [])).data
    except Exception:  # not a CloudEvent (a dead letter of bad bytes): its bytes are above
        return "\n".join(parts)
    ref = data.get("content_ref")
    if isinstance(ref, str):
        parts.append(blobs.get(ref) or "")
    return "\n".join(parts)


# Long: ingest, delete, purge, then every record of every topic resolved and searched.
async def test_after_a_purge_no_record_on_any_topic_reveals_the_deleted_text(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    p = pipeline
    source = f"folder-{p.tenant}"
    await p.register(source_id=source, source_type="folder")
    secret, kept = f"zebra-{uuid.uuid4().hex}", f"okapi-{uuid.uuid4().hex}"
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "secret.md").write_text(f"# Secret\n\nThe code is {secret}.\n")
    (folder / "kept.md").write_text(f"# Kept\n\nThe word is {kept}.\n")
    await sync_source(p.rt, source, folder)
    await p.wait_caught_up(source)
    (folder / "secret.md").write_text(f"# Secret\n\nThe code is {secret}, still.\n")
    await sync_source(p.rt, source, folder)  # a second version on the topic, too
    await p.wait_caught_up(source)
    (folder / "secret.md").unlink()
    await sync_source(p.rt, source, folder)
    await p.wait_caught_up(source)
    await p.wait_purged("secret.md", await _last_sequence(p, source, "secret.md"))

    assert p.settings.kafka_bootstrap
    records = [
        r
        for topic in p.settings.topics.all()
        for r in read_topic(p.settings.kafka_bootstrap, topic)
    ]
    refs = {
        json.loads(r.value).get("content_ref")
        for r in records
        if r.value and r.value.startswith(b"{")
    } - {None}
    blobs = {ref: await p.rt.blobs.blob(ref) for ref in refs}
    readable = "\n".join(_readable(p, r, blobs) for r in records)
    assert len(records) >= 8  # creates, updates, deletion, tombstone, receipts
    assert kept in readable  # the same reading finds live content: the check can fail
    assert secret not in readable
    assert await p.pg_chunks("secret.md") == [] and p.os_chunks("secret.md") == []


# Long: a running stack, its broker's log lost, and the pending events coming back.
async def test_pending_events_are_republished_when_the_broker_lost_its_log(
    idle_pipeline: Pipeline, tmp_path: Path
) -> None:
    p = idle_pipeline
    source = f"folder-{p.tenant}"
    await p.register(source_id=source, source_type="folder")
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(20):
        (folder / f"d{n}.md").write_text(f"# D{n}\n\nDocument number {n}.\n")
    rt = p.rt
    relay_only = Workers(rt, run=())  # events reach the broker; nobody applies them yet
    await relay_only.start()
    try:
        report, _ = await sync_source(rt, source, folder)
        assert len(report.created) == 20

        async def unsent() -> int:
            async with p.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT count(*) FROM outbox WHERE published_at IS NULL AND awaits IS NOT NULL"
                )
                row = await cur.fetchone()
            return int(row[0]) if row else 0

        await until(unsent, lambda n: n == 0, 30, "the relay to publish")
        assert await _pending(p) == 20  # on the broker, not applied: still pending
        status = await collect_status(p.settings)
        assert [(e["source"], e["pending"]) for e in status["pending_events"]] == [(source, 20)]
        assert "events pending   20" in render_status(status)
    finally:
        await relay_only.stop()

    # The broker loses its log: the topics are deleted and come back empty.
    assert p.settings.kafka_bootstrap
    admin = AIOKafkaAdminClient(bootstrap_servers=p.settings.kafka_bootstrap)
    await admin.start()
    try:
        deleted = await admin.delete_topics(p.settings.topics.all())
    finally:
        await admin.close()
    assert [(t, code) for t, code in deleted.topic_error_codes if code] == []
    await asyncio.sleep(1.0)
    ensure_topics(p.settings.kafka_bootstrap, p.settings.topics.all(), p.settings.partitions)
    assert read_topic(p.settings.kafka_bootstrap, p.settings.topics.documents) == []

    # The indexer joins; the relay re-publishes what no consumer applied within a second
    # (not because it restarted: re-publication at start is off here).
    p.workers = Workers(rt, relay=RelayPolicy(republish_after_s=1.0, republish_on_start=False))
    await p.workers.start()
    await p.wait_caught_up(source)
    await until(lambda: _pending(p), lambda n: n == 0, 60, "every event to settle")
    assert len(await p.active_documents(source)) == 20
    republished = read_topic(p.settings.kafka_bootstrap, p.settings.topics.documents)
    assert len(republished) >= 20
