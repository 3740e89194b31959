"""Purge latency under open-loop update load, at fixed fractions of measured capacity.

Starts its own embedded stack and an indexer + purger process (`govindex worker`, the
production entry point). First measures capacity: how many updates per second the indexer
drains from a pre-loaded backlog. Then, each scenario on the same stack:

  A. updates sent open-loop at 50 % of capacity, deletions at a steady rate;
  B. a backlog of 10,000 updates queued, then updates at 200 % of capacity (the backlog
     only grows), deletions at the same steady rate.

A deletion's latency runs from its production to the purge receipt, written after every
sink was read back empty. Targets (issue 11): p99 <= refresh interval (1 s) + 2 s in A,
and B's p99 at most 1 s above A's: deletions never wait behind updates.
Not a test: `make bench-purge`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from govindex.adapters.kafka_async import AsyncKafkaPublisher
from govindex.adapters.postgres.pool import migrate
from govindex.control.bootstrap import prepare
from govindex.core import events
from govindex.core.envelope import KafkaRecord, encode_document_event
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.logs import configure_logging
from govindex.core.records import SourceManifest
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.composition import Runtime

DOCS = 1000  # updated over and over
VICTIMS = 600  # deleted, 1 000 000 + n: never updated
CAPACITY_BACKLOG = 3000
BACKLOG = 10_000
DELETES_PER_S = 4.0
SCENARIO_S = float(os.environ.get("BENCH_SCENARIO_S", "40"))
TENANT, SOURCE = "bench", "bench-docs"
REFRESH_S = 1.0


def text(doc: int, version: int) -> str:
    body = " ".join(f"word{(doc * 7 + version + k) % 97}" for k in range(120))
    return f"# Doc {doc}\n\n## Section\n\n{body}\n\n## Steps\n\n1. First.\n2. Second v{version}.\n"


def change(doc: int, seq: int) -> KafkaRecord:
    t = text(doc, seq)
    return encode_document_event(
        events.DOCUMENT_UPDATED if seq > 1 else events.DOCUMENT_CREATED,
        DocumentChanged(
            tenant_id=TENANT,
            source_id=SOURCE,
            doc_id=f"d{doc}.md",
            source_version=f"v{seq}",
            sequence=seq,
            observed_at=datetime.now(UTC),
            content_hash=sha256_hex(t),
            content=t,
        ),
        op=f"v{seq}",
    )


def deletion(doc: int) -> KafkaRecord:
    payload = DocumentDeleted(
        tenant_id=TENANT,
        source_id=SOURCE,
        doc_id=f"d{doc}.md",
        source_version="bench-delete",
        sequence=2,
        deleted_at=datetime.now(UTC),
    )
    return encode_document_event(events.DOCUMENT_DELETED, payload, op="deleted")


class Load:
    """Sequences per document, so every update is a new version."""

    def __init__(self) -> None:
        self.sequences = dict.fromkeys(range(DOCS), 1)
        self.k = 0

    def next_update(self) -> KafkaRecord:
        doc = self.k % DOCS
        self.k += 1
        self.sequences[doc] += 1
        return change(doc, self.sequences[doc])


async def count(rt: Runtime, sql: str) -> int:
    async with rt.pool.connection() as conn:
        cur = await conn.execute(sql)  # type: ignore[arg-type]
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def wait_for(rt: Runtime, sql: str, want: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while await count(rt, sql) < want:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{sql!r} did not reach {want}")
        await asyncio.sleep(0.2)


APPLIED = "SELECT count(*) FROM processed_events WHERE consumer = 'indexer'"


async def capacity(rt: Runtime, publisher: AsyncKafkaPublisher, load: Load) -> float:
    """Updates/s the indexer drains from a backlog (deletions idle)."""
    before = await count(rt, APPLIED)
    records = [load.next_update() for _ in range(CAPACITY_BACKLOG)]
    await publisher.publish_many(rt.settings.topics.documents, records)
    started = time.perf_counter()
    await wait_for(rt, APPLIED, before + CAPACITY_BACKLOG)
    return CAPACITY_BACKLOG / (time.perf_counter() - started)


async def scenario(
    rt: Runtime,
    publisher: AsyncKafkaPublisher,
    load: Load,
    *,
    rate: float,
    backlog: int,
    victims: range,
) -> list[float]:
    """Open loop: updates at `rate`, deletions at DELETES_PER_S, for SCENARIO_S seconds;
    returns each deletion's latency to its verified receipt, in seconds."""
    topics = rt.settings.topics
    if backlog:
        for start in range(0, backlog, 1000):
            batch = [load.next_update() for _ in range(min(1000, backlog - start))]
            await publisher.publish_many(topics.documents, batch)
    produced: dict[str, float] = {}
    started = time.monotonic()
    sent_updates = 0
    pending = iter(victims)
    next_delete = started
    while (now := time.monotonic()) - started < SCENARIO_S:
        due = int((now - started) * rate) - sent_updates
        if due > 0:
            await publisher.publish_many(topics.documents, [load.next_update() for _ in range(due)])
            sent_updates += due
        if now >= next_delete:
            doc = next(pending)
            produced[f"d{doc}.md"] = time.time()
            await publisher.publish(topics.deletions, deletion(doc))
            next_delete += 1 / DELETES_PER_S
        await asyncio.sleep(0.02)
    deadline = time.monotonic() + 600
    while True:
        async with rt.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT doc_id, receipt->>'purged_at' FROM purge_receipts WHERE doc_id = ANY(%s)",
                (list(produced),),
            )
            rows = await cur.fetchall()
        if len(rows) >= len(produced) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    lag = await count(rt, APPLIED)
    print(f"    updates sent {sent_updates} (+{backlog} backlog); indexer applied so far {lag}")
    return sorted(
        datetime.fromisoformat(purged.replace("Z", "+00:00")).timestamp() - produced[doc]
        for doc, purged in rows
    )


def report(name: str, latencies: list[float]) -> float:
    q = statistics.quantiles(latencies, n=100)
    print(
        f"  {name}: {len(latencies)} purges  p50 {q[49] * 1000:6.0f} ms  "
        f"p95 {q[94] * 1000:6.0f} ms  p99 {q[98] * 1000:6.0f} ms  "
        f"max {latencies[-1] * 1000:6.0f} ms",
        flush=True,
    )
    return q[98]


def start_worker(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    """The production entry point: indexer (both lanes), purger and relay in one process."""
    return subprocess.Popen(
        [sys.executable, "-m", "govindex.cli.main", "worker", "indexer", "purger"],
        env={
            **os.environ,
            "GOVINDEX_PG_DSN": settings.pg_dsn or "",
            "GOVINDEX_KAFKA_BOOTSTRAP": settings.kafka_bootstrap or "",
            "GOVINDEX_OPENSEARCH_URL": settings.opensearch_url or "",
            "GOVINDEX_NAMESPACE": settings.namespace,
            "GOVINDEX_METRICS_PORT": "0",
        },
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


async def main() -> None:
    configure_logging(level="WARNING", json_output=True)
    root = Path(tempfile.mkdtemp(prefix="govindex-bench-"))
    stack = EmbeddedStack(root / "state", namespace="bench", durable=True)
    worker: subprocess.Popen[bytes] | None = None
    try:
        settings = Settings(state_dir=root / "state").model_copy(update=stack.start())
        assert settings.pg_dsn and settings.kafka_bootstrap
        await migrate(settings.pg_dsn)
        await prepare(settings)
        worker = start_worker(settings, root / "worker.log")
        publisher = AsyncKafkaPublisher(settings.kafka_bootstrap)
        await publisher.start()
        async with Runtime(settings) as rt:
            await rt.registry.register(
                SourceManifest.model_validate(
                    {
                        "source_id": SOURCE,
                        "tenant": TENANT,
                        "source_type": "folder",
                        "owner_team": "bench",
                        "classification": "internal",
                        "default_acl": ["group:b"],
                        "allowed_purposes": ["bench"],
                        "trust_level": "authoritative",
                    }
                )
            )
            victims = [change(1_000_000 + n, 1) for n in range(2 * VICTIMS)]
            first = [change(doc, 1) for doc in range(DOCS)]
            await publisher.publish_many(settings.topics.documents, victims + first)
            await wait_for(rt, APPLIED, len(victims) + len(first))
            load = Load()
            cap = await capacity(rt, publisher, load)
            print(f"capacity: {cap:.0f} updates/s (backlog of {CAPACITY_BACKLOG} drained)")
            await wait_for(rt, APPLIED, len(victims) + len(first) + CAPACITY_BACKLOG)
            print(f"A. 50 % of capacity ({cap / 2:.0f} updates/s), {DELETES_PER_S:g} deletes/s:")
            a = await scenario(
                rt,
                publisher,
                load,
                rate=cap / 2,
                backlog=0,
                victims=range(1_000_000, 1_000_000 + VICTIMS),
            )
            p99_a = report("A", a)
            print(
                f"B. backlog of {BACKLOG} updates, then 200 % of capacity "
                f"({cap * 2:.0f} updates/s), {DELETES_PER_S:g} deletes/s:"
            )
            b = await scenario(
                rt,
                publisher,
                load,
                rate=cap * 2,
                backlog=BACKLOG,
                victims=range(1_000_000 + VICTIMS, 1_000_000 + 2 * VICTIMS),
            )
            p99_b = report("B", b)
            target = REFRESH_S + 2
            print(
                f"targets: A p99 {p99_a:.2f} s <= {target:.0f} s: "
                f"{'met' if p99_a <= target else 'NOT met'}; "
                f"B p99 - A p99 = {p99_b - p99_a:+.2f} s <= 1 s: "
                f"{'met' if p99_b - p99_a <= 1 else 'NOT met'}"
            )
        await publisher.stop()
    finally:
        if worker is not None:  # it finishes its in-flight batches; the backlog is dropped
            worker.terminate()
            try:
                worker.wait(timeout=120)
            except subprocess.TimeoutExpired:
                worker.kill()
        stack.stop()
        if os.environ.get("BENCH_WORKER_LOG"):
            shutil.copy(root / "worker.log", os.environ["BENCH_WORKER_LOG"])
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
