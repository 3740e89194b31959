"""Purge latency under open-loop update load, at fixed fractions of measured capacity.

Starts its own embedded stack and the workers as production runs them (`govindex worker`):
the deletion lane in a process of its own, the documents lanes and the purger in another
(BENCH_DELETION_LANE=inline: all in one process, the lane on a thread of its own). First
measures capacity: how many updates per second the indexer drains from a pre-loaded
backlog. Then, each scenario on the same stack:

  A. updates sent open-loop at 50 % of capacity, deletions at a steady rate;
  B. a backlog of 10,000 updates queued, then updates at 200 % of capacity (the backlog
     only grows), deletions at the same steady rate.

Each deletion is timed from its production to two moments:
- its tombstone visible in Postgres (polled every 20 ms), the moment every read stops
  serving the document: target p99 <= 0.5 s in A and in B;
- its purge receipt, written after every sink was read back empty; printed beside the
  search server's own delete-and-refresh latency, probed under the same load (the purge
  waits for that server, which serves one request at a time).
And as an operator sees it: `govindex delete` run as a process every few seconds, from its
start to its exit (the command's own round trip) and to the tombstone visible; target: the
second within 0.5 s of the first at p99.
The deletion lane's own log splits each batch's time: from its oldest deletion's time to
the tombstone step's start, and the step itself. Not a test: `make bench-purge`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from opensearchpy import OpenSearch

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
TARGET_S = 0.5  # delete -> tombstone visible, p99
POLL_S = 0.02
PROBE_EVERY_S = 0.5
CLI_EVERY_S = 3.0
WORKER_LOG: Path | None = None  # the worker's log, while `worker_stack` runs


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


@dataclass
class Timings:
    """One scenario's figures, in seconds."""

    visible: list[float] = field(default_factory=list)  # delete produced -> tombstone seen
    receipt: list[float] = field(default_factory=list)  # delete produced -> purge receipt
    server: list[float] = field(default_factory=list)  # the server's delete + refresh
    cli_round_trip: list[float] = field(default_factory=list)  # `govindex delete`, start to exit
    cli_visible: list[float] = field(default_factory=list)  # its start -> tombstone seen
    # The deletion lane's own view, from its log: per batch, from its oldest deletion's time
    lane_waited: list[float] = field(default_factory=list)  # -> the tombstone step's start
    lane_step: list[float] = field(default_factory=list)  # the step (one transaction)
    lane_hidden: list[float] = field(default_factory=list)  # -> its commit


class Tombstones:
    """Polls Postgres for the tombstones of deletions sent: when each became visible."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.waiting: set[str] = set()
        self.seen: dict[str, float] = {}

    async def run(self, stop: asyncio.Event) -> None:
        """Until stopped and every tombstone is seen, or 120 s after the stop at most."""
        deadline: float | None = None
        while not stop.is_set() or self.waiting:
            if stop.is_set():
                deadline = deadline or time.monotonic() + 120
                if time.monotonic() > deadline:
                    print(f"    never visible: {sorted(self.waiting)}", flush=True)
                    return
            if self.waiting:
                async with self.rt.pool.connection() as conn:
                    cur = await conn.execute(
                        "SELECT doc_id FROM tombstones WHERE tenant_id = %s AND source_id = %s "
                        "AND doc_id = ANY(%s)",
                        (TENANT, SOURCE, list(self.waiting)),
                    )
                    now = time.time()
                    for (doc,) in await cur.fetchall():
                        self.seen[doc] = now
                        self.waiting.discard(doc)
            await asyncio.sleep(POLL_S)


async def probe_server(settings: Settings, stop: asyncio.Event, out: list[float]) -> None:
    """The search server's own delete of one id and refresh, as the purge asks for it."""
    assert settings.opensearch_url
    client = OpenSearch(settings.opensearch_url, timeout=60)
    n = 0
    while not stop.is_set():
        n += 1
        started = time.perf_counter()
        await asyncio.to_thread(
            client.delete,
            index=settings.index_alias,
            id=f"probe-{n}",
            params={"refresh": "wait_for", "ignore": 404},
        )
        out.append(time.perf_counter() - started)
        await asyncio.sleep(PROBE_EVERY_S)
    client.close()


async def cli_delete(settings: Settings, doc: str) -> float:
    """`govindex delete` as an operator runs it: its round trip, in seconds."""
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "govindex.cli.main", "delete", "--source", SOURCE,
        "--doc", doc, "--reason", "bench", env=worker_env(settings),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"govindex delete failed: {err.decode()[-500:]}")
    return time.perf_counter() - started


async def scenario(
    rt: Runtime,
    publisher: AsyncKafkaPublisher,
    load: Load,
    *,
    rate: float,
    backlog: int,
    victims: range,
) -> Timings:
    """Open loop: updates at `rate`, deletions at DELETES_PER_S and one `govindex delete`
    every CLI_EVERY_S, for SCENARIO_S seconds, with the server probed beside them."""
    topics, out = rt.settings.topics, Timings()
    if backlog:
        for start in range(0, backlog, 1000):
            batch = [load.next_update() for _ in range(min(1000, backlog - start))]
            await publisher.publish_many(topics.documents, batch)
    produced: dict[str, float] = {}
    cli_started: dict[str, float] = {}
    tombstones, stop = Tombstones(rt), asyncio.Event()
    background = [
        asyncio.create_task(tombstones.run(stop)),
        asyncio.create_task(probe_server(rt.settings, stop, out.server)),
    ]
    cli_runs: list[asyncio.Task[float]] = []
    started, scenario_started = time.monotonic(), datetime.now(UTC)
    sent_updates = 0
    pending = iter(victims)
    next_delete = next_cli = started
    while (now := time.monotonic()) - started < SCENARIO_S:
        due = int((now - started) * rate) - sent_updates
        if due > 0:
            await publisher.publish_many(topics.documents, [load.next_update() for _ in range(due)])
            sent_updates += due
        if now >= next_delete:
            doc = f"d{next(pending)}.md"
            tombstones.waiting.add(doc)
            produced[doc] = time.time()
            await publisher.publish(topics.deletions, deletion(int(doc[1:-3])))
            next_delete += 1 / DELETES_PER_S
        if now >= next_cli:
            doc = f"d{next(pending)}.md"
            tombstones.waiting.add(doc)
            cli_started[doc] = time.time()
            cli_runs.append(asyncio.create_task(cli_delete(rt.settings, doc)))
            next_cli += CLI_EVERY_S
        await asyncio.sleep(0.02)
    out.cli_round_trip = sorted(await asyncio.gather(*cli_runs))
    stop.set()
    await asyncio.gather(*background)
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
    out.receipt = sorted(
        datetime.fromisoformat(purged.replace("Z", "+00:00")).timestamp() - produced[doc]
        for doc, purged in rows
    )
    seen = tombstones.seen
    out.visible = sorted(seen[d] - t for d, t in produced.items() if d in seen)
    out.cli_visible = sorted(seen[d] - t for d, t in cli_started.items() if d in seen)
    out.server.sort()
    lane_view(out, since=scenario_started)
    return out


def lane_view(out: Timings, *, since: datetime) -> None:
    """The deletion lane's `deletions.recorded` lines logged since `since`: where a
    deletion's time went before the bench saw its tombstone (BENCH_WORKER_LOG keeps them)."""
    if WORKER_LOG is None or not WORKER_LOG.exists():
        return
    with WORKER_LOG.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if '"deletions.recorded"' not in line:
                continue
            try:
                entry = json.loads(line)
                at = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
            except (ValueError, KeyError):
                continue
            if at < since or entry.get("hidden_s") is None:
                continue
            out.lane_waited.append(entry["waited_s"])
            out.lane_step.append(entry["tombstones_s"])
            out.lane_hidden.append(entry["hidden_s"])
    for values in (out.lane_waited, out.lane_step, out.lane_hidden):
        values.sort()


def quantiles(values: list[float]) -> tuple[float, float, float]:
    """p50, p95, p99 (for few values the upper ones approach the largest)."""
    if len(values) < 2:
        return (values[0],) * 3 if values else (float("nan"),) * 3
    q = statistics.quantiles(values, n=100, method="inclusive")
    return q[49], q[94], q[98]


def report(name: str, t: Timings) -> float:
    """Prints the scenario's lines; returns its tombstone-visible p99."""
    for what, values in (
        ("delete -> tombstone visible", t.visible),
        ("delete -> verified receipt", t.receipt),
        ("server delete + refresh", t.server),
        ("`govindex delete` round trip", t.cli_round_trip),
        ("`govindex delete` -> visible", t.cli_visible),
        ("lane: deletion -> step start", t.lane_waited),
        ("lane: tombstone step", t.lane_step),
        ("lane: deletion -> committed", t.lane_hidden),
    ):
        p50, p95, p99 = quantiles(values)
        print(
            f"  {name}: {what:<30} n={len(values):<4} p50 {p50 * 1000:6.0f} ms  "
            f"p95 {p95 * 1000:6.0f} ms  p99 {p99 * 1000:6.0f} ms  "
            f"max {max(values, default=float('nan')) * 1000:6.0f} ms",
            flush=True,
        )
    return quantiles(t.visible)[2]


def manifest(tenant: str, source: str) -> SourceManifest:
    """A folder source readable by `group:b` for the purpose `bench`."""
    return SourceManifest.model_validate(
        {
            "source_id": source,
            "tenant": tenant,
            "source_type": "folder",
            "owner_team": "bench",
            "classification": "internal",
            "default_acl": ["group:b"],
            "allowed_purposes": ["bench"],
            "trust_level": "authoritative",
        }
    )


def worker_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "GOVINDEX_PG_DSN": settings.pg_dsn or "",
        "GOVINDEX_KAFKA_BOOTSTRAP": settings.kafka_bootstrap or "",
        "GOVINDEX_OPENSEARCH_URL": settings.opensearch_url or "",
        "GOVINDEX_NAMESPACE": settings.namespace,
        "GOVINDEX_METRICS_PORT": "0",
    }


# BENCH_DELETION_LANE=inline runs the deletion lane on a thread of the indexer's process
# (`govindex worker indexer purger`); by default it has a process of its own, as
# production should run it (`govindex worker documents purger` + `govindex worker deletions`).
INLINE = os.environ.get("BENCH_DELETION_LANE", "own") == "inline"


def start_workers(settings: Settings, log: Path) -> list[subprocess.Popen[bytes]]:
    """The production entry point: the indexer's lanes, the purger and a relay in each
    process. The deletion lane's log (the only one, inline) goes to `log`."""
    layout = [["indexer", "purger"]] if INLINE else [["deletions"], ["documents", "purger"]]
    return [
        subprocess.Popen(
            [sys.executable, "-m", "govindex.cli.main", "worker", *kinds],
            env=worker_env(settings),
            stdout=(log if n == 0 else log.with_suffix(f".{n}.log")).open("wb"),
            stderr=subprocess.STDOUT,
        )
        for n, kinds in enumerate(layout)
    ]


@contextlib.asynccontextmanager
async def worker_stack(*sources: str) -> AsyncIterator[tuple[Runtime, AsyncKafkaPublisher]]:
    """A durable embedded stack (discarded after), the worker processes (`start_workers`),
    a Runtime and a publisher, with `sources` registered for TENANT.
    BENCH_WORKER_LOG=FILE keeps the deletion lane's log."""
    root = Path(tempfile.mkdtemp(prefix="govindex-bench-"))
    stack = EmbeddedStack(root / "state", namespace="bench", durable=True)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        settings = Settings(state_dir=root / "state").model_copy(update=stack.start())
        assert settings.pg_dsn and settings.kafka_bootstrap
        await migrate(settings.pg_dsn)
        await prepare(settings)
        global WORKER_LOG
        WORKER_LOG = root / "worker.log"
        workers = start_workers(settings, WORKER_LOG)
        publisher = AsyncKafkaPublisher(settings.kafka_bootstrap)
        await publisher.start()
        try:
            async with Runtime(settings) as rt:
                for source in sources:
                    await rt.registry.register(manifest(TENANT, source))
                yield rt, publisher
        finally:
            await publisher.stop()
    finally:
        for worker in workers:  # each finishes its in-flight batches; the backlog is dropped
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=120)
            except subprocess.TimeoutExpired:
                worker.kill()
        stack.stop(discard=True)
        if os.environ.get("BENCH_WORKER_LOG"):
            shutil.copy(root / "worker.log", os.environ["BENCH_WORKER_LOG"])
        shutil.rmtree(root, ignore_errors=True)


async def main() -> None:
    configure_logging(level="WARNING", json_output=True)
    async with worker_stack(SOURCE) as (rt, publisher):
        settings = rt.settings
        victims = [change(1_000_000 + n, 1) for n in range(2 * VICTIMS)]
        first = [change(doc, 1) for doc in range(DOCS)]
        await publisher.publish_many(settings.topics.documents, victims + first)
        await wait_for(rt, APPLIED, len(victims) + len(first))
        load = Load()
        cap = await capacity(rt, publisher, load)
        layout = "inline, on a thread" if INLINE else "in a process of its own"
        print(f"deletion lane: {layout}")
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
        print(
            "targets: delete -> tombstone visible p99 <= "
            f"{TARGET_S:g} s: A {p99_a:.2f} s {'met' if p99_a <= TARGET_S else 'NOT met'}, "
            f"B {p99_b:.2f} s {'met' if p99_b <= TARGET_S else 'NOT met'}"
        )
        for name, t in (("A", a), ("B", b)):
            gap = quantiles(t.cli_visible)[2] - quantiles(t.cli_round_trip)[2]
            print(
                f"  {name}: `govindex delete` -> visible p99 minus its round trip p99 = "
                f"{gap:+.2f} s <= {TARGET_S:g} s: {'met' if gap <= TARGET_S else 'NOT met'}"
            )


if __name__ == "__main__":
    asyncio.run(main())
