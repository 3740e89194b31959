"""Hydration reads every pack item's parent and neighbours in one snapshot call, against the
real Postgres, and packs exactly what a chunk-at-a-time walk packs (issue 20)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from govindex.core.ports import ChunkFacts, ReadSnapshot, ReadStore
from govindex.runtime.composition import Runtime
from reader.models import PackRequest
from reader.service import ReadPorts, ReadService
from tests.support.builders import manifest, unique, version_plan

pytestmark = pytest.mark.integration

ORDERS = "# Orders DB failover\n\n" + "\n\n".join(
    f"## Step {n}\n\nFor failover, step {n} moves the replica {'forward ' * n}."
    for n in range(1, 9)
)
LEDGER = "# Ledger recovery\n\n" + "\n\n".join(
    f"## Part {n}\n\nLedger part {n}: replay the replica journal {'again ' * n}."
    for n in range(1, 9)
)


class CountingSnapshot:
    """The real snapshot, forwarded to, counting the calls that read chunk facts."""

    def __init__(self, real: ReadSnapshot, calls: Counter[str]) -> None:
        self._real = real
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    async def facts(self, chunk_ids: Sequence[str]) -> dict[str, ChunkFacts]:
        self.calls["facts"] += 1
        return await self._real.facts(chunk_ids)

    async def facts_around(
        self, chunk_ids: Sequence[str], *, parent: bool, neighbours: int
    ) -> dict[str, ChunkFacts]:
        self.calls["facts_around"] += 1
        return await self._real.facts_around(chunk_ids, parent=parent, neighbours=neighbours)


class OneChunkAtATime(CountingSnapshot):
    """The real snapshot, hydrating as the read service did before: each parent and each
    neighbour read on its own, through `facts`, walking from every candidate."""

    async def facts_around(
        self, chunk_ids: Sequence[str], *, parent: bool, neighbours: int
    ) -> dict[str, ChunkFacts]:
        found: dict[str, ChunkFacts] = {}

        async def one(chunk_id: str | None) -> ChunkFacts | None:
            if chunk_id is None:
                return None
            facts = (await self._real.facts([chunk_id])).get(chunk_id)
            if facts is not None:
                found[chunk_id] = facts
            return facts

        for chunk_id in chunk_ids:
            hit = (await self._real.facts([chunk_id]))[chunk_id].chunk
            if parent:
                await one(hit.parent_id)
            for step in ("prev_id", "next_id"):
                current = hit
                for _ in range(neighbours):
                    following = await one(getattr(current, step))
                    if following is None:
                        break
                    current = following.chunk
        return found


class Snapshots:
    """A ReadStore whose snapshots are the real ones, wrapped."""

    def __init__(self, real: ReadStore, wrap: type[CountingSnapshot]) -> None:
        self._real = real
        self._wrap = wrap
        self.calls: Counter[str] = Counter()

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[ReadSnapshot]:
        async with self._real.snapshot() as snap:
            # A ReadSnapshot: what the wrapper does not count, __getattr__ forwards.
            yield cast(ReadSnapshot, self._wrap(snap, self.calls))

    async def still_current(self, doc_sequences: Mapping[str, int]) -> bool:
        return await self._real.still_current(doc_sequences)


async def _corpus(rt: Runtime) -> str:
    """Two documents of several sections each; one section of the first tampered with."""
    source = manifest(unique("s"), unique("t"))
    await rt.registry.register(source)
    plans = [
        version_plan(source, "runbooks/orders-db.md", 1, ORDERS),
        version_plan(source, "runbooks/ledger.md", 1, LEDGER),
    ]
    async with rt.chunks.transaction() as tx:
        applied = await tx.insert_versions(plans)
        await tx.mark_active_all([(p, a.version_id) for p, a in zip(plans, applied, strict=True)])
    async with rt.pool.connection() as conn:  # hydration must stop at it, as a hit is refused
        await conn.execute(
            "UPDATE chunks SET text = text || ' (edited)' WHERE tenant_id = %s "
            "AND text LIKE '%%step 4 moves%%'",
            (source.tenant,),
        )
    return source.tenant


async def test_a_pack_hydrates_every_item_in_one_call_and_packs_what_it_did_before(
    runtime: Runtime,
) -> None:
    tenant = await _corpus(runtime)
    request = PackRequest.model_validate(
        {
            "tenant": tenant,
            "subject": {"principals": ["group:eng"]},
            "purpose": "support",
            "query": "failover replica ledger journal",
            "as_of": datetime.now(UTC).isoformat(),
            "channels": ["fulltext", "structured"],
            "hydration": {"neighbours": 1, "parent": True},
            "budget": {"max_items": 8, "max_per_document": 4, "max_tokens": 4000},
            "dedup_threshold": 0,
            "trace": True,
            "cache": "bypass",
        }
    )
    counted = Snapshots(runtime.reads, CountingSnapshot)
    pack = await ReadService(ReadPorts(store=counted, index=None, cache=None)).pack(request)

    assert counted.calls == {"facts": 1, "facts_around": 1}  # ranking, then hydration
    assert len(pack.items) >= 4
    assert {i.anchor.doc_id for i in pack.items} == {"runbooks/orders-db.md", "runbooks/ledger.md"}
    hydrated = [h for i in pack.items for h in i.hydrated]
    relations = Counter(h.relation for h in hydrated)
    assert relations["parent"] >= 1 and relations["previous"] + relations["next"] >= 4
    texts = [i.text for i in pack.items] + [h.text for h in hydrated]
    assert not any("(edited)" in t for t in texts)  # the tampered section passed no gate

    walked = Snapshots(runtime.reads, OneChunkAtATime)
    before = await ReadService(ReadPorts(store=walked, index=None, cache=None)).pack(request)
    # The same pack but for what makes each build a pack of its own: its id, its build
    # time, and the hash over them.
    own = {"manifest": {"pack_id", "built_at", "pack_hash"}}
    assert pack.model_dump(exclude=own) == before.model_dump(exclude=own)


async def test_facts_around_walks_parents_and_n_neighbours_each_side_ungated(
    runtime: Runtime,
) -> None:
    tenant = await _corpus(runtime)
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT chunk_id FROM chunks WHERE tenant_id = %s AND doc_id = %s ORDER BY ordinal",
            (tenant, "runbooks/orders-db.md"),
        )
        title, *steps = [row[0] for row in await cur.fetchall()]
    assert len(steps) == 8  # the title, then steps 1..8, each linked to the next
    seeds = [steps[1], steps[5]]  # steps 2 and 6
    async with runtime.reads.snapshot() as snap:
        two = await snap.facts_around(seeds, parent=True, neighbours=2)
        one = await snap.facts_around(seeds, parent=False, neighbours=1)
        none = await snap.facts_around(seeds, parent=False, neighbours=0)
    by_step = {chunk_id: n for n, chunk_id in enumerate(steps, 1)} | {title: 0}
    assert sorted(by_step[c] for c in two) == [0, 1, 3, 4, 5, 7, 8]  # title: parent, previous
    assert sorted(by_step[c] for c in one) == [1, 3, 5, 7]
    assert none == {}
    tampered = two[steps[3]]  # returned as stored: the caller's gates refuse it
    assert "(edited)" in tampered.chunk.text and tampered.chunk.chunk_id == steps[3]
