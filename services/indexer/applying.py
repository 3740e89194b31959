"""Applying: a batch's plans executed in one unit of work, then projected.

See docs/design/guarantees.md#postgres-first.

One `DocumentTransaction` claims every event, locks every document in one sorted order,
executes the steps `indexer.planning` decides round by round (the sequence guard does the
rest) and commits them with the outbox messages that announce them; then one bulk writes
OpenSearch from what Postgres now holds.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import replace

import structlog

from govindex.core.errors import PermanentError, RejectedByIndex, TransientError
from govindex.core.ports import (
    ApplyResult,
    BulkResult,
    ChunkStore,
    DocumentKey,
    DocumentTransaction,
    GenerationRegistry,
    OutboxMessage,
    SearchIndex,
    TaggedCache,
)
from govindex.core.records import Chunk
from govindex.core.retry import retry_transient
from govindex.core.settings import Consumers
from indexer.announcing import Announcer
from indexer.planning import (
    ApplyChange,
    PlannedEvent,
    RecordTombstone,
    Settle,
    Step,
    first_claims,
    plan_round,
    rounds,
)

log = structlog.get_logger(__name__)
CONSUMER = Consumers.INDEXER  # the name the indexer claims events under
PROJECTION_RETRY_S = 300.0  # then the batch fails and is redelivered: Postgres is idempotent

BatchResult = ApplyResult | PermanentError


async def apply_batch(
    events: list[PlannedEvent],
    *,
    store: ChunkStore,
    announcer: Announcer,
    cache: TaggedCache | None,
) -> dict[int, BatchResult]:
    """Apply in one transaction; when Postgres refuses the batch, split it in halves (in
    delivery order) until the event it refuses is alone, and dead-letter only that one."""
    if not events:
        return {}
    try:
        return dict(await _apply(events, store=store, announcer=announcer, cache=cache))
    except PermanentError as error:
        if len(events) == 1:
            return {events[0].position: error}
        log.warning("batch.bisect", events=len(events), reason=error.reason)
        half = len(events) // 2
        first = await apply_batch(events[:half], store=store, announcer=announcer, cache=cache)
        rest = await apply_batch(events[half:], store=store, announcer=announcer, cache=cache)
        return first | rest


async def _apply(
    events: list[PlannedEvent],
    *,
    store: ChunkStore,
    announcer: Announcer,
    cache: TaggedCache | None,
) -> dict[int, ApplyResult]:
    """One transaction for the batch; results count only once it commits."""
    results: dict[int, ApplyResult] = {}
    messages: list[OutboxMessage] = []
    reshaped: list[str] = []
    by_round = rounds(events)
    async with store.transaction() as tx:
        fresh = await tx.claim_all(CONSUMER, [e.envelope.id for e in events])
        claimed = first_claims(by_round, fresh)
        states = await tx.lock_all([e.key for e in by_round[0]])  # every document, once
        # Documents the index has never held and the batch changes once: no statement but
        # their own insert touches their chunks, so the rows written are the rows stored.
        firsts = {e.key for e in by_round[0]} - states.keys()
        firsts -= {e.key for batch in by_round[1:] for e in batch}
        for round_, batch in enumerate(by_round):
            if round_:
                states = await tx.states([e.key for e in batch])
            steps = plan_round(batch, claimed, states)
            reshaped += await _execute(tx, steps, announcer, results, messages, firsts)
        await tx.enqueue(messages)
        if reshaped:  # before the commit: once it is seen, it is done
            await _evict_answers(cache, reshaped)
    return results


async def _execute(
    tx: DocumentTransaction,
    steps: Sequence[Step],
    announcer: Announcer,
    results: dict[int, ApplyResult],
    messages: list[OutboxMessage],
    firsts: Set[DocumentKey] = frozenset(),
) -> list[str]:
    """One round's steps, in delivery order (new versions set-based, after the others);
    fills `results` and `messages`, returns the keys of documents whose cached answers go.
    The results of `firsts`' inserts carry the chunks written (see `ApplyResult`)."""
    applied: list[tuple[ApplyChange, ApplyResult]] = []
    inserts: list[ApplyChange] = []
    for step in steps:
        if isinstance(step, Settle):
            results[step.event.position] = ApplyResult(step.outcome)
        elif isinstance(step, RecordTombstone):
            result = await tx.record_tombstone(step.plan)
            results[step.event.position] = result
            messages += announcer.deletion(step.event, step.plan, result)
        elif (restamped := await _revoke_and_restamp(tx, step)) is None:
            inserts.append(step)
        else:
            applied.append((step, restamped))
    written = await tx.insert_versions([change.plan for change in inserts])
    for change, inserted in zip(inserts, written, strict=True):
        alone = change.event.key in firsts
        rows = tuple(change.plan.chunks) if alone else None
        applied.append((change, replace(inserted, revoked=change.lost_principals, written=rows)))
    await tx.mark_active_all([(change.plan, result.version_id) for change, result in applied])
    reshaped: list[str] = []
    for change, result in applied:
        results[change.event.position] = result
        messages += announcer.change(change.event, change.plan, result)
        if _reshapes_answers(result):
            reshaped.append(change.event.payload.key)
    return reshaped


async def _revoke_and_restamp(tx: DocumentTransaction, change: ApplyChange) -> ApplyResult | None:
    """The lost principals lose every version; a metadata-only change re-stamps the kept
    version. None for a new version: it is inserted with the round's others."""
    plan, lost = change.plan, change.lost_principals
    if lost:
        await tx.revoke_principals(plan.key, lost, plan.sequence)
    if change.keep_version is None:
        return None
    updated = await tx.update_metadata(plan, change.keep_version)
    return replace(updated, revoked=lost)


def _reshapes_answers(result: ApplyResult) -> bool:
    """A new version, or changed access or validity that is not a plain loss of principals,
    evicts every cached answer built from the document. A loss of principals evicts only
    the answers built for them (the purger, on the revocation event); a tombstone evicts
    on purge. Entries are never served past a change anyway: the read service checks each
    held document's sequence on every hit; eviction keeps Redis from holding them."""
    if result.outcome == "indexed":
        return True
    return result.outcome == "metadata_updated" and not result.revoked


async def _evict_answers(cache: TaggedCache | None, doc_keys: Sequence[str]) -> None:
    """Best effort: the read service never serves an entry whose documents moved on (it
    checks their sequences on every hit), so Redis being down must not stop indexing."""
    if cache is None:
        return
    try:
        await cache.evict_documents(doc_keys)
    except TransientError as exc:
        log.warning("cache.evict_failed", documents=len(doc_keys), error=str(exc))


async def project(
    events: Sequence[PlannedEvent],
    results: list[BatchResult | None],
    *,
    store: ChunkStore,
    index: SearchIndex,
    generations: GenerationRegistry | None,
) -> None:
    """One bulk for the batch, built from Postgres after the commit (a document's first
    version, alone in its batch, from the rows its transaction wrote: nothing else in the
    transaction changed them, so they are what Postgres holds).

    Every event that was not stale is projected (a duplicate too: its first delivery may
    have died between the sinks). 429 and 5xx are retried with backoff, and every retry
    re-reads Postgres: a payload kept from before a purge would resurrect its chunks. A
    chunk OpenSearch refuses for good dead-letters its event with the reason (in
    `results`).
    """
    changes: dict[tuple[DocumentKey, int], int] = {}
    known: dict[tuple[DocumentKey, int], tuple[Chunk, ...]] = {}
    for event in events:
        result = results[event.position]
        if isinstance(result, ApplyResult) and result.outcome != "stale":
            change = (event.key, event.payload.sequence)
            changes.setdefault(change, event.position)
            if result.written is not None:
                known.setdefault(change, result.written)
    if not changes:
        return

    async def bulk() -> BulkResult:
        # The first attempt takes the rows the transaction wrote as they are (it knows
        # them); a retry reads everything back.
        kept = dict(known)
        known.clear()
        chunks = [c for rows in kept.values() for c in rows]
        chunks += await store.chunks_changed_by_many([c for c in changes if c not in kept])
        # Read after the commit, on every attempt: a rebuild registers its generation
        # before it copies, so a change it does not copy is written to it here.
        building = await generations.building() if generations else []
        result = await index.project(chunks, building=building)
        # The deletion lane may have purged a document between the read and the write: a
        # chunk Postgres no longer holds leaves the index again (readers gate on Postgres
        # meanwhile, so it is never served).
        written = [c.chunk_id for c in chunks if c.chunk_id not in result.rejected]
        gone = set(written) - await store.chunks_present(written)
        if gone:
            await index.delete_chunks(sorted(gone))
            log.info("projection.purged_meanwhile", chunks=len(gone))
        _dead_letter_refused(chunks, result, changes, results)
        return result

    await retry_transient(bulk, what="opensearch bulk", give_up_after=PROJECTION_RETRY_S)


def _dead_letter_refused(
    chunks: Sequence[Chunk],
    result: BulkResult,
    changes: dict[tuple[DocumentKey, int], int],
    results: list[BatchResult | None],
) -> None:
    """The event that wrote a chunk OpenSearch refused for good is dead-lettered (once)."""
    for chunk in chunks:
        if chunk.chunk_id in result.rejected:
            key = DocumentKey(chunk.tenant_id, chunk.source_id, chunk.doc_id)
            owner = changes.get((key, chunk.sequence))
            if owner is not None and not isinstance(results[owner], PermanentError):
                results[owner] = RejectedByIndex(
                    f"OpenSearch refused chunk {chunk.chunk_id} of {key.doc_id!r}: "
                    f"{result.rejected[chunk.chunk_id]}; fix the mapping or the parser, "
                    "then redrive the event"
                )
