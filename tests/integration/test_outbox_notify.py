"""The outbox relay sleeps on LISTEN/NOTIFY: a committed outbox row wakes it at once."""

from __future__ import annotations

import asyncio
import time

import pytest

from govindex.core.envelope import KafkaRecord
from govindex.core.ports import OutboxMessage
from govindex.runtime.composition import Runtime

pytestmark = pytest.mark.integration


async def test_a_committed_outbox_row_wakes_the_relay(runtime: Runtime) -> None:
    outbox = runtime.outbox
    try:
        assert await outbox.wait_for_rows(0.05) is False  # listening; nothing to say
        waiter = asyncio.create_task(outbox.wait_for_rows(30.0))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        async with runtime.chunks.transaction() as tx:
            await tx.enqueue([OutboxMessage("t.notify", KafkaRecord(b"k", b"v", []))])
        assert await waiter is True  # woken by the commit, not by the 30 s timeout
        assert time.monotonic() - started < 30
    finally:
        await outbox.close_listener()
