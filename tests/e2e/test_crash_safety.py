"""Invariant 3: Postgres, then OpenSearch, then the offset — a crash in between loses nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.support.pipeline import Pipeline
from tests.support.proxy import CuttableProxy

pytestmark = pytest.mark.e2e


@pytest.fixture
async def proxy(idle_pipeline: Pipeline) -> AsyncIterator[CuttableProxy]:
    assert idle_pipeline.settings.opensearch_url
    url = urlparse(idle_pipeline.settings.opensearch_url)
    assert url.hostname and url.port
    p = CuttableProxy(url.hostname, url.port)
    await p.start()
    yield p
    await p.cut()


def _worker(p: Pipeline, opensearch_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "GOVINDEX_PG_DSN": p.settings.pg_dsn or "",
        "GOVINDEX_KAFKA_BOOTSTRAP": p.settings.kafka_bootstrap or "",
        "GOVINDEX_OPENSEARCH_URL": opensearch_url,
        "GOVINDEX_NAMESPACE": p.settings.namespace,
        "GOVINDEX_METRICS_PORT": "0",  # the default port may be another test's
    }
    return subprocess.Popen(
        [sys.executable, "-m", "govindex.cli.main", "worker", "indexer", "--log-level", "INFO"],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


async def test_indexer_killed_between_postgres_write_and_offset_commit_recovers_exactly(
    idle_pipeline: Pipeline, proxy: CuttableProxy, tmp_path: Path
) -> None:
    p = idle_pipeline  # no in-process workers: they would take the messages first
    log = tmp_path / "worker.log"
    worker = _worker(p, f"http://127.0.0.1:{proxy.port}", log)
    try:
        first = p.publish(p.change("c.md", 1, "# C\none\n"))
        await p.wait_processed(first, timeout=180)
        # Postgres commits before OpenSearch is written: cut only once the worker has had
        # OpenSearch's answer for the first event (its offset is committed), so the cut falls
        # between the sinks of the second one. Seeing the chunk in OpenSearch is not enough:
        # the answer may still be on its way back, and the worker would retry the first batch.
        await p.wait_committed(timeout=180)
        assert {d["sequence"] for d in p.os_chunks("c.md")} == {1}
        await proxy.cut()  # OpenSearch now unreachable for the worker
        second = p.publish(p.change("c.md", 2, "# C\ntwo\n## More\nthree\n"))
        await p.wait_processed(second, timeout=180)  # Postgres has it ...
        await asyncio.sleep(1.0)
        assert {d["sequence"] for d in p.os_chunks("c.md")} == {1}  # ... OpenSearch does not
        worker.send_signal(signal.SIGKILL)  # crash before the offset commit
        worker.wait(timeout=10)
    except BaseException:
        print(log.read_text())  # the worker's own account, shown with the failure
        raise
    finally:
        if worker.poll() is None:
            worker.kill()
    await p.start_workers()  # same consumer group, real OpenSearch address

    async def projected() -> set[int]:
        return {d["version_sequence"] for d in p.os_chunks("c.md") if d["superseded_at"] is None}

    for _ in range(900):  # the killed member's session must expire before the rejoin
        if await projected() == {2}:
            break
        await asyncio.sleep(0.2)
    await p.assert_sinks_agree()
    rows = await p.pg_chunks("c.md")
    assert sorted(r["version_sequence"] for r in rows) == [1, 2, 2]
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM document_versions WHERE tenant_id = %s", (p.tenant,)
        )
        assert (await cur.fetchone()) == (2,)
        cur = await conn.execute(
            "SELECT count(*) FROM outbox WHERE key LIKE %s AND topic = %s",
            (f"{p.tenant}/%", p.settings.topics.receipts),
        )
        assert (await cur.fetchone()) == (2,)  # one receipt per applied event, no duplicate
