"""The read API's probes: live while its event loop runs, ready while Postgres answers.

    GET /livez   200 {"ok": true}: answered by the event loop alone, no I/O
    GET /readyz  200 {"ok": true}, or 503 {"ok": false, "down": {"postgres": "<reason>"}}
    GET /healthz the same as /readyz

None of them takes a credential. Ready means a short read of the system of record answers
within `READY_TIMEOUT_S`: the read API fails closed without Postgres, so it is not ready
without it. OpenSearch is not checked: the read path answers without it (bm25 degraded).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from govindex.core.errors import TransientError
from govindex.core.ports import ReadStore

PROBES = frozenset({"/livez", "/readyz", "/healthz"})
READY_TIMEOUT_S = 2.0
_REASON_CHARS = 300


async def postgres_down(store: ReadStore, timeout_s: float = READY_TIMEOUT_S) -> str | None:
    """Why Postgres does not answer a short read now, or None when it does."""
    try:
        async with asyncio.timeout(timeout_s), store.snapshot() as snap:
            await snap.generation()
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except TransientError as exc:
        return str(exc)[:_REASON_CHARS]
    return None


def add_probes(app: web.Application, store: ReadStore) -> None:
    """Route /livez, /readyz and /healthz (see the module docstring)."""

    async def live(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def ready(_: web.Request) -> web.Response:
        down = await postgres_down(store)
        if down is not None:
            return web.json_response({"ok": False, "down": {"postgres": down}}, status=503)
        return web.json_response({"ok": True})

    app.router.add_get("/livez", live)
    app.router.add_get("/readyz", ready)
    app.router.add_get("/healthz", ready)
