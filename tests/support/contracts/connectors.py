"""Contracts of what connectors use: their state, webhook deliveries, the publisher."""

from __future__ import annotations

import asyncio
from typing import Any

from govindex.core.envelope import KafkaRecord
from govindex.core.ports import CdcLedger, ConnectorState, Deliveries, EventPublisher
from tests.support.builders import unique


class ConnectorStateContract:
    """ConnectorState and CdcLedger: sequences only grow, fingerprints follow the record.

    Needs the fixture `state`: one object that is both ports; its own transactions write it.
    """

    async def test_sequences_strictly_increase_and_can_be_raised(self, state: Any) -> None:
        memory: ConnectorState = state
        tenant, source = unique("t"), unique("s")
        async with memory.transaction() as tx:
            first = await tx.reserve_sequences(tenant, source, ["a", "b"])
        async with memory.transaction() as tx:
            second = await tx.reserve_sequences(tenant, source, ["a"])
        assert first == {"a": 1, "b": 1} and second == {"a": 2}
        await memory.raise_sequences(tenant, source, {"a": 40, "b": 0})
        async with memory.transaction() as tx:
            assert await tx.reserve_sequences(tenant, source, ["a", "b"]) == {"a": 41, "b": 2}

    async def test_known_follows_what_was_recorded_and_forgotten(self, state: Any) -> None:
        memory: ConnectorState = state
        tenant, source = unique("t"), unique("s")
        async with memory.transaction() as tx:
            await tx.reserve_sequences(tenant, source, ["a", "b"])
            await tx.record(tenant, source, {"a": "fp-a", "b": "fp-b"})
        assert await memory.known(tenant, source) == {"a": "fp-a", "b": "fp-b"}
        async with memory.transaction() as tx:
            await tx.record(tenant, source, {"b": None})
        await memory.forget(tenant, source, ["a"])
        assert await memory.known(tenant, source) == {"a": ""}
        await memory.assume_present(tenant, source, ["z"])
        assert "z" in await memory.known(tenant, source)

    async def test_a_record_behind_a_newer_reservation_is_skipped(self, state: Any) -> None:
        memory: ConnectorState = state
        tenant, source = unique("t"), unique("s")
        async with memory.transaction() as tx:  # a backfill reserves first...
            early = await tx.reserve_sequences(tenant, source, ["a", "b"])
        async with memory.transaction() as tx:  # ...a live sync reserves and records after it
            await tx.reserve_sequences(tenant, source, ["a"])
            await tx.record(tenant, source, {"a": "fp-live"})
        async with memory.transaction() as tx:  # the backfill's event for `a` is the older one
            await tx.record(tenant, source, {"a": "fp-old", "b": "fp-b"}, at=early)
        assert await memory.known(tenant, source) == {"a": "fp-live", "b": "fp-b"}

    async def test_transactions_sharing_documents_and_contents_never_deadlock(
        self, state: Any
    ) -> None:
        """A live sync reserves `d` then writes blob X; a backfill step writes blob X then
        records `d`. Taken in that order, each would wait for the other."""
        tenant, source, content = unique("t"), unique("s"), unique("content")
        blob = (f"sha256:{content}", content)
        async with state.transaction() as tx:
            await tx.reserve_sequences(tenant, source, ["d", "e"])
            await tx.record(tenant, source, {"d": "fp-1", "e": "fp-1"})
        async with state.transaction() as tx:
            step = await tx.reserve_sequences(tenant, source, ["d", "e"])  # the backfill's
        holding = asyncio.Event()

        async def live() -> None:
            async with state.transaction() as tx:
                await tx.reserve_sequences(tenant, source, ["d"])
                holding.set()
                await asyncio.sleep(1.0)  # the backfill step is now waiting on `d`
                await tx.put_blobs([blob])
                await tx.record(tenant, source, {"d": "fp-live"})

        async def backfill() -> None:
            await holding.wait()
            async with state.transaction() as tx:
                await tx.put_blobs([blob])
                await tx.record(tenant, source, {"e": "fp-step", "d": "fp-step"}, at=step)

        await asyncio.wait_for(asyncio.gather(live(), backfill()), timeout=30)
        assert await state.known(tenant, source) == {"d": "fp-live", "e": "fp-step"}

    async def test_cdc_positions_never_move_back(self, state: Any) -> None:
        ledger: CdcLedger = state
        tenant, source = unique("t"), unique("s")
        assert await ledger.ledger(tenant, source, "t/1") == (0, False)
        async with ledger.transaction() as tx:
            await tx.record_position(tenant, source, "t/1", 200, deleted=False)
        async with ledger.transaction() as tx:
            await tx.record_position(tenant, source, "t/1", 100, deleted=True)  # late, older
        assert await ledger.ledger(tenant, source, "t/1") == (200, False)
        async with ledger.transaction() as tx:
            await tx.record_position(tenant, source, "t/2", 300, deleted=False)
        async with ledger.transaction() as tx:
            await tx.record_position(tenant, source, "t/1", 400, deleted=True)
        assert await ledger.live_documents(tenant, source, "t/") == ["t/2"]

    async def test_a_truncate_mark_only_moves_forward(self, state: Any) -> None:
        ledger: CdcLedger = state
        tenant, source = unique("t"), unique("s")
        assert await ledger.truncated_at(tenant, source) == 0
        async with ledger.transaction() as tx:
            await tx.record_truncate(tenant, source, 500)
        async with ledger.transaction() as tx:
            await tx.record_truncate(tenant, source, 300)  # an older truncate, late
        assert await ledger.truncated_at(tenant, source) == 500
        async with ledger.transaction() as tx:
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
