"""The outbox relay: publishes what handlers committed to the outbox, oldest first."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from govindex.core.envelope import KafkaRecord
from govindex.core.errors import TransientError

log = structlog.get_logger(__name__)

Relay = Callable[[Callable[[str, KafkaRecord], Awaitable[None]]], Awaitable[int]]


async def relay_forever(
    relay: Relay, publish: Callable[[str, KafkaRecord], Awaitable[None]], *, idle_s: float = 0.1
) -> None:
    """Run until cancelled; a failing broker or database is logged and retried."""
    while True:
        try:
            sent = await relay(publish)
        except TransientError as exc:
            log.warning("outbox.relay_failed", error=str(exc))
            sent = 0
        if not sent:
            await asyncio.sleep(idle_s)
