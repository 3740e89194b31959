"""The healer's check on the real broker: a loss is repaired and reported until the
consumers have started again.

When the broker lost its log, the worker's consumers stop and start again (`_rejoin`). If
that fails (the broker still flapping), the topics already look whole at the next check;
the loss must be reported again all the same, or the consumers that did not start would
never run again.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from govindex.adapters.kafka import TopicKeeper
from govindex.control.healing import TopicHealer
from govindex.core.errors import TransientError

pytestmark = pytest.mark.integration


async def test_a_loss_whose_consumers_did_not_start_again_is_reported_at_the_next_check(
    stack: dict[str, str],
) -> None:
    bootstrap = stack["kafka_bootstrap"]
    topic = f"heal-{uuid.uuid4().hex[:8]}"  # missing: as after the broker lost its log
    wanted = {topic: 2}
    calls: list[list[str]] = []

    async def flapping(lost: list[str]) -> None:
        calls.append(lost)
        raise TransientError("cannot reach Kafka")

    async def started(lost: list[str]) -> None:
        calls.append(lost)

    healer, keeper = TopicHealer(bootstrap), TopicKeeper(bootstrap)
    try:
        with pytest.raises(TransientError):
            await healer.check(wanted, flapping)
        assert calls == [[topic]]
        state = (await asyncio.to_thread(keeper.states, wanted))[topic]
        assert state.topic_id is not None and state.partitions == 2, "repaired all the same"

        assert await healer.check(wanted, started) == [topic], "the loss is reported again"
        assert calls == [[topic], [topic]]
        assert await healer.check(wanted, started) == [], "and forgotten once handled"
        assert calls == [[topic], [topic]]
    finally:
        healer.close()
        keeper.close()
