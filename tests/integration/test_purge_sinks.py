"""Each purge sink on its real server, and the one fan-out over them: a deletion alone is a
batch of one through the same sinks, in order, and content left behind is never a receipt."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from govindex.control.bootstrap import prepare
from govindex.core import events
from govindex.core.envelope import Envelope, decode, encode_document_event
from govindex.core.errors import TransientError
from govindex.core.events import DocumentDeleted, document_key
from govindex.core.ports import Deletion, Purged, PurgeSink, PurgeTarget, VersionPlan
from govindex.core.records import SourceManifest
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from purger.app import purger_ports
from purger.handlers import PurgerPorts, purge_batch, purge_document
from purger.sinks import CacheSink, ContentSink, IndexSink, SummarySink, purge_sinks
from tests.support.builders import TEXT, manifest, tombstone_plan, unique, version_plan

pytestmark = pytest.mark.integration

SINKS = ["postgres", "opensearch", "redis", "summaries"]


@pytest.fixture
async def rt(runtime: Runtime, settings: Settings) -> Runtime:
    await prepare(settings)  # the template and a live generation behind the alias
    assert runtime.cache is not None, "the embedded stack always runs Redis"
    return runtime


async def stored(rt: Runtime, source: SourceManifest, doc_id: str) -> VersionPlan:
    """A document in Postgres and the index, with a cached result and a stored summary."""
    plan = version_plan(source, doc_id, 1, TEXT)
    async with rt.chunks.transaction() as tx:
        (result,) = await tx.insert_versions([plan])
        await tx.mark_active_all([(plan, result.version_id)])
    await rt.index.upsert(plan.chunks)
    doc = document_key(*_ids(plan))
    assert rt.cache is not None
    await rt.cache.put(f"pack-{doc_id}", "ctx", documents=[doc])
    await rt.lineage.register_derived(
        "summary", f"s-{doc_id}", [doc], f"summaries/{doc_id}", tenant_id=plan.tenant_id, text="t"
    )
    return plan


def deletion(plan: VersionPlan, *, keeps_history: bool = False, known: bool = True) -> Deletion:
    chunk_ids = [c.chunk_id for c in plan.chunks] if known else []
    return Deletion(plan.key, 2, chunk_ids, keeps_history, "deleted_in_source")


async def held(rt: Runtime, plan: VersionPlan) -> dict[str, int]:
    """What each sink still holds of the document's first version."""
    doc = document_key(*_ids(plan))
    target = PurgeTarget(*_ids(plan), 1, ())
    [in_index] = await rt.index.count_documents([target], refresh=True)
    assert rt.cache is not None
    summary = await rt.lineage.get(plan.tenant_id, "summary", f"s-{plan.doc_id}") or {}
    return {
        "postgres": await rt.purges.content_remaining(plan.key, 1),
        "opensearch": in_index,
        "redis": await rt.cache.count_document(doc),
        "summaries": int(summary.get("text") is not None),
    }


def _ids(plan: VersionPlan) -> tuple[str, str, str]:
    return plan.tenant_id, plan.source_id, plan.doc_id


async def test_each_sink_purges_a_batch_with_one_verified_result_per_deletion_in_order(
    rt: Runtime,
) -> None:
    source = manifest(unique("s"), unique("t"))
    a, b, kept = [await stored(rt, source, d) for d in ("a.md", "b.md", "kept.md")]
    before = await held(rt, kept)
    sinks = purge_sinks(store=rt.purges, index=rt.index, cache=rt.cache, lineage=rt.lineage)
    assert [s.name for s in sinks] == SINKS
    batch = [deletion(a), deletion(b)]
    for sink in sinks:
        results = await sink.purge(batch)
        assert len(results) == 2 and all(r.remaining == 0 for r in results), sink.name
        assert all(r.removed > 0 for r in results), sink.name
    [index_a, index_b] = await IndexSink(rt.index).purge(batch)  # again: nothing left to do
    assert (index_a.removed, index_b.removed) == (0, 0)
    assert (await ContentSink(rt.purges).purge(batch))[0] == Purged(
        0, 0, "0 chunks deleted, 0 versions emptied"
    )
    assert await held(rt, a) == await held(rt, b) == dict.fromkeys(SINKS, 0)
    assert await held(rt, kept) == before and all(before.values())  # only the batch's documents


async def test_tombstone_mode_keeps_history_in_postgres_and_the_index_and_drops_the_copies(
    rt: Runtime,
) -> None:
    source = manifest(unique("s"), unique("t"))
    plan = await stored(rt, source, "h.md")
    before = await held(rt, plan)
    batch = [deletion(plan, keeps_history=True)]
    [content] = await ContentSink(rt.purges).purge(batch)
    [index] = await IndexSink(rt.index).purge(batch)
    [cache] = await CacheSink(rt.cache).purge(batch)
    [summaries] = await SummarySink(rt.lineage).purge(batch)
    assert (content.removed, index.removed) == (0, 0)
    assert "history kept" in content.detail and "validity ended" in index.detail
    assert (cache.removed, summaries.removed) == (1, 1)
    assert [a.artifact_id for a in summaries.invalidated] == ["s-h.md"]
    after = await held(rt, plan)
    assert (after["postgres"], after["opensearch"]) == (before["postgres"], before["opensearch"])
    assert (after["redis"], after["summaries"]) == (0, 0)


async def test_the_index_sink_sweeps_chunks_the_tombstone_did_not_know(rt: Runtime) -> None:
    """Chunks no tombstone lists (a copy restored from elsewhere, a write it raced): the
    read-back finds them, the sweep by query removes them, and only then is it clean."""
    source = manifest(unique("s"), unique("t"))
    plan = version_plan(source, "fresh.md", 1, TEXT)
    await rt.index.upsert(plan.chunks)
    [result] = await IndexSink(rt.index).purge([deletion(plan, known=False)])
    assert result.remaining == 0
    [left] = await rt.index.count_documents([PurgeTarget(*_ids(plan), 1, ())], refresh=True)
    assert left == 0


def deleted(plan: VersionPlan) -> Envelope:
    body = DocumentDeleted(
        tenant_id=plan.tenant_id,
        source_id=plan.source_id,
        doc_id=plan.doc_id,
        source_version="del2",
        sequence=2,
        deleted_at=datetime.now(UTC),
    )
    record = encode_document_event(events.DOCUMENT_DELETED, body, op="deleted")
    return decode(record.key, record.value, record.headers)


async def tombstoned(rt: Runtime, source: SourceManifest, doc_id: str) -> VersionPlan:
    plan = await stored(rt, source, doc_id)
    async with rt.chunks.transaction() as tx:
        await tx.record_tombstone(tombstone_plan(source, doc_id, 2))
    return plan


async def test_a_single_deletion_is_a_batch_of_one_through_the_same_fan_out(
    rt: Runtime,
) -> None:
    source = manifest(unique("s"), unique("t"))
    alone, batched = [await tombstoned(rt, source, d) for d in ("alone.md", "batched.md")]
    ports = purger_ports(rt)
    single = await purge_document(deleted(alone), ports)
    [in_batch] = await purge_batch([deleted(batched)], ports)
    assert single is not None and isinstance(in_batch, events.DocumentPurged)
    for receipt in (single, in_batch):
        assert [s.sink for s in receipt.sinks] == SINKS
        assert all(s.verified and s.remaining == 0 and s.removed > 0 for s in receipt.sinks)
    assert [(s.sink, s.removed, s.detail) for s in single.sinks] == [
        (s.sink, s.removed, s.detail) for s in in_batch.sinks
    ]
    for plan in (alone, batched):
        assert await held(rt, plan) == dict.fromkeys(SINKS, 0)
        assert await rt.purges.receipt(plan.tenant_id, plan.doc_id, 2) is not None
    assert await purge_document(deleted(alone), ports) is None  # already purged
    assert await purge_batch([deleted(alone)], ports) == [None]


class Recording:
    """A sink that holds nothing and records each batch it is given."""

    def __init__(self, name: str, *, leaves: int = 0) -> None:
        self.name, self.leaves, self.batches = name, leaves, list[list[str]]()

    async def purge(self, deletions: Sequence[Deletion]) -> list[Purged]:
        self.batches.append([d.doc_key for d in deletions])
        return [Purged(removed=1, remaining=self.leaves) for _ in deletions]


async def test_content_left_in_one_sink_stops_the_fan_out_and_is_never_a_receipt(
    rt: Runtime, settings: Settings
) -> None:
    source = manifest(unique("s"), unique("t"))
    plans = [await tombstoned(rt, source, d) for d in ("x.md", "y.md")]
    envelopes = [deleted(p) for p in plans]
    stubborn, after = Recording("stubborn", leaves=1), Recording("after")
    sinks: list[PurgeSink] = [stubborn, after]
    ports = PurgerPorts(store=rt.purges, sinks=sinks, receipts_topic=settings.topics.receipts)
    with pytest.raises(TransientError, match="stubborn"):
        await purge_document(envelopes[0], ports)
    with pytest.raises(TransientError, match="2 documents left content behind in stubborn"):
        await purge_batch(envelopes, ports)
    assert after.batches == []  # no sink runs after one that left content
    for plan, attempts in zip(plans, (2, 1), strict=True):
        tombstone = await rt.purges.tombstone(plan.key, 2)
        assert tombstone is not None and tombstone.purge_state != "purged"
        assert tombstone.purge_attempts == attempts and "stubborn" in (tombstone.purge_error or "")
        assert await rt.purges.receipt(plan.tenant_id, plan.doc_id, 2) is None

    stubborn.leaves = 0  # the sink recovers: the retried batch completes, in one pass
    receipts = await purge_batch(envelopes, ports)
    keys = [document_key(*_ids(p)) for p in plans]
    assert stubborn.batches[-1] == after.batches[-1] == keys
    for receipt in receipts:
        assert isinstance(receipt, events.DocumentPurged)
        assert [s.sink for s in receipt.sinks] == ["stubborn", "after"]
