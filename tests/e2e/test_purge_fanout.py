"""Deletion reaches every copy: caches, stored summaries, every index generation; verified."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.pipeline import V1, Pipeline, query, read_topic
from tests.support.proxy import CuttableProxy

pytestmark = pytest.mark.e2e


def cli(p: Pipeline, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GOVINDEX_PG_DSN": p.settings.pg_dsn or "",
        "GOVINDEX_KAFKA_BOOTSTRAP": p.settings.kafka_bootstrap or "",
        "GOVINDEX_OPENSEARCH_URL": p.settings.opensearch_url or "",
        "GOVINDEX_REDIS_URL": p.settings.redis_url or "",
        "GOVINDEX_NAMESPACE": p.settings.namespace,
    }
    return subprocess.run(
        [sys.executable, "-m", "govindex.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# Long: every kind of copy is set up, then the one purge is checked in each.
async def test_a_purge_evicts_tagged_cache_entries_and_invalidates_stored_summaries(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    other_text = "# Other\nA green switch.\n"
    await p.wait_processed(p.publish(p.change("run.md", 1, V1), p.change("keep.md", 1, other_text)))
    chunks = [r["chunk_id"] for r in await p.pg_chunks("run.md")]
    doc, other = f"{p.tenant}/{p.source}/run.md", f"{p.tenant}/{p.source}/keep.md"
    assert p.settings.redis_url
    cache = p.rt.cache
    assert cache is not None
    lineage = p.rt.lineage
    await cache.put("pack-1", "ctx with the blue lever", documents=[doc], principals=["group:eng"])
    await cache.put("pack-2", "ctx from one chunk", documents=[], chunks=chunks[:1])
    await cache.put("pack-3", "unrelated", documents=[other])
    await lineage.register_derived(
        "summary",
        "s-1",
        [doc],
        "summaries/s-1",
        tenant_id=p.tenant,
        text="The blue lever restarts it.",
    )
    await lineage.register_derived(
        "memory", "m-1", chunks[1:], "agent/m-1", tenant_id=p.tenant, text="Pull the red lever."
    )
    await lineage.register_derived(
        "summary", "s-2", [other], "summaries/s-2", tenant_id=p.tenant, text="Kept."
    )

    await p.wait_processed(p.publish(p.deletion("run.md", 2)))
    receipt = await p.wait_purged("run.md", 2)
    sinks = {s["sink"]: s for s in receipt["sinks"]}
    assert sinks["redis"]["removed"] == 2 and sinks["summaries"]["removed"] == 2
    assert all(s["verified"] and s["remaining"] == 0 for s in receipt["sinks"])
    assert await cache.get("pack-1") is None and await cache.get("pack-2") is None
    assert await cache.get("pack-3") == b"unrelated"
    summary = await lineage.get(p.tenant, "summary", "s-1")
    assert summary is not None and summary["status"] == "invalidated"
    assert summary["text"] is None and "run.md" in str(summary["reason"])
    assert (await lineage.get(p.tenant, "summary", "s-2") or {})["text"] == "Kept."
    assert p.settings.kafka_bootstrap
    for _ in range(50):
        receipts = read_topic(p.settings.kafka_bootstrap, p.settings.topics.receipts)
        invalidated = [
            json.loads(r.value)
            for r in receipts
            if dict(r.headers).get("ce_type", b"").endswith(b"invalidated.v1")
        ]
        if len(invalidated) == 2:
            break
        await asyncio.sleep(0.2)
    assert {(i["kind"], i["artifact_id"]) for i in invalidated} == {
        ("summary", "s-1"),
        ("memory", "m-1"),
    }
    assert await query(p, "blue lever") == []
    assert await query(p, "green switch") == [other_text]

    done = cli(p, "verify-purge", "--source", p.source, "--doc", "run.md")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing of the deleted content is left" in done.stdout


async def test_verify_purge_fails_when_a_copy_survives(pipeline: Pipeline) -> None:
    p = pipeline
    await p.wait_processed(p.publish(p.change("x.md", 1, V1)))
    await p.wait_processed(p.publish(p.deletion("x.md", 2)))
    await p.wait_purged("x.md", 2)
    # A copy the purge could not know about: an old generation restored from a backup.
    p.search.index(
        index=f"{p.settings.index_alias}-g0099",
        id="stray",
        refresh=True,
        body={
            "tenant_id": p.tenant,
            "source_id": p.source,
            "doc_id": "x.md",
            "version_sequence": 1,
            "text": "blue lever",
        },
    )
    done = cli(p, "verify-purge", "--source", p.source, "--doc", "x.md")
    assert done.returncode == 1
    assert "LEFT opensearch" in done.stdout


# Long: a real worker process, a cut, a failing purge, the recovery: one story.
async def test_a_sink_that_is_down_is_retried_and_the_purge_completes_when_it_returns(
    pipeline: Pipeline,
    tmp_path: Path,
) -> None:
    p = pipeline
    await p.wait_processed(p.publish(p.change("down.md", 1, V1)))
    await p.stop_workers()
    assert p.settings.opensearch_url
    host, port = p.settings.opensearch_url.removeprefix("http://").split(":")
    proxy = CuttableProxy(host, int(port))
    await proxy.start()
    env = {
        **os.environ,
        "GOVINDEX_PG_DSN": p.settings.pg_dsn or "",
        "GOVINDEX_KAFKA_BOOTSTRAP": p.settings.kafka_bootstrap or "",
        "GOVINDEX_OPENSEARCH_URL": f"http://127.0.0.1:{proxy.port}",
        "GOVINDEX_NAMESPACE": p.settings.namespace,
    }
    log = tmp_path / "workers.log"
    workers = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "govindex.cli.main",
            "worker",
            "indexer",
            "purger",
            "--log-level",
            "INFO",
        ],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        # The worker reads the live generation through the proxy at start: cut only after.
        for _ in range(600):
            if b"workers.started" in log.read_bytes() or workers.poll() is not None:
                break
            await asyncio.sleep(0.1)
        assert workers.poll() is None, log.read_text()
        await proxy.cut()  # OpenSearch goes down before the deletion arrives
        await p.wait_processed(p.publish(p.deletion("down.md", 2)), timeout=180)
        for _ in range(300):
            status = cli(p, "purge-status").stdout
            if "failing" in status:
                break
            await asyncio.sleep(0.5)
        assert "down.md" in status and "failing" in status  # pending, never reported done
        async with p.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM purge_receipts WHERE doc_id = %s", ("down.md",)
            )
            assert await cur.fetchone() == (0,)
        await proxy.start()  # OpenSearch is back
        await p.wait_purged("down.md", 2, timeout=180)
    except BaseException:
        print(log.read_text())
        raise
    finally:
        workers.terminate()
        workers.wait(timeout=30)
        await proxy.cut()
    assert p.os_chunks("down.md") == []
    assert "no pending or failed purges" in cli(p, "purge-status").stdout


async def test_a_principal_removed_from_the_acl_loses_every_version_and_its_cache_entries(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    from datetime import UTC, datetime, timedelta

    past = datetime.now(UTC) - timedelta(days=30)
    v2 = V1.replace("blue lever", "blue handle")
    await p.wait_processed(
        p.publish(
            p.change("acl.md", 1, V1, acl=["group:eng", "group:sre"], observed_at=past),
            p.change("acl.md", 2, v2, acl=["group:eng", "group:sre"]),
        )
    )
    doc = f"{p.tenant}/{p.source}/acl.md"
    assert p.settings.redis_url
    cache = p.rt.cache
    assert cache is not None
    await cache.put("for-sre", "pack", documents=[doc], principals=["group:sre"])
    await cache.put("for-eng", "pack", documents=[doc], principals=["group:eng"])
    in_history = past + timedelta(days=1)
    assert await query(p, "blue lever", principals=("group:sre",), as_of=in_history)

    # Same content, narrower ACL: a metadata-only update that revokes group:sre.
    await p.wait_processed(p.publish(p.change("acl.md", 3, v2, acl=["group:eng"])))
    for _ in range(100):
        if await cache.get("for-sre") is None:
            break
        await asyncio.sleep(0.1)
    assert await cache.get("for-sre") is None
    assert await cache.get("for-eng") == b"pack"
    assert await query(p, "blue", principals=("group:sre",)) == []
    assert await query(p, "blue lever", principals=("group:sre",), as_of=in_history) == []
    assert await query(p, "blue lever", principals=("group:eng",), as_of=in_history)
    assert all("group:sre" not in d["acl"] for d in p.os_chunks("acl.md"))
    assert all("group:sre" not in row["acl"] for row in await p.pg_chunks("acl.md"))
    await p.assert_sinks_agree()


async def test_disabling_a_source_purges_every_document_whatever_its_deletion_mode(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    source = f"hist-{p.tenant}"
    await p.register(source_id=source, deletion_mode="tombstone")
    texts = {"a.md": "# A\nalpha parsnip\n", "b.md": "# B\nbravo parsnip\n"}
    await p.wait_processed(p.publish(*(p.change(d, 1, t, source=source) for d, t in texts.items())))
    assert len(await query(p, "parsnip")) == 2
    done = cli(p, "source", "disable", source)
    assert done.returncode == 0, done.stderr
    assert "deletions emitted for 2 documents" in done.stdout
    for doc_id in texts:
        receipt = await p.wait_purged(doc_id, 2)
        assert receipt["deletion_mode"] == "tombstone_and_purge"
    assert await query(p, "parsnip") == []
    assert await p.pg_chunks() == [] and p.os_chunks() == []
    p.publish(p.change("c.md", 1, "# C\nnew parsnip\n", source=source))
    for _ in range(100):
        reasons = [dict(r.headers).get("govindex-dlq-reason") for r in p.dead_letters()]
        if b"source_disabled" in reasons:
            break
        await asyncio.sleep(0.2)
    assert b"source_disabled" in reasons


async def test_retention_purges_old_superseded_versions_and_keeps_the_current_one(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    source = f"short-{p.tenant}"
    await p.register(source_id=source, history_retention="PT1S")
    await p.wait_processed(
        p.publish(
            p.change("r.md", 1, "# R\nold turnip\n", source=source),
            p.change("r.md", 2, "# R\nnew swede\n", source=source),
        )
    )
    old_chunks = [r["chunk_id"] for r in await p.pg_chunks("r.md") if r["version_sequence"] == 1]
    lineage = p.rt.lineage
    doc = f"{p.tenant}/{source}/r.md"
    await lineage.register_derived(
        "memory", "old", old_chunks, "m/old", tenant_id=p.tenant, text="turnip"
    )
    await lineage.register_derived(
        "summary", "doc", [doc], "s/doc", tenant_id=p.tenant, text="about r"
    )
    assert p.settings.redis_url
    cache = p.rt.cache
    assert cache is not None
    await cache.put("old-pack", "turnip", documents=[], chunks=old_chunks)
    await cache.put("doc-pack", "swede", documents=[doc])
    await asyncio.sleep(1.5)
    done = cli(p, "retention", "--source", source)
    assert await cache.get("old-pack") is None  # built from the expired version
    assert await cache.get("doc-pack") == b"swede"  # about the document, still current
    assert done.returncode == 0, done.stderr
    assert "1 versions purged" in done.stdout and f"{doc}@1" in done.stdout
    assert "1 cache entries" in done.stdout
    rows = await p.pg_chunks("r.md")
    assert {r["version_sequence"] for r in rows} == {2}
    assert {d["version_sequence"] for d in p.os_chunks("r.md")} == {2}
    assert (await lineage.get(p.tenant, "memory", "old") or {})["status"] == "invalidated"
    assert (await lineage.get(p.tenant, "summary", "doc") or {})["status"] == "valid"
    assert "1 versions purged" not in cli(p, "retention", "--source", source).stdout


async def test_tombstone_mode_ends_the_document_now_keeps_history_and_drops_its_copies(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    from datetime import UTC, datetime, timedelta

    source = f"keep-{p.tenant}"
    await p.register(source_id=source, deletion_mode="tombstone")
    before = datetime.now(UTC) - timedelta(days=2)
    await p.wait_processed(
        p.publish(
            p.change("h.md", 1, "# H\nhistoric rutabaga\n", source=source, observed_at=before)
        )
    )
    doc = f"{p.tenant}/{source}/h.md"
    assert p.settings.redis_url
    cache = p.rt.cache
    assert cache is not None
    lineage = p.rt.lineage
    await cache.put("pack", "rutabaga", documents=[doc])
    await lineage.register_derived(
        "summary", "h", [doc], "s/h", tenant_id=p.tenant, text="rutabaga"
    )
    from govindex.core import events
    from govindex.core.envelope import encode_document_event
    from govindex.core.events import DocumentDeleted

    body = DocumentDeleted(
        tenant_id=p.tenant,
        source_id=source,
        doc_id="h.md",
        source_version="del2",
        sequence=2,
        deleted_at=datetime.now(UTC),
    )
    deleted = encode_document_event(events.DOCUMENT_DELETED, body, op="deleted")
    await p.wait_processed(p.publish(deleted))
    receipt = await p.wait_purged("h.md", 2)
    assert receipt["deletion_mode"] == "tombstone"
    assert await cache.get("pack") is None
    assert (await lineage.get(p.tenant, "summary", "h") or {})["text"] is None
    assert await query(p, "rutabaga") == []  # not current any more
    assert await query(p, "rutabaga", as_of=before + timedelta(days=1)) == [
        "# H\nhistoric rutabaga\n"
    ]  # history before the deletion stays
    done = cli(p, "verify-purge", "--source", source, "--doc", "h.md")
    assert done.returncode == 0, done.stdout + done.stderr
