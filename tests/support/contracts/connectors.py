"""Contracts of what connectors use: their state, webhook deliveries, the publisher."""

from __future__ import annotations

import asyncio
from typing import Any

from govindex.core.envelope import KafkaRecord
from govindex.core.ports import CdcLedger, ConnectorState, Deliveries, EventPublisher
from tests.support.builders import unique


class ConnectorStateContract:
    """ConnectorState and CdcLedger: sequences only grow, fingerprints follow the record.

    Needs the fixture `state`: it is also the Emitter whose transactions write it.
    """

    async def test_sequences_strictly_increase_and_can_be_raised(self, state: Any) -> None:
        memory: ConnectorState = state
        tenant, source = unique("t"), unique("s")
        async with state.transaction() as tx:
            first = await tx.reserve_sequences(tenant, source, ["a", "b"])
        async with state.transaction() as tx:
            second = await tx.reserve_sequences(tenant, source, ["a"])
        assert first == {"a": 1, "b": 1} and second == {"a": 2}
        await memory.raise_sequences(tenant, source, {"a": 40, "b": 0})
        async with state.transaction() as tx:
            assert await tx.reserve_sequences(tenant, source, ["a", "b"]) == {"a": 41, "b": 2}

    async def test_known_follows_what_was_recorded_and_forgotten(self, state: Any) -> None:
        memory: ConnectorState = state
        tenant, source = unique("t"), unique("s")
        async with state.transaction() as tx:
            await tx.reserve_sequences(tenant, source, ["a", "b"])
            await tx.record(tenant, source, {"a": "fp-a", "b": "fp-b"})
        assert await memory.known(tenant, source) == {"a": "fp-a", "b": "fp-b"}
        async with state.transaction() as tx:
            await tx.record(tenant, source, {"b": None})
        await memory.forget(tenant, source, ["a"])
        assert await memory.known(tenant, source) == {"a": ""}
        await memory.assume_present(tenant, source, ["z"])
        assert "z" in await memory.known(tenant, source)

    async def test_cdc_positions_never_move_back(self, state: Any) -> None:
        ledger: CdcLedger = state
        tenant, source = unique("t"), unique("s")
        assert await ledger.ledger(tenant, source, "t/1") == (0, False)
        async with state.transaction() as tx:
            await tx.record_position(tenant, source, "t/1", 200, deleted=False)
        async with state.transaction() as tx:
            await tx.record_position(tenant, source, "t/1", 100, deleted=True)  # late, older
        assert await ledger.ledger(tenant, source, "t/1") == (200, False)
        async with state.transaction() as tx:
            await tx.record_position(tenant, source, "t/2", 300, deleted=False)
        async with state.transaction() as tx:
            await tx.record_position(tenant, source, "t/1", 400, deleted=True)
        assert await ledger.live_documents(tenant, source, "t/") == ["t/2"]

    async def test_a_truncate_mark_only_moves_forward(self, state: Any) -> None:
        ledger: CdcLedger = state
        tenant, source = unique("t"), unique("s")
        assert await ledger.truncated_at(tenant, source) == 0
        async with state.transaction() as tx:
            await tx.record_truncate(tenant, source, 500)
        async with state.transaction() as tx:
            await tx.record_truncate(tenant, source, 300)  # an older truncate, late
        assert await ledger.truncated_at(tenant, source) == 500
        async with state.transaction() as tx:
            await tx.record_truncate(tenant, source, 900)
        assert await ledger.truncated_at(tenant, source) == 900


class DeliveriesContract:
    """Deliveries

    Needs the fixture `deliveries`.
    """

    async def test_a_delivery_is_seen_after_it_is_recorded(self, deliveries: Deliveries) -> None:
        delivery = unique("d")
        assert not await deliveries.seen("github", delivery)
        await deliveries.record("github", delivery, "handbook")
        await deliveries.record("github", delivery, "handbook")
        assert await deliveries.seen("github", delivery)
        assert not await deliveries.seen("gitlab", delivery)


class EventPublisherContract:
    """EventPublisher: records arrive on the topic byte for byte, in order per key.

    Needs the fixture `publishing`: (publisher, topic, read), read() giving the records.
    """

    async def test_records_arrive_exactly_and_in_order(self, publishing: Any) -> None:
        publisher, topic, read = publishing
        sender: EventPublisher = publisher
        records = [
            KafkaRecord(key=b"k", value=f"v{n}".encode(), headers=[("ce_id", f"{n}".encode())])
            for n in range(5)
        ]
        await sender.publish(topic, records[0])
        await sender.publish_many(topic, records[1:])
        got = await asyncio.to_thread(read)
        assert [(r.key, r.value, list(r.headers)) for r in got] == [
            (r.key, r.value, r.headers) for r in records
        ]
