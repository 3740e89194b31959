"""What the projection sends without reading it back: only a document's first version,
alone in its batch, carries the rows its transaction wrote (`ApplyResult.written`); every
other change is read back from Postgres, because statements of the same transaction
(supersede, validity, restatement) rewrite rows after their insert."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from govindex.control.bootstrap import prepare
from govindex.core.envelope import Envelope
from govindex.core.events import DOCUMENT_UPDATED
from govindex.core.ports import ApplyResult
from govindex.core.records import Chunk, SourceManifest
from govindex.core.settings import Settings, Topics
from govindex.runtime.composition import Runtime
from indexer.announcing import Announcer
from indexer.applying import apply_batch, project
from indexer.planning import PlannedEvent, plan_change
from tests.support.builders import OTHER, TEXT, change_payload, manifest, unique

pytestmark = pytest.mark.integration

ANNOUNCER = Announcer(Topics.for_namespace("test"), generation=1)


def _rows(chunks: Any) -> list[dict[str, Any]]:
    return sorted((c.model_dump(mode="json") for c in chunks), key=lambda c: c["chunk_id"])


def _event(
    source: SourceManifest,
    position: int,
    doc_id: str,
    sequence: int,
    text: str,
    generation: int = 1,
) -> PlannedEvent:
    payload = change_payload(source.tenant, source.source_id, doc_id, sequence, text)
    now = datetime.now(UTC)
    envelope = Envelope(unique("event"), DOCUMENT_UPDATED, "test", None, now, {}, {})
    return plan_change(position, envelope, payload, text, source, generation=generation, now=now)


async def test_only_a_first_version_alone_in_its_batch_skips_the_read_back(
    runtime: Runtime,
) -> None:
    store = runtime.chunks
    source = manifest(unique("s"), unique("t"))

    def event(position: int, doc_id: str, sequence: int, text: str) -> PlannedEvent:
        return _event(source, position, doc_id, sequence, text)

    await apply_batch([event(0, "held.md", 1, TEXT)], store=store, announcer=ANNOUNCER, cache=None)
    batch = [
        event(0, "new.md", 1, TEXT),  # never held, once in the batch
        event(1, "held.md", 2, OTHER),  # supersedes a stored version
        event(2, "twice.md", 1, TEXT),  # twice in the batch: the second rewrites the first
        event(3, "twice.md", 2, OTHER),
    ]
    results = await apply_batch(batch, store=store, announcer=ANNOUNCER, cache=None)
    outcomes = [results[n] for n in range(4)]
    assert all(isinstance(r, ApplyResult) and r.outcome == "indexed" for r in outcomes)
    written = [r.written if isinstance(r, ApplyResult) else () for r in outcomes]
    assert [w is not None for w in written] == [True, False, False, False]

    first = written[0]
    assert first is not None and len(first) > 1
    read: list[Chunk] = await store.chunks_changed_by_many([(batch[0].key, 1)])
    assert _rows(read) == _rows(first)


async def test_a_first_version_purged_before_its_bulk_leaves_the_index_again(
    settings: Settings, runtime: Runtime
) -> None:
    """The bulk sends the rows the transaction wrote; a purge that deleted them after the
    commit and before the bulk must still win: the chunks Postgres no longer holds leave
    the index again at once (tombstones win), while the batch's other document stays."""
    generation = await prepare(settings)
    source = manifest(unique("s"), unique("t"))
    batch = [
        _event(source, 0, "kept.md", 1, TEXT, generation),
        _event(source, 1, "purged.md", 1, TEXT, generation),
    ]
    applied = await apply_batch(batch, store=runtime.chunks, announcer=ANNOUNCER, cache=None)
    assert all(isinstance(r, ApplyResult) and r.written for r in applied.values())
    async with runtime.pool.connection() as conn:  # what the purge's Postgres sink does
        await conn.execute(
            "DELETE FROM chunks WHERE tenant_id = %s AND source_id = %s AND doc_id = %s",
            (source.tenant, source.source_id, "purged.md"),
        )
    await project(
        batch,
        [applied[0], applied[1]],
        store=runtime.chunks,
        index=runtime.index,
        generations=runtime.generations,
    )
    await runtime.index.refresh()
    response = await runtime.index._client.search(  # the adapter's client: read-back only
        index=runtime.index.alias,
        body={"size": 100, "query": {"term": {"tenant_id": source.tenant}}},
    )
    held = {hit["_source"]["doc_id"] for hit in response["hits"]["hits"]}
    assert held == {"kept.md"}
