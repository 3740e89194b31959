"""The batched indexer and the deletion lane, on the real servers (issue 11).

A poison event inside a batch is dead-lettered alone; OpenSearch answering 429/503 is
retried with the payload rebuilt from Postgres (so a purge in between is never undone);
an indexer process killed mid-batch loses nothing and applies nothing twice; Postgres
dropping every connection mid-load is waited out; a delete racing its own create in the
two lanes leaves nothing, and an update its delete overtook is dropped while a later
re-create applies.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import psycopg
import pytest
from aiokafka.partitioner import DefaultPartitioner

from govindex.adapters.kafka_lanes import PartitionLanes
from govindex.control.workers import Workers
from govindex.runtime.composition import Runtime
from govindex.runtime.deadletter import REASON_HEADER
from tests.support.faults import FaultyOpenSearch
from tests.support.pipeline import Pipeline, event_id_of, until
from tests.support.proxy import CuttableProxy

pytestmark = pytest.mark.e2e


async def _count(p: Pipeline, query: str, *params: Any) -> int:
    async with p.pool.connection() as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def test_a_poison_event_inside_a_batch_is_dead_lettered_alone(
    idle_pipeline: Pipeline,
) -> None:
    p = idle_pipeline  # everything on the topic before the workers start: one batch each
    healthy = [p.change(f"h{i}.md", 1, f"# H{i}\nfine text {i}\n") for i in range(12)]
    poison = p.change("poison.md", 1, "# P\nPostgres cannot store a \x00 byte in text\n")
    p.publish(*healthy[:6], poison, *healthy[6:])
    await p.start_workers()
    await p.wait_processed([event_id_of(r) for r in healthy])
    letters = await until(_dead_letters(p), lambda d: len(d) >= 1, 60, "a dead letter")
    poison_id = event_id_of(poison)
    assert [dict(r.headers)["ce_id"].decode() for r in letters] == [poison_id]
    assert dict(letters[0].headers)[REASON_HEADER] == b"rejected_by_postgres"
    # Settled as dead-lettered, never claimed: its emission will not be re-published.
    dead = "SELECT count(*) FROM dead_lettered WHERE event_id = %s"
    assert await _count(p, dead, poison_id) == 1
    claimed = "SELECT count(*) FROM processed_events WHERE event_id = %s"
    assert await _count(p, claimed, poison_id) == 0
    assert len(await p.active_documents(p.source)) == 12
    await p.assert_sinks_agree()


def _dead_letters(p: Pipeline) -> Any:
    async def read() -> list[Any]:
        return p.dead_letters()

    return read


@pytest.fixture
async def faulty(idle_pipeline: Pipeline) -> AsyncIterator[FaultyOpenSearch]:
    assert idle_pipeline.settings.opensearch_url
    proxy = FaultyOpenSearch(idle_pipeline.settings.opensearch_url)
    await proxy.start()
    yield proxy
    await proxy.stop()


async def test_opensearch_busy_is_retried_from_postgres_and_never_undoes_a_purge(
    idle_pipeline: Pipeline, faulty: FaultyOpenSearch
) -> None:
    p = idle_pipeline
    faulty.fail(429)
    async with Runtime(p.settings.model_copy(update={"opensearch_url": faulty.url})) as rt:
        workers = Workers(rt, run=("indexer", "purger"))
        await workers.start()
        try:
            ids = p.publish(
                p.change("keep.md", 1, "# Keep\nkept words\n"),
                p.change("gone.md", 1, "# Gone\nwords that must not come back\n"),
            )
            await p.wait_processed(ids)  # Postgres holds both ...
            await until(_refused(faulty), lambda n: n >= 2, 60, "bulk retries (429)")
            faulty.fail(503)
            await until(_refused(faulty), lambda n: n >= 4, 60, "bulk retries (503)")
            assert p.os_chunks() == []  # ... OpenSearch nothing: its bulks are refused
            # Meanwhile the deletion lane purges one of them (deletes pass the fault).
            p.publish(p.deletion("gone.md", 2), topic=p.settings.topics.deletions)
            receipt = await p.wait_purged("gone.md", 2)
            assert receipt is not None
            faulty.heal()
            p.workers = workers  # wait for both lanes' offsets, as for in-process workers
            await p.wait_committed(timeout=120)
            p.workers = None
        finally:
            await workers.stop()
    assert [d["doc_id"] for d in p.os_chunks()] == ["keep.md"]  # gone.md never came back
    assert await p.pg_chunks("gone.md") == []
    await p.assert_sinks_agree()


def _read(value: Any) -> Any:
    async def read() -> Any:
        return value()

    return read


def _refused(proxy: FaultyOpenSearch) -> Any:
    async def read() -> int:
        return proxy.refused

    return read


def _worker(p: Pipeline, log: Path, kind: str = "indexer", **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "govindex.cli.main", "worker", kind, "--log-level", "INFO"],
        env={
            **os.environ,
            "GOVINDEX_PG_DSN": p.settings.pg_dsn or "",
            "GOVINDEX_KAFKA_BOOTSTRAP": p.settings.kafka_bootstrap or "",
            "GOVINDEX_OPENSEARCH_URL": p.settings.opensearch_url or "",
            "GOVINDEX_NAMESPACE": p.settings.namespace,
            "GOVINDEX_METRICS_PORT": "0",  # the default port may be another test's
            **env,
        },
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


@pytest.mark.parametrize("kill_at", [1, 150])
async def test_an_indexer_killed_mid_batch_loses_nothing_and_applies_nothing_twice(
    idle_pipeline: Pipeline, tmp_path: Path, kill_at: int
) -> None:
    """SIGKILL once `kill_at` events are committed in Postgres: the first batch's commit
    (its projection and offsets not done yet), or in the middle of the load."""
    p = idle_pipeline
    ids = p.publish(
        *[p.change(f"k{i:03d}.md", 1, f"# K{i}\nbody {i}\n## Part\nmore {i}\n") for i in range(300)]
    )
    log = tmp_path / "worker.log"
    worker = _worker(p, log, GOVINDEX_BATCH_MAX_EVENTS="50")
    try:
        await until(
            lambda: p._count_processed(ids, "indexer"), lambda n: n >= kill_at, 120, "a commit"
        )
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        done = await p._count_processed(ids, "indexer")
    except BaseException:
        print(log.read_text())
        raise
    finally:
        if worker.poll() is None:
            worker.kill()
    assert done < len(ids), "the kill must land before the load is done"
    await p.start_workers()  # the same consumer group takes over
    await p.wait_processed(ids, timeout=240)
    tenant = p.tenant
    assert await _count(
        p, "SELECT count(*) FROM document_versions WHERE tenant_id = %s", tenant
    ) == len(ids)
    assert await _count(
        p,
        "SELECT count(*) FROM outbox WHERE key LIKE %s AND topic = %s",
        f"{tenant}/%",
        p.settings.topics.receipts,
    ) == len(ids)  # one receipt per event: nothing applied twice
    await p.assert_sinks_agree()


@pytest.fixture
async def pg_proxy(idle_pipeline: Pipeline) -> AsyncIterator[CuttableProxy]:
    assert idle_pipeline.settings.pg_dsn
    url = urlparse(idle_pipeline.settings.pg_dsn)
    assert url.hostname and url.port
    proxy = CuttableProxy(url.hostname, url.port)
    await proxy.start()
    yield proxy
    await proxy.cut()


async def test_postgres_dropping_every_connection_mid_load_is_waited_out(
    idle_pipeline: Pipeline, pg_proxy: CuttableProxy
) -> None:
    """What a Postgres restart looks like to the workers: every connection dropped, new
    ones refused for a while, then back. Batches retry; nothing is lost or doubled."""
    p = idle_pipeline
    assert p.settings.pg_dsn
    url = urlparse(p.settings.pg_dsn)
    netloc = f"{url.username}:{url.password}@127.0.0.1:{pg_proxy.port}"
    dsn = url._replace(netloc=netloc).geturl()
    async with Runtime(p.settings.model_copy(update={"pg_dsn": dsn})) as rt:
        workers = Workers(rt, run=("indexer",))
        await workers.start()
        try:
            first = p.publish(*[p.change(f"a{i}.md", 1, f"# A{i}\nalpha {i}\n") for i in range(40)])
            await until(
                lambda: p._count_processed(first, "indexer"), lambda n: n > 0, 60, "a commit"
            )
            await pg_proxy.cut()
            second = p.publish(
                *[p.change(f"b{i}.md", 1, f"# B{i}\nbravo {i}\n") for i in range(40)],
                p.deletion("a0.md", 2),
            )
            await asyncio.sleep(3.0)  # down for a while: batches fail and are retried
            await pg_proxy.start()
            p.workers = workers
            await p.wait_processed(first + second, timeout=120)
            p.workers = None
        finally:
            await workers.stop()
    assert len(await p.active_documents(p.source)) == 79
    await p.assert_sinks_agree()


async def test_a_delete_racing_its_own_create_in_the_two_lanes_leaves_nothing(
    idle_pipeline: Pipeline,
) -> None:
    p = idle_pipeline  # both on their topics before either lane runs
    deletions = p.settings.topics.deletions
    created = p.publish(
        p.change("race-a.md", 1, "# A\nraced text a\n"), p.change("race-b.md", 1, "# B\nb\n")
    )
    deleted = p.publish(p.deletion("race-a.md", 2), p.deletion("race-b.md", 2), topic=deletions)
    await p.start_workers()
    await p.wait_processed(created + deleted)
    for doc in ("race-a.md", "race-b.md"):
        await p.wait_purged(doc, 2)
        assert await p.pg_chunks(doc) == []
        assert p.os_chunks(doc) == []
    assert await p.active_documents(p.source) == {}
    # The other order, one after the other: the delete lands first, the create is stale.
    gone = p.publish(p.deletion("late.md", 2), topic=deletions)
    await p.wait_processed(gone)
    late = p.publish(p.change("late.md", 1, "# Late\nmust not appear\n"))
    await p.wait_processed(late)
    assert await p.pg_chunks("late.md") == [] and p.os_chunks("late.md") == []


async def test_an_update_overtaken_by_its_delete_is_dropped_and_a_recreate_applies(
    pipeline: Pipeline,
) -> None:
    """deletion_mode tombstone keeps history for as_of; an update its delete overtook in the
    other lane is dropped (counted stale), never written into that history."""
    p = pipeline
    await p.register(source_id=p.source, deletion_mode="tombstone")
    first = p.publish(p.change("h.md", 1, "# H\nfirst version\n"))
    await p.wait_processed(first)
    deleted = p.publish(p.deletion("h.md", 3), topic=p.settings.topics.deletions)
    await p.wait_processed(deleted)
    overtaken = p.publish(p.change("h.md", 2, "# H\nsecond version, too late\n"))
    await p.wait_processed(overtaken)
    versions = await _count(
        p,
        "SELECT count(*) FROM document_versions WHERE tenant_id = %s AND doc_id = 'h.md'",
        p.tenant,
    )
    assert versions == 1  # history holds what was applied before the deletion, only that
    assert {r["text"] for r in await p.pg_chunks("h.md")} == {"# H\nfirst version\n"}
    recreated = p.publish(p.change("h.md", 4, "# H\nback again\n"))
    await p.wait_processed(recreated)
    current = [r for r in await p.pg_chunks("h.md") if r["superseded_at"] is None]
    assert [r["text"] for r in current] == ["# H\nback again\n"]
    await p.assert_sinks_agree()


async def test_a_generation_being_built_gets_every_write_and_every_purge(
    pipeline: Pipeline,
) -> None:
    """A rebuild registers its generation before it copies: from then on every batch is
    written to it as well (stamped with its number), and purges reach it."""
    p = pipeline
    generation = await p.rt.generations.begin(p.rt.index.index_name)
    building = await p.rt.index.create_generation(generation)

    def held(index: str) -> dict[str, int]:
        p.search.indices.refresh(index=index)
        query = {"bool": {"filter": [{"term": {"tenant_id": p.tenant}}]}}
        found = p.search.search(index=index, body={"size": 100, "query": query})
        return {h["_id"]: h["_source"]["index_generation"] for h in found["hits"]["hits"]}

    await p.wait_processed(p.publish(p.change("b.md", 1, "# B\none\n## Two\nsecond\n")))
    stored = {r["chunk_id"] for r in await p.pg_chunks("b.md")}
    assert len(stored) == 2
    assert set(held(p.settings.index_alias)) == stored
    assert held(building) == dict.fromkeys(stored, generation)

    p.publish(p.deletion("b.md", 2), topic=p.settings.topics.deletions)
    await p.wait_purged("b.md", 2)
    assert held(p.settings.index_alias) == {} and held(building) == {}


async def test_a_deletion_is_recorded_while_an_earlier_purge_waits_for_the_search_server(
    idle_pipeline: Pipeline, faulty: FaultyOpenSearch
) -> None:
    """The deletion lane records a batch's tombstones and takes the next batch; the purge
    follows as the batch's tail. With the search server holding every request, a second
    deletion on the same partition has its tombstone recorded (the document hidden) while
    the first purge still waits, and neither batch's offsets are committed before its
    purge: a crash then would run both steps again. The old lane recorded nothing more on
    that partition until the first purge ended."""
    p = idle_pipeline
    first, second = _same_partition(p, 2)
    tombstone = "SELECT count(*) FROM tombstones WHERE tenant_id = %s AND doc_id = %s"
    async with Runtime(p.settings.model_copy(update={"opensearch_url": faulty.url})) as rt:
        workers = Workers(rt, run=("indexer",))
        await workers.start()
        try:
            p.workers = workers
            docs = (first, second, "kept.md")
            await p.wait_processed(p.publish(*(p.change(d, 1, f"# {d}\nwords\n") for d in docs)))
            await p.wait_committed(timeout=120)
            faulty.hold()
            deletions = p.settings.topics.deletions
            p.publish(p.deletion(first, 2), topic=deletions)
            await until(_held(faulty), lambda n: n >= 1, 60, "the first purge, held")
            assert await _count(p, tombstone, p.tenant, first) == 1
            p.publish(p.deletion(second, 2), topic=deletions)
            await until(
                lambda: _count(p, tombstone, p.tenant, second), lambda n: n == 1, 30,
                "the second tombstone, recorded while the first purge waits",
            )  # fmt: skip
            assert faulty.held >= 1, "the first purge is still waiting"
            assert await p.rt.purges.receipt(p.tenant, first, 2) is None
            assert await p.rt.purges.receipt(p.tenant, second, 2) is None
            assert await p._indexer_lag() == 2, "a batch is committed only after its purge"
            faulty.release()
            assert await p.wait_purged(first, 2)
            assert await p.wait_purged(second, 2)
            await p.wait_committed(timeout=120)
        finally:
            p.workers = None
            faulty.release()
            await workers.stop()
    assert [d["doc_id"] for d in p.os_chunks()] == ["kept.md"]
    assert await p.pg_chunks(first) == [] and await p.pg_chunks(second) == []
    await p.assert_sinks_agree()


async def test_a_deletion_is_recorded_while_the_main_event_loop_is_blocked(
    idle_pipeline: Pipeline,
) -> None:
    """The deletion lane's consumer, pool and tombstone step run on a loop of their own
    thread: with the process's main loop (where the documents lanes parse, chunk and build
    bulks) held by a step that never yields, a deletion is still recorded, and the document
    hidden. The lane shared the main loop before, and recorded nothing until it was free.
    Its purge runs on the main loop, once that is free again."""
    p = idle_pipeline
    tombstone = "SELECT count(*) FROM tombstones WHERE tenant_id = %s AND doc_id = %s"
    async with Runtime(p.settings) as rt:
        workers = Workers(rt, run=("indexer",))
        await workers.start()
        try:
            p.workers = workers
            await p.wait_processed(p.publish(p.change("gone.md", 1, "# gone\nwords\n")))
            await p.wait_committed(timeout=120)
            assert p.settings.pg_dsn

            def blocking_step() -> int:
                """What a CPU-bound lane step does to the loop: hold it, here until the
                tombstone is seen (or 60 s), reading Postgres without the loop."""
                p.publish(p.deletion("gone.md", 2), topic=p.settings.topics.deletions)
                deadline = time.monotonic() + 60
                with psycopg.connect(p.settings.pg_dsn, autocommit=True) as conn:
                    while time.monotonic() < deadline:
                        row = conn.execute(tombstone, (p.tenant, "gone.md")).fetchone()
                        if row and row[0]:
                            return int(row[0])
                        time.sleep(0.05)
                return 0

            assert blocking_step() == 1, "the tombstone was recorded while the main loop was held"
            assert await p.wait_purged("gone.md", 2)
            await p.wait_committed(timeout=120)
        finally:
            p.workers = None
            await workers.stop()
    assert p.os_chunks() == []
    await p.assert_sinks_agree()


def _same_partition(p: Pipeline, n: int) -> list[str]:
    """`n` document names whose deletions the producer sends to one partition."""
    partitions = list(range(p.settings.partitions))
    by_partition: dict[int, list[str]] = {}
    for i in range(1000):
        name = f"d{i}.md"
        key = p.deletion(name, 2).key
        part = DefaultPartitioner()(key, partitions, partitions)
        by_partition.setdefault(part, []).append(name)
        if len(by_partition[part]) == n:
            return by_partition[part]
    raise AssertionError("no two names share a partition")


def _held(proxy: FaultyOpenSearch) -> Any:
    async def read() -> int:
        return proxy.held

    return read


async def test_an_operator_deletion_goes_above_what_the_index_applied(
    pipeline: Pipeline,
) -> None:
    """A document indexed from events its connector never emitted (an outside producer, a
    replay) is at a sequence the connector's ledger does not know. `govindex delete` used to
    emit its tombstone at the ledger's next sequence (1), stale against the index's 5, so
    the command said "emitted" and the document stayed."""
    from ingest.app import delete_one

    p = pipeline
    await p.wait_processed(p.publish(p.change("outside.md", 5, "# Outside\nkept words\n")))
    _, sequence = await delete_one(p.rt, p.source, "outside.md", "retired")
    assert sequence == 6
    await p.wait_purged("outside.md", 6)
    assert await p.pg_chunks("outside.md") == []


async def test_an_operator_deletion_is_published_by_the_command_itself(
    idle_pipeline: Pipeline,
) -> None:
    """`govindex delete` publishes its tombstone as soon as it is committed to the outbox:
    a worker's relay would publish it behind every row it has queued (under an ingest load,
    seconds). No worker runs here, so no relay: the row is published all the same, once."""
    from ingest.app import delete_one

    p = idle_pipeline
    _, sequence = await delete_one(p.rt, p.source, "operator.md", "retired")
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT topic, published_at IS NOT NULL, publish_count FROM outbox "
            "WHERE tenant_id = %s AND sequence = %s AND key LIKE %s",
            (p.tenant, sequence, "%operator.md"),
        )
        rows = await cur.fetchall()
    assert rows == [(p.settings.topics.deletions, True, 1)]


async def test_pause_waits_for_a_process_that_takes_long_to_stop_its_lanes(
    idle_pipeline: Pipeline,
) -> None:
    """A process stopping its lanes for six control polls still beats: `pause` returns
    once it reports them paused, and names it (it was taken for gone, and the command
    returned while the lanes still ran)."""
    from govindex.control.offsets import pause_workers
    from govindex.runtime.job_types import runner_id

    class SlowToStop(Workers):
        async def _stop_kind(self, kind: str) -> None:
            await asyncio.sleep(3.0)  # the last batch of a busy lane, a broker slow to answer
            await super()._stop_kind(kind)

    p = idle_pipeline
    fast = p.settings.model_copy(update={"control_poll_s": 0.5})
    async with Runtime(fast, pool_size=4) as rt:
        workers = SlowToStop(rt, run=("documents",))
        await workers.start()
        try:
            started = time.monotonic()
            named = await pause_workers(rt, "indexer", True, wait_s=60)
            assert named == [runner_id()]
            assert time.monotonic() - started >= 3.0
            assert "indexer" in workers._paused and "indexer" not in workers._consumers
            assert await pause_workers(rt, "indexer", False, wait_s=60) == [runner_id()]
            assert workers._consumers.get("indexer")
        finally:
            await rt.controls.set_paused("indexer", False, "test")
            await workers.stop()


async def test_the_indexers_two_lanes_run_in_processes_of_their_own(
    idle_pipeline: Pipeline, tmp_path: Path
) -> None:
    """`govindex worker documents` and `govindex worker deletions`: each runs one of the
    indexer's lanes and consumes nothing of the other's topic; `pause indexer` pauses both."""
    from govindex.control.deletions import DeletionLane
    from govindex.control.offsets import pause_workers

    p = idle_pipeline
    fast = p.settings.model_copy(update={"control_poll_s": 0.5})
    log = tmp_path / "deletions.log"
    async with Runtime(fast, pool_size=4) as rt:
        documents = Workers(rt, run=("documents",))
        await documents.start()
        deletions: subprocess.Popen[bytes] | None = None
        try:
            assert documents.kinds == ("indexer",)
            lanes = documents._consumers["indexer"]
            assert lanes and not any(isinstance(c, DeletionLane) for c in lanes)
            created = p.publish(p.change("two.md", 1, "# Two\nprocesses\n"))
            await p.wait_processed(created)
            deleted = p.publish(p.deletion("two.md", 2), topic=p.settings.topics.deletions)
            await asyncio.sleep(3.0)  # a documents-only process leaves the deletion alone
            assert await p._count_processed(deleted, "indexer") == 0
            assert len(await p.pg_chunks("two.md")) == 1

            deletions = _worker(p, log, "deletions", GOVINDEX_CONTROL_POLL_S="0.5")
            await p.wait_processed(deleted, timeout=180)
            await p.wait_purged("two.md", 2)
            assert await p.pg_chunks("two.md") == [] and p.os_chunks("two.md") == []
            # It ran the deletion lane only: nothing of the documents topic.
            assert '"lanes.assigned"' in log.read_text()
            again = p.publish(p.change("three.md", 1, "# Three\nafter\n"))
            await p.wait_processed(again)
            assert "three.md" not in log.read_text()

            # One flag, both processes: each reports the indexer paused, then resumed.
            named = await pause_workers(p.rt, "indexer", True, wait_s=60)
            beats = await p.rt.controls.alive(within_s=10)
            assert len(named) == 2  # a process still stopping its lanes is waited for
            assert [b.runner for b in beats if "indexer" in b.paused] == named
            assert "indexer" not in documents._consumers
            assert "workers.paused" in log.read_text()
            await pause_workers(p.rt, "indexer", False, wait_s=60)
            await until(
                _read(lambda: log.read_text().count('"workers.resumed"')), bool, 60, "a resume"
            )
            await until(_read(lambda: documents._consumers.get("indexer")), bool, 60, "lanes")
            assert any(isinstance(c, PartitionLanes) for c in documents._consumers["indexer"])
            after = p.publish(p.deletion("three.md", 2), topic=p.settings.topics.deletions)
            await p.wait_processed(after, timeout=120)  # the lane runs again
        except BaseException:
            print(log.read_text() if log.exists() else "(no log)")
            raise
        finally:
            if deletions is not None:
                deletions.terminate()
                deletions.wait(timeout=60)
            await documents.stop()
