"""A purge and a connector racing for one claim-check blob never leave an event without it.

A document deleted and then re-created with the same text: the purge of the deletion dooms
the blob while the connector is emitting the re-creation, which needs that very blob. Read
committed alone lets both commit (the purge does not see the uncommitted outbox row, the
connector's insert skips the blob that is still there) and the indexer then dead-letters
the re-creation as `content_unavailable`.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from govindex.adapters.postgres.ingest_state import PostgresConnectorTransaction
from govindex.core.envelope import KafkaRecord
from govindex.core.hashing import sha256_hex
from govindex.core.ports import DocumentKey, OutboxMessage
from govindex.runtime.composition import Runtime
from tests.support.builders import TEXT, manifest, tombstone_plan, unique, version_plan

pytestmark = pytest.mark.integration


async def _purge_waits_for_a_lock(runtime: Runtime, purge: asyncio.Task[object]) -> bool:
    """True once the purge is waiting on a row lock; False if it finished without waiting."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not purge.done():
        async with runtime.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%%FROM blobs%%FOR UPDATE%%'"
            )
            row = await cur.fetchone()
        if row is not None and row[0] > 0:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_purge_racing_a_re_creation_keeps_the_blob_the_re_creation_needs(
    runtime: Runtime,
) -> None:
    source = manifest(unique("s"), unique("t"))
    key = DocumentKey(source.tenant, source.source_id, "p.md")
    blob = sha256_hex(TEXT)
    async with runtime.ingest_state.transaction() as emitting:
        await emitting.put_blobs([(blob, TEXT)])
    plan = version_plan(source, "p.md", 1, TEXT)
    async with runtime.chunks.transaction() as tx:
        (result,) = await tx.insert_versions([plan])
        await tx.mark_active_all([(plan, result.version_id)])
        await tx.record_tombstone(tombstone_plan(source, "p.md", 2))

    recreation = OutboxMessage(
        "t.race",
        KafkaRecord(f"{source.tenant}/{source.source_id}/p.md".encode(), b"{}", []),
        awaits="indexer",
        tenant_id=source.tenant,
        source_id=source.source_id,
        content_hash=blob,
        sequence=3,
    )
    async with runtime.ingest_state.transaction() as emitting:
        await emitting.emit([recreation])
        await emitting.put_blobs([(blob, TEXT)])
        assert isinstance(emitting, PostgresConnectorTransaction)
        await emitting.flush()  # what the commit runs first; the transaction stays open
        purge = asyncio.create_task(runtime.purges.purge_content(key, 2))
        waited = await _purge_waits_for_a_lock(runtime, purge)
    chunks, versions = await purge

    assert waited, "the purge decided about the blob without waiting for the emitting commit"
    assert (chunks, versions) == (len(plan.chunks), 1)  # the deleted version's text is gone
    assert await runtime.blobs.blob(blob) == TEXT  # and the re-creation's blob is not
