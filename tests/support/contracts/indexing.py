"""Contracts of the system of record: sources, chunks, blobs, purges, lineage."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import Any

import pytest

from govindex.core.errors import UnknownSource
from govindex.core.events import document_key
from govindex.core.ports import (
    BlobStore,
    ChunkStore,
    DocumentKey,
    Emitter,
    Lineage,
    LineageRegistry,
    PurgeStore,
    SourceCatalog,
    SourceRegistry,
)
from govindex.core.records import SourceManifest
from tests.support.builders import OTHER, TEXT, manifest, tombstone_plan, unique, version_plan


class SourceRegistryContract:
    """SourceRegistry and SourceCatalog.

    Needs the fixture `registry`.
    """

    async def test_register_then_get_find_and_update(self, registry: SourceRegistry) -> None:
        m = manifest(unique("s"), unique("t"))
        assert await registry.register(m) == "created"
        assert await registry.get(m.tenant, m.source_id) == m
        assert await registry.find(m.source_id) == m
        assert await registry.get("another-tenant", m.source_id) is None
        changed = m.model_copy(update={"owner_team": "sre"})
        assert await registry.register(changed) == "updated"
        assert await registry.find(m.source_id) == changed

    async def test_a_source_id_belongs_to_one_tenant(self, registry: SourceRegistry) -> None:
        m = manifest(unique("s"), unique("t"))
        await registry.register(m)
        with pytest.raises(UnknownSource, match="already registered"):
            await registry.register(manifest(m.source_id, unique("t")))

    async def test_disable_and_enable_round_trip(self, registry: SourceRegistry) -> None:
        m = manifest(unique("s"), unique("t"))
        await registry.register(m)
        disabled = await registry.set_enabled(m.source_id, False)
        assert disabled is not None and not disabled.enabled
        assert (await registry.find(m.source_id)) == disabled
        enabled = await registry.set_enabled(m.source_id, True)
        assert enabled is not None and enabled.enabled
        assert await registry.set_enabled(unique("missing"), False) is None

    async def test_the_catalog_finds_sources_by_repository_and_kind(
        self, registry: SourceCatalog
    ) -> None:
        tenant, repo = unique("t"), unique("acme/Repo")
        git = manifest(unique("g"), tenant, git={"repository": repo, "remote_url": "file:///x"})
        cdc = manifest(
            unique("c"),
            tenant,
            source_type="cdc",
            cdc={
                "topic": "db.public.t",
                "table": "public.t",
                "id_columns": ["id"],
                "text_columns": ["body"],
            },
        )
        for m in (git, cdc):
            await registry.register(m)  # type: ignore[attr-defined]
        assert await registry.find_by_repository(repo.upper()) == [git]
        assert cdc in await registry.cdc_sources() and git not in await registry.cdc_sources()
        every = await registry.all()
        assert git in every and cdc in every
        assert [m.source_id for m in every] == sorted(m.source_id for m in every)


class ChunkStoreContract:
    """ChunkStore and its DocumentTransaction: the order guard's home.

    Needs the fixture `store`.
    """

    @pytest.fixture
    def source(self) -> SourceManifest:
        return manifest(unique("s"), unique("t"))

    async def test_an_event_is_claimed_once(self, store: ChunkStore) -> None:
        event = unique("event")
        async with store.transaction() as tx:
            assert await tx.claim_all("indexer", [event]) == {event}
        async with store.transaction() as tx:
            assert await tx.claim_all("indexer", [event]) == set()
            assert await tx.claim_all("purger", [event]) == {event}  # claims are per consumer

    async def test_a_batch_claims_each_event_id_once(self, store: ChunkStore) -> None:
        a, b = unique("event"), unique("event")
        async with store.transaction() as tx:
            assert await tx.claim_all("indexer", [a, b, a]) == {a, b}
        async with store.transaction() as tx:
            assert await tx.claim_all("indexer", [a, b]) == set()

    async def test_a_batch_of_versions_is_written_and_read_back_set_based(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        plans = [version_plan(source, f"batch-{n}.md", 1, TEXT) for n in range(3)]
        async with store.transaction() as tx:
            assert await tx.lock_all([p.key for p in plans]) == {}
            results = await tx.insert_versions(plans)
            await tx.mark_active_all(
                [(p, r.version_id) for p, r in zip(plans, results, strict=True)]
            )
        async with store.transaction() as tx:
            states = await tx.lock_all([p.key for p in plans])
        assert {k: s.last_sequence for k, s in states.items()} == {p.key: 1 for p in plans}
        written = await store.chunks_changed_by_many([(p.key, 1) for p in plans])
        assert sorted(c.chunk_id for c in written) == sorted(
            c.chunk_id for p in plans for c in p.chunks
        )
        ids = [c.chunk_id for c in written]
        assert await store.chunks_present([*ids, "no-such-chunk"]) == set(ids)

    async def test_a_first_version_reads_back_exactly_as_it_was_written(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        """The projection sends a document's first version from the rows it wrote, not
        read back (`ApplyResult.written`): every field of every chunk, serialized, must be
        what Postgres then holds, times given in another offset included."""
        text = (
            "---\nvalid_from: 2026-03-01T09:30:00.123456+02:00\n"
            "event_time: 2026-02-27T23:15:00-05:00\n---\n" + TEXT
        )
        plan = version_plan(source, "exact.md", 1, text)
        async with store.transaction() as tx:
            (result,) = await tx.insert_versions([plan])
            await tx.mark_active_all([(plan, result.version_id)])
        read = {c.chunk_id: c for c in await store.chunks_changed_by_many([(plan.key, 1)])}
        assert len(read) == len(plan.chunks) > 1
        for chunk in plan.chunks:
            assert read[chunk.chunk_id].model_dump(mode="json") == chunk.model_dump(mode="json")

    async def test_chunk_arrays_are_read_back_as_written_whatever_they_hold(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        """Quotes, backslashes, commas, braces, blanks, the word NULL and empty strings in
        a chunk's arrays survive the write (its COPY quotes each array itself)."""
        odd = ('a "quoted", {braced} \\ back', "NULL", "", "  spaced  ", "é,中\t|", "{}")
        plan = version_plan(source, "arrays.md", 1, TEXT, acl=["group:eng"])
        chunks = tuple(
            c.model_copy(update={"heading_path": odd, "labels": odd[::-1], "evidence": ()})
            for c in plan.chunks
        )
        plan = replace(plan, chunks=chunks)
        async with store.transaction() as tx:
            (result,) = await tx.insert_versions([plan])
            await tx.mark_active_all([(plan, result.version_id)])
        read = {c.chunk_id: c for c in await store.chunks_changed_by_many([(plan.key, 1)])}
        assert len(read) == len(chunks) > 0
        for chunk in chunks:
            got = read[chunk.chunk_id]
            assert (got.heading_path, got.labels, got.evidence, got.acl) == (
                odd,
                odd[::-1],
                (),
                chunk.acl,
            )
            assert got.text == chunk.text

    async def test_the_documents_row_never_moves_backwards(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        newer, older = version_plan(source, "g.md", 5, OTHER), version_plan(source, "g.md", 3, TEXT)
        async with store.transaction() as tx:
            (result,) = await tx.insert_versions([newer])
            await tx.mark_active_all([(newer, result.version_id)])
        async with store.transaction() as tx:  # a writer that skipped the order guard
            await tx.mark_active_all([(older, older.version_id)])
        async with store.transaction() as tx:
            held = (await tx.lock_all([newer.key])).get(newer.key)
        assert held is not None and held.last_sequence == 5
        assert held.current_content_hash == newer.content_hash

    async def test_a_document_without_a_row_is_locked_too(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        key = version_plan(source, "not-yet.md", 1, TEXT).key
        order: list[str] = []

        async def second() -> None:
            async with store.transaction() as tx:
                await tx.lock_all([key])
                order.append("second")

        async with store.transaction() as tx:
            await tx.lock_all([key])
            waiting = asyncio.create_task(second())
            await asyncio.sleep(0.5)
            order.append("first")
        await waiting
        assert order == ["first", "second"]  # the second waited for the first's commit

    async def test_a_new_version_is_current_and_readable(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        plan = version_plan(source, "a.md", 1, TEXT)
        async with store.transaction() as tx:
            assert (await tx.lock_all([plan.key])).get(plan.key) is None
            (result,) = await tx.insert_versions([plan])
            await tx.mark_active_all([(plan, result.version_id)])
        assert result.outcome == "indexed" and result.chunk_count == len(plan.chunks)
        async with store.transaction() as tx:
            held = (await tx.lock_all([plan.key])).get(plan.key)
        assert held is not None and held.active and held.last_sequence == 1
        assert held.current_content_hash == plan.content_hash
        assert held.current_parser == (plan.parser, plan.parser_version)
        assert held.current_principals == frozenset({"group:eng"})
        written = await store.chunks_changed_by(plan.key, 1)
        assert sorted(c.chunk_id for c in written) == sorted(c.chunk_id for c in plan.chunks)
        assert [c.text for c in await store.chunks_of_version(plan.version_id)] == [
            c.text for c in plan.chunks
        ]
        by_id = await store.chunks_by_id([plan.chunks[0].chunk_id])
        assert by_id == [plan.chunks[0]]

    async def test_a_failed_transaction_leaves_nothing(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        plan = version_plan(source, "b.md", 1, TEXT)
        event = "rolled-back-" + plan.version_id

        async def crash_before_commit() -> None:
            async with store.transaction() as tx:
                assert await tx.claim_all("indexer", [event]) == {event}
                await tx.insert_versions([plan])
                await tx.mark_active_all([(plan, plan.version_id)])
                raise RuntimeError("crash before commit")

        with pytest.raises(RuntimeError):
            await crash_before_commit()
        async with store.transaction() as tx:
            assert (await tx.lock_all([plan.key])).get(plan.key) is None
            assert await tx.claim_all("indexer", [event]) == {event}
        assert await store.chunks_changed_by(plan.key, 1) == []

    async def test_a_new_version_supersedes_and_ends_the_older_one(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        first, second = (
            version_plan(source, "c.md", 1, TEXT),
            version_plan(source, "c.md", 2, OTHER),
        )
        for plan in (first, second):
            async with store.transaction() as tx:
                (result,) = await tx.insert_versions([plan])
                await tx.mark_active_all([(plan, result.version_id)])
        old = await store.chunks_of_version(first.version_id)
        assert old and all(c.superseded_at is not None for c in old)
        assert all(c.valid_to == second.valid_from for c in old)
        assert all(c.sequence == 2 for c in old)  # re-projected by the newer event

    async def test_metadata_update_and_revocation_restamp_without_rechunking(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        plan = version_plan(source, "d.md", 1, TEXT, acl=["group:eng", "group:sre"])
        async with store.transaction() as tx:
            (result,) = await tx.insert_versions([plan])
            await tx.mark_active_all([(plan, result.version_id)])
        narrowed = version_plan(source, "d.md", 2, TEXT, acl=["group:eng"])
        async with store.transaction() as tx:
            await tx.revoke_principals(narrowed.key, ["group:sre"], 2)
            updated = await tx.update_metadata(narrowed, plan.version_id)
            await tx.mark_active_all([(narrowed, updated.version_id)])
        assert updated.outcome == "metadata_updated" and updated.version_id == plan.version_id
        chunks = await store.chunks_of_version(plan.version_id)
        assert {c.chunk_id for c in chunks} == {c.chunk_id for c in plan.chunks}
        assert all(c.acl == ("group:eng",) and c.sequence == 2 for c in chunks)

    async def test_a_principal_revoked_from_every_acl_leaves_a_chunk_visible_to_no_one(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        plan = version_plan(source, "e.md", 1, TEXT, acl=["group:sre"])
        async with store.transaction() as tx:
            (result,) = await tx.insert_versions([plan])
            await tx.mark_active_all([(plan, result.version_id)])
            await tx.revoke_principals(plan.key, ["group:sre"], 2)
        chunks = await store.chunks_of_version(plan.version_id)
        assert chunks and all("group:sre" not in c.acl and len(c.acl) == 1 for c in chunks)

    async def test_a_tombstone_ends_the_document_and_lists_what_it_held(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        plan = version_plan(source, "f.md", 1, TEXT)
        async with store.transaction() as tx:
            (result,) = await tx.insert_versions([plan])
            await tx.mark_active_all([(plan, result.version_id)])
        async with store.transaction() as tx:
            tombstoned = await tx.record_tombstone(tombstone_plan(source, "f.md", 2))
            held = (await tx.lock_all([plan.key])).get(plan.key)
        assert tombstoned.outcome == "tombstoned" and tombstoned.chunk_count == len(plan.chunks)
        assert held is not None and not held.active and held.last_sequence == 2
        assert all(c.superseded_at is not None for c in await store.chunks_changed_by(plan.key, 2))

    async def test_a_tombstone_for_a_document_never_seen_still_guards_it(
        self, store: ChunkStore, source: SourceManifest
    ) -> None:
        key = DocumentKey(source.tenant, source.source_id, "never.md")
        async with store.transaction() as tx:
            await tx.record_tombstone(tombstone_plan(source, "never.md", 5))
            held = (await tx.lock_all([key])).get(key)
        assert held is not None and not held.active and held.last_sequence == 5


class BlobStoreContract:
    """BlobStore, over blobs written by an Emitter's transactions.

    Needs the fixture `blobs`: (Emitter, BlobStore) over one system of record.
    """

    async def test_a_blob_written_twice_reads_back_once(self, blobs: Any) -> None:
        ref = f"sha256:{uuid.uuid4().hex}{uuid.uuid4().hex}"
        emitter: Emitter = blobs[0]
        store: BlobStore = blobs[1]
        assert await store.blob(ref) is None
        for _ in range(2):  # written by a connector, as ingest does; twice is harmless
            async with emitter.transaction() as tx:
                await tx.put_blobs([(ref, "large text")])
        assert await store.blob(ref) == "large text"


class PurgeStoreContract:
    """PurgeStore: purge content of versions ≤ the tombstone, read back, complete once.

    Needs the fixture `stores` (ChunkStore, PurgeStore) over one system of record.
    """

    async def test_purge_read_back_and_complete_once(self, stores: tuple[Any, Any]) -> None:
        chunks, purges = stores
        store: ChunkStore = chunks
        purge: PurgeStore = purges
        source = manifest(unique("s"), unique("t"))
        plan = version_plan(source, "p.md", 1, TEXT)
        async with store.transaction() as tx:
            (result,) = await tx.insert_versions([plan])
            await tx.mark_active_all([(plan, result.version_id)])
            await tx.record_tombstone(tombstone_plan(source, "p.md", 2))
        tombstone = await purge.tombstone(plan.key, 2)
        assert tombstone is not None and tombstone.purge_state == "pending"
        assert sorted(tombstone.chunk_ids) == sorted(c.chunk_id for c in plan.chunks)
        assert await purge.content_remaining(plan.key, 2) > 0
        await purge.note_failure(tombstone, "opensearch down")
        assert await purge.purge_content(plan.key, 2) == (len(plan.chunks), 1)
        assert await purge.purge_content(plan.key, 2) == (0, 0)  # idempotent
        assert await purge.content_remaining(plan.key, 2) == 0
        receipt: dict[str, Any] = {"sinks": []}
        assert await purge.complete("purger", "e-" + plan.version_id, tombstone, receipt, [])
        assert not await purge.complete("purger", "e-" + plan.version_id, tombstone, receipt, [])
        done = await purge.tombstone(plan.key, 2)
        assert done is not None and done.purge_state == "purged" and done.purge_attempts == 1


class LineageContract:
    """Lineage

    Needs the fixture `lineage`.
    """

    async def test_artifacts_are_invalidated_by_document_or_by_chunk(self, lineage: Any) -> None:
        registry: LineageRegistry = lineage
        tracked: Lineage = lineage
        tenant = unique("t")
        doc = document_key(tenant, "s", "a.md")
        chunk = uuid.uuid4().hex
        await registry.register_derived(
            "summary", "whole", [doc], "s3://x", tenant_id=tenant, text="S"
        )
        await registry.register_derived(
            "memory", "part", [chunk], "s3://y", tenant_id=tenant, text="M"
        )
        assert await tracked.remaining(tenant, doc, [chunk]) == 2
        partial = await tracked.invalidate(
            tenant, doc, [chunk], "version expired", whole_document=False
        )
        assert [a.artifact_id for a in partial] == ["part"]
        assert await tracked.remaining(tenant, doc, []) == 1
        rest = await tracked.invalidate(tenant, doc, [], "deleted")
        assert [a.artifact_id for a in rest] == ["whole"]
        assert await tracked.remaining(tenant, doc, [chunk]) == 0
        assert await tracked.invalidate(tenant, doc, [chunk], "again") == []
