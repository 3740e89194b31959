"""A worker process's listener: Prometheus `/metrics` and its probes.

    GET /metrics  the process's metrics (Prometheus text format)
    GET /livez    200 while the event loop answers and the workers' control loop goes round
                  (it reads pause flags every GOVINDEX_CONTROL_POLL_S; the heartbeat
                  is a task of its own); 503 when the loop has been stuck for
                  `STUCK_ROUNDS` rounds: a restart helps
    GET /readyz   200 while the servers the process's workers need answer (PostgreSQL,
                  the broker, OpenSearch), else 503 naming each one down and why

Liveness never depends on a server: a PostgreSQL outage makes every pod not ready, and
restarting them all would not bring it back. A heartbeat that cannot be written is said
in `/livez`'s body (`heartbeat_age_s`), not in its status.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import prometheus_client
import structlog
from aiohttp import web

from govindex.control.workers import Workers
from govindex.runtime.composition import Runtime

log = structlog.get_logger(__name__)

PROBE_TIMEOUT_S = 2.0
STUCK_ROUNDS = 5  # control rounds (plus a grace) without one going round: not live
_REASON_CHARS = 300


def _reason(exc: BaseException) -> str:
    said = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return (said or exc.__class__.__name__)[:_REASON_CHARS]


async def _postgres(rt: Runtime) -> None:
    async with rt.pool.connection() as conn:
        await conn.execute("SELECT 1")


async def _broker(rt: Runtime) -> None:
    """A TCP connection to one of the bootstrap servers (a metadata round trip would need
    a Kafka client per probe; the consumers report their own errors)."""
    failures = []
    for address in rt.servers.kafka_bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except (OSError, ValueError) as exc:
            failures.append(f"{address.strip()}: {_reason(exc)}")
            continue
        writer.close()
        return
    raise ConnectionError("; ".join(failures) or "no bootstrap server")


async def _opensearch(rt: Runtime) -> None:
    await rt.index.live_generation()


async def readiness(rt: Runtime, kinds: tuple[str, ...]) -> dict[str, str]:
    """What is down for these workers, and why (empty: ready)."""
    checks: dict[str, Callable[[Runtime], Awaitable[None]]] = {
        "postgres": _postgres,
        "kafka": _broker,
    }
    if {"indexer", "purger"} & set(kinds):
        checks["opensearch"] = _opensearch
    down: dict[str, str] = {}

    async def one(name: str, check: Callable[[Runtime], Awaitable[None]]) -> None:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await check(rt)
        except TimeoutError:
            down[name] = f"no answer within {PROBE_TIMEOUT_S:g} s"
        except Exception as exc:
            down[name] = _reason(exc)

    await asyncio.gather(*(one(name, check) for name, check in checks.items()))
    return dict(sorted(down.items()))


def liveness(workers: Workers, poll_s: float) -> tuple[bool, dict[str, object]]:
    now = time.monotonic()
    stuck_after = STUCK_ROUNDS * poll_s + 30.0
    round_age = now - workers.round_at
    body: dict[str, object] = {
        "ok": round_age < stuck_after,
        "workers": list(workers.run),
        "control_round_age_s": round(round_age, 1),
        "heartbeat_age_s": None if workers.beat_at is None else round(now - workers.beat_at, 1),
    }
    return bool(body["ok"]), body


class HealthServer:
    """/metrics, /livez and /readyz of one worker process, on its event loop."""

    def __init__(self, rt: Runtime, workers: Workers, host: str, port: int) -> None:
        self.rt, self.workers, self.host, self.port = rt, workers, host, port
        self.url = ""  # once started: where /metrics answers
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/livez", self._live)
        app.router.add_get("/readyz", self._ready)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        bound = self._runner.addresses[0][1] if self._runner.addresses else self.port
        host = urlsplit(f"http://{self.host}").hostname or self.host
        return f"http://{host}:{bound}/metrics"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, _: web.Request) -> web.Response:
        body = prometheus_client.generate_latest()
        return web.Response(
            body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST}
        )

    async def _live(self, _: web.Request) -> web.Response:
        ok, body = liveness(self.workers, self.rt.settings.control_poll_s)
        return web.json_response(body, status=200 if ok else 503)

    async def _ready(self, _: web.Request) -> web.Response:
        down = await readiness(self.rt, self.workers.kinds)
        if down:
            return web.json_response({"ok": False, "down": down}, status=503)
        return web.json_response({"ok": True})
