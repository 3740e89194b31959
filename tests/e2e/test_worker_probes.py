"""A worker process's probes on the real servers: ready only while the servers its
workers need answer, naming the one that does not; live while its control loop goes
round, whatever the servers do (a restart would not bring a server back)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import aiohttp
import pytest

from govindex.control.health import HealthServer
from govindex.control.workers import Workers
from govindex.core.settings import Settings
from govindex.devstack.embedded import free_port
from govindex.runtime.composition import Runtime

pytestmark = pytest.mark.e2e


async def _get(url: str) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


async def test_ready_names_the_server_that_does_not_answer_and_live_does_not_care(
    settings: Settings,
) -> None:
    closed = free_port()  # nothing listens there: a broker that is down
    broken = settings.model_copy(update={"kafka_bootstrap": f"127.0.0.1:{closed}"})
    async with Runtime(broken, pool_size=2) as rt:
        workers = Workers(rt, run=("indexer",))
        health = HealthServer(rt, workers, "127.0.0.1", 0)
        base = (await health.start()).removesuffix("/metrics")
        try:
            status, body = await _get(base + "/readyz")
            assert status == 503 and body["ok"] is False
            down = body["down"]
            assert isinstance(down, dict) and list(down) == ["kafka"]
            assert f"127.0.0.1:{closed}" in down["kafka"]
            status, body = await _get(base + "/livez")
            assert status == 200 and body["ok"] is True  # a server down is no reason to restart

            workers.round_at = time.monotonic() - 3600  # the control loop stuck for an hour
            status, body = await _get(base + "/livez")
            assert status == 503 and body["ok"] is False
            assert isinstance(body["control_round_age_s"], float)
            assert body["control_round_age_s"] >= 3600
        finally:
            await health.stop()

    async with Runtime(settings, pool_size=2) as rt:
        health = HealthServer(rt, Workers(rt, run=("indexer",)), "127.0.0.1", 0)
        base = (await health.start()).removesuffix("/metrics")
        try:
            assert await _get(base + "/readyz") == (200, {"ok": True})
        finally:
            await health.stop()


def test_a_worker_whose_metrics_port_is_taken_exits_with_the_fix_and_runs_no_lane(
    settings: Settings,
) -> None:
    """Before, the port was bound after the lanes had started: the process went on with its
    lanes retrying batches on a closed pool, and never exited."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "govindex.cli.main", "worker", "indexer"],
            env={
                **os.environ,
                "GOVINDEX_PG_DSN": settings.pg_dsn or "",
                "GOVINDEX_KAFKA_BOOTSTRAP": settings.kafka_bootstrap or "",
                "GOVINDEX_OPENSEARCH_URL": settings.opensearch_url or "",
                "GOVINDEX_NAMESPACE": settings.namespace,
                "GOVINDEX_METRICS_HOST": "127.0.0.1",
                "GOVINDEX_METRICS_PORT": str(port),
            },
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert f"cannot serve /metrics on 127.0.0.1:{port}" in out, out
    assert "GOVINDEX_METRICS_PORT" in out
    assert "lanes.assigned" not in out and "workers.started" not in out, out
