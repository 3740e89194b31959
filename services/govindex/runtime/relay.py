"""The outbox relay: publishes what was committed to the outbox, and re-publishes what no
consumer has applied yet."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import structlog

from govindex.core.errors import TransientError
from govindex.core.ports import EventPublisher, Outbox

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RelayPolicy:
    """`republish_after_s`: a pending event is published again after this long (doubling);
    `republish_on_start`: every pending event is published again when the relay starts.
    An idle relay sleeps until Postgres notifies it of committed outbox rows, or `idle_s`
    at most (the maintenance round, and a poll should a notification be missed)."""

    idle_s: float = 0.5
    republish_after_s: float = 60.0
    republish_on_start: bool = True
    maintenance_every_s: float = 1.0
    prune_after_s: float = 86400.0


async def relay_forever(
    outbox: Outbox, publisher: EventPublisher, policy: RelayPolicy, stop: asyncio.Event
) -> None:
    """Run until `stop` is set; a failing broker or database is logged and retried.

    Stopped by an event, not by cancelling: a cancellation that lands inside the database
    driver can be absorbed there, and a relay that never sees it never ends.
    """
    if policy.republish_on_start:
        await _republish(outbox, None)
    maintained = 0.0
    while not stop.is_set():
        sent = 0
        try:
            sent = await outbox.relay(publisher.publish_many)
            if time.monotonic() - maintained >= policy.maintenance_every_s:
                maintained = time.monotonic()
                await outbox.settle()
                await _republish(outbox, policy.republish_after_s)
                await outbox.prune(policy.prune_after_s)
        except TransientError as exc:
            log.warning("outbox.relay_failed", error=str(exc))
        if not sent and not stop.is_set():
            await outbox.wait_for_rows(policy.idle_s)
    await outbox.close_listener()


async def _republish(outbox: Outbox, after_s: float | None) -> None:
    count = await outbox.republish(after_s)
    if count:
        log.warning(
            "outbox.republished",
            events=count,
            reason="start" if after_s is None else f"not applied within {after_s:g}s",
        )
