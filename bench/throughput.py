"""Indexer throughput end to end, against what the sinks take in bulk, measured in one run.

A corpus of realistic runbooks is pre-loaded on a documents topic; indexer processes
(`govindex worker indexer`, the production entry point) are started and timed until the
group's offsets are committed to the end and Postgres and OpenSearch both hold every
chunk. Baselines on the same servers, same run, same stamped chunks:

  (a) a raw opensearch-py bulk of the chunks into an index with the same mapping: the
      indexer's own request bodies, serialized before the clock starts;
  (b) a COPY of the same rows into a table with the same indexes as `chunks`.

Targets: end to end (batched, one process) >= 0.8 x the raw bulk (a), worker CPU per
chunk batched <= 0.15 ms; with the stand-in sink, >= 3 x 2,470 chunks/s in one process
and two processes >= 1.7 x one. Also batch size 1, and (b) beside (a).
Not a test: `make bench-throughput`. BENCH_DOCS overrides the corpus size (default 20000).

`--sink standin` (or BENCH_SINK=standin) points the indexer processes at a loopback
stand-in (`bench/standin_sink.py`, a process of its own) that answers every request at
once and keeps nothing: the indexer's bulks cost nothing, so what is timed is its own
ceiling (parse, chunk, stamp, the Postgres apply, Kafka); two more runs there (one and
two processes) leave the dense channel out (GOVINDEX_EMBEDDER=none: no model, no HNSW
inserts). `--sink both` runs the real server first, then the stand-in, and prints the
two side by side. Default: `real`.

Each indexer run has a database of its own, and prints its worker CPU and PostgreSQL's
CPU a chunk: on a small machine the two share the cores, and PostgreSQL's share is mostly
the HNSW inserts of the dense channel.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from opensearchpy import AsyncOpenSearch
from psycopg import sql

from corpora import runbook
from govindex.adapters.kafka import OffsetReader
from govindex.adapters.kafka_async import AsyncKafkaPublisher
from govindex.adapters.opensearch import MAPPING, OpenSearchIndex
from govindex.adapters.postgres.chunks import CHUNK_COLUMNS, chunk_row
from govindex.adapters.postgres.pool import migrate
from govindex.control.bootstrap import prepare
from govindex.core import events
from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex
from govindex.core.logs import configure_logging
from govindex.core.records import Chunk, SourceManifest
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.composition import Runtime
from indexer.handlers import plan_version
from ingest.handlers import document_message

DOCS = int(os.environ.get("BENCH_DOCS", "20000"))
SMALL = max(DOCS // 20, 200)  # batch size 1 is slow: timed on a slice, compared by rate
SLICE = 500  # documents per baseline bulk / COPY transaction: the indexer's batch size
SINKS = ("real", "standin", "both")
TICK = os.sysconf("SC_CLK_TCK")
# Issue 27's targets: a third of the worker CPU per chunk measured when it was filed, and
# three times the stand-in ceiling of one process then (chunks/s).
CPU_TARGET_MS = 0.15
STANDIN_BEFORE = 2470


@dataclass(frozen=True)
class Timed:
    """One indexer run: seconds from the workers' start to everything committed; their CPU
    seconds in all (start-up included), and from their start on (`busy_cpu`); PostgreSQL's
    CPU seconds over the same span (every server process, the benchmark's own polls too)."""

    seconds: float
    cpu: float
    busy_cpu: float
    pg_cpu: float
    # With the dense channel after the commit: the workers' CPU seconds until everything
    # was committed (before the backlog drained), and the seconds until every chunk had
    # its vector; `busy_cpu` and `pg_cpu` then run to that second moment.
    indexed_cpu: float | None = None
    embedded_s: float | None = None


@dataclass(frozen=True)
class Ceiling:
    """One sink's figures: batch size 1 (chunks/s, on the small slice), then batched with
    one and with two processes over the whole corpus."""

    sink: str
    docs: int
    chunks: int
    single: float
    one: Timed
    two: Timed

    def rows(self) -> dict[str, float]:
        one, two = self.one, self.two
        return {
            "batched_1_proc_chunks_per_s": round(self.chunks / one.seconds),
            "batched_1_proc_docs_per_s": round(self.docs / one.seconds, 1),
            "batched_2_procs_chunks_per_s": round(self.chunks / two.seconds),
            "batched_2_procs_docs_per_s": round(self.docs / two.seconds, 1),
            "two_processes_over_one": round(one.seconds / two.seconds, 2),
            "worker_cpu_ms_per_chunk_1_proc": round(1000 * one.busy_cpu / self.chunks, 3),
            "worker_cpu_ms_per_chunk_2_procs": round(1000 * two.busy_cpu / self.chunks, 3),
            "postgres_cpu_ms_per_chunk_1_proc": round(1000 * one.pg_cpu / self.chunks, 3),
            "batch_size_1_chunks_per_s": round(self.single),
        }


def corpus(n: int) -> list[str]:
    rng = random.Random(11)
    return [runbook(i, rng) for i in range(n)]


def manifest(tenant: str) -> SourceManifest:
    return SourceManifest.model_validate(
        {
            "source_id": f"{tenant}-runbooks",
            "tenant": tenant,
            "source_type": "git",
            "owner_team": "platform",
            "classification": "internal",
            "default_acl": ["group:eng"],
            "allowed_purposes": ["support"],
            "trust_level": "authoritative",
        }
    )


def payload(tenant: str, n: int, text: str) -> DocumentChanged:
    return DocumentChanged(
        tenant_id=tenant,
        source_id=f"{tenant}-runbooks",
        doc_id=f"runbooks/rb-{n:05d}.md",
        path=f"runbooks/rb-{n:05d}.md",
        source_version=f"git:{n:040x}",
        sequence=1,
        observed_at=datetime(2026, 1, 1, tzinfo=UTC),
        content_hash=sha256_hex(text),
        content=text,
    )


def stamp(texts: list[str]) -> tuple[list[list[Chunk]], float]:
    """The chunks the indexer writes, and the CPU seconds parse+chunk+stamp took."""
    source = manifest("base")
    now = datetime.now(UTC)
    started = time.process_time()
    out = [
        list(plan_version(payload("base", n, t), t, source, generation=1, now=now).chunks)
        for n, t in enumerate(texts)
    ]
    return out, time.process_time() - started


async def bulk_baseline(url: str, per_doc: list[list[Chunk]]) -> float:
    """The server's own ceiling: the bodies the indexer sends (built by its own adapter,
    the same request sizes), serialized before the clock starts, posted one after another."""
    client = AsyncOpenSearch(hosts=[url], timeout=120)
    name = "bench-raw-bulk"
    writer = OpenSearchIndex(url, name)
    bodies = list(writer._bulk_bodies([c for doc in per_doc for c in doc], name))
    await writer.close()
    try:
        await client.indices.create(
            index=name,
            body={
                "settings": {"number_of_shards": 1, "number_of_replicas": 0},
                "mappings": MAPPING,
            },
        )
        started = time.perf_counter()
        for body in bodies:
            response = await client.bulk(body=body)
            assert not response.get("errors"), "the baseline bulk must take every chunk"
        await client.indices.refresh(index=name)
        return time.perf_counter() - started
    finally:
        await client.indices.delete(index=name, ignore_unavailable=True)
        await client.close()


async def copy_baseline(rt: Runtime, per_doc: list[list[Chunk]]) -> float:
    columns = ", ".join(CHUNK_COLUMNS)
    async with rt.pool.connection() as conn:
        await conn.execute("DROP TABLE IF EXISTS bench_copy")
        await conn.execute("CREATE TABLE bench_copy (LIKE chunks INCLUDING ALL)")
    started = time.perf_counter()
    for i in range(0, len(per_doc), SLICE):
        async with (
            rt.pool.connection() as conn,
            conn.transaction(),
            conn.cursor() as cur,
            cur.copy(f"COPY bench_copy ({columns}) FROM STDIN") as copy,
        ):
            for chunk in (c for doc in per_doc[i : i + SLICE] for c in doc):
                await copy.write_row(chunk_row(chunk))
    elapsed = time.perf_counter() - started
    async with rt.pool.connection() as conn:
        await conn.execute("DROP TABLE bench_copy")
    return elapsed


async def preload(settings: Settings, tenant: str, texts: list[str]) -> None:
    """Register the source and put every event on the documents topic."""
    await prepare(settings)
    async with Runtime(settings) as rt:
        await rt.registry.register(manifest(tenant))
    publisher = AsyncKafkaPublisher(settings.kafka_bootstrap or "")
    await publisher.start()
    try:
        for i in range(0, len(texts), 1000):
            records = [
                document_message(
                    settings.topics, events.DOCUMENT_CREATED, payload(tenant, n, t), "c"
                ).record
                for n, t in enumerate(texts[i : i + 1000], start=i)
            ]
            await publisher.publish_many(settings.topics.documents, records)
    finally:
        await publisher.stop()


def start_indexer(
    settings: Settings, batch: int, log: Path, *, dense: bool = True, deferred: bool = False
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "GOVINDEX_PG_DSN": settings.pg_dsn or "",
        "GOVINDEX_KAFKA_BOOTSTRAP": settings.kafka_bootstrap or "",
        "GOVINDEX_OPENSEARCH_URL": settings.opensearch_url or "",
        "GOVINDEX_NAMESPACE": settings.namespace,
        "GOVINDEX_BATCH_MAX_EVENTS": str(batch),
        "GOVINDEX_METRICS_PORT": "0",  # two workers on one host
        **({} if dense else {"GOVINDEX_EMBEDDER": "none"}),
        **(
            {"GOVINDEX_EMBED_DEFERRED": "true", "GOVINDEX_EMBED_BACKLOG_EVERY_S": "0.5"}
            if deferred
            else {}
        ),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "govindex.cli.main", "worker", "indexer", "--log-level", "INFO"],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


async def wait_started(logs: list[Path], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(p.exists() and b'"workers.started"' in p.read_bytes() for p in logs):
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the indexer processes did not start: " + logs[0].read_text()[-2000:])


async def done(
    rt: Runtime, settings: Settings, tenant: str, chunks: int, *, read_index: bool = True
) -> bool:
    """The group's offsets committed to the end and Postgres holding every chunk; with
    `read_index`, OpenSearch too. A stand-in holds nothing to read back, but the indexer
    commits a batch only once its bulk was answered, so the offsets say the bulks are done.
    The offsets are asked first: a count of the chunks on every poll took about 8 % of a
    core of PostgreSQL's, charged to the indexer's run."""
    reader = OffsetReader(settings.kafka_bootstrap or "")
    try:
        lag = reader.lag(settings.topics.documents, settings.group("indexer"))
    finally:
        reader.close()
    if not lag or any(p.lag > 0 for p in lag):
        return False
    async with rt.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM chunks WHERE tenant_id = %s", (tenant,))
        row = await cur.fetchone()
    if not row or row[0] < chunks:
        return False
    if read_index:
        await rt.index.refresh()
        found = await rt.index._client.count(  # read-back only
            index=settings.index_alias, body={"query": {"term": {"tenant_id": tenant}}}
        )
        if int(found["count"]) < chunks:
            return False
    return True


async def embedded(rt: Runtime, chunks: int) -> bool:
    """Every chunk with its vector and the backlog empty (the dense channel after the
    commit has caught up)."""
    async with rt.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM embedding_backlog), (SELECT count(*) FROM chunk_vectors)"
        )
        row = await cur.fetchone()
    return row is not None and row[0] == 0 and row[1] >= chunks


async def fresh_database(base: Settings, name: str) -> str:
    """A new, migrated database for one run, and its DSN: every run starts from empty
    tables. In one database, each run's vectors would grow the HNSW graph the next run
    inserts into (and `prepare` would copy every earlier run's chunks into the new
    namespace's index)."""
    assert base.pg_dsn
    database = f"bench_{name}"
    async with await psycopg.AsyncConnection.connect(base.pg_dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(database)))
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    dsn = urlunsplit(urlsplit(base.pg_dsn)._replace(path=f"/{database}"))
    await migrate(dsn)
    return dsn


def proc_cpu(pid: int) -> float:
    """CPU seconds a live process (and the children it reaped) used so far; 0 without
    /proc. Sampled once the workers have started, it leaves their start-up out."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime


def tree_cpu(pid: int) -> float:
    """CPU seconds of a live process and of its live children (a server's sessions), with
    what the children it reaped used: PostgreSQL's postmaster and backends."""
    total = proc_cpu(pid)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # ppid
            total += sum(int(f) for f in fields[11:13]) / TICK
    return total


async def indexer_run(
    base: Settings,
    root: Path,
    name: str,
    texts: list[str],
    chunks: int,
    batch: int,
    procs: int,
    sink: str | None = None,
    *,
    pg_pid: int,
    dense: bool = True,
    deferred: bool = False,
) -> Timed:
    """The workers' run, from their start to everything committed. With `sink` (a
    stand-in's URL), the bootstrap and the workers use it instead of the real server.
    Without `dense`, the workers embed nothing (GOVINDEX_EMBEDDER=none): no vectors, so no
    HNSW inserts in PostgreSQL. With `deferred` (GOVINDEX_EMBED_DEFERRED), chunks are
    committed without vectors and the workers' backlog loop embeds them: the run is timed
    to everything committed and on to every chunk embedded."""
    update: dict[str, Any] = {"namespace": name, "pg_dsn": await fresh_database(base, name)}
    if sink is not None:
        update["opensearch_url"] = sink
    settings = base.model_copy(update=update)
    await preload(settings, name, texts)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    logs = [root / f"{name}-{i}.log" for i in range(procs)]
    workers = [start_indexer(settings, batch, log, dense=dense, deferred=deferred) for log in logs]
    try:
        await wait_started(logs)
        startup = sum(proc_cpu(w.pid) for w in workers)
        pg_before = tree_cpu(pg_pid)
        started = time.perf_counter()
        async with Runtime(settings) as rt:
            read_index = sink is None
            while not await done(rt, settings, name, chunks, read_index=read_index):  # noqa: ASYNC110 - polling servers
                await asyncio.sleep(0.25)
            elapsed = time.perf_counter() - started
            indexed_cpu = sum(proc_cpu(w.pid) for w in workers) - startup
            while deferred and not await embedded(rt, chunks):  # noqa: ASYNC110 - polling
                await asyncio.sleep(0.25)
            embedded_s = time.perf_counter() - started
        pg_cpu = tree_cpu(pg_pid) - pg_before
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait(timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if not deferred:
        return Timed(elapsed, cpu, cpu - startup, pg_cpu)
    return Timed(elapsed, cpu, cpu - startup, pg_cpu, indexed_cpu, embedded_s)


def start_standin() -> tuple[subprocess.Popen[bytes], str]:
    """The stand-in sink in a process of its own, and its URL. It lives until the end of
    the run: reaped earlier, its CPU would count as a worker's (RUSAGE_CHILDREN)."""
    script = Path(__file__).with_name("standin_sink.py")
    proc = subprocess.Popen([sys.executable, str(script), "--port", "0"], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"the stand-in sink did not start: {line!r}")
    return proc, line.split()[-1]


def line(label: str, chunks: int, run: Timed, note: str = "") -> None:
    """One run's figures: chunks/s, then the worker's and PostgreSQL's CPU per chunk; with
    the dense channel after the commit, the worker's CPU a chunk until everything was
    committed, then the rate and both CPUs a chunk until every chunk was embedded."""
    if run.indexed_cpu is not None and run.embedded_s is not None:
        print(
            f"  {label:31}{chunks / run.seconds:9.0f} chunks/s   worker "
            f"{1000 * run.indexed_cpu / chunks:.3f} ms CPU a chunk committed; all embedded "
            f"after {run.embedded_s:.0f} s ({chunks / run.embedded_s:.0f} chunks/s): worker "
            f"{1000 * run.busy_cpu / chunks:.3f} ms, PostgreSQL {1000 * run.pg_cpu / chunks:.3f}"
            f" ms CPU a chunk{note}",
            flush=True,
        )
        return
    print(
        f"  {label:31}{chunks / run.seconds:9.0f} chunks/s   worker "
        f"{1000 * run.busy_cpu / chunks:.3f} ms, PostgreSQL {1000 * run.pg_cpu / chunks:.3f} "
        f"ms CPU a chunk{note}",
        flush=True,
    )


async def real_runs(
    base: Settings,
    root: Path,
    texts: list[str],
    per_doc: list[list[Chunk]],
    stamp_cpu: float,
    pg_pid: int,
) -> Ceiling:
    """The baselines and the indexer against the embedded server: the default mode."""
    assert base.opensearch_url
    total = sum(len(d) for d in per_doc)
    small = sum(len(d) for d in per_doc[:SMALL])
    bulk_s = await bulk_baseline(base.opensearch_url, per_doc)
    print(f"  (a) raw opensearch-py bulk     {total / bulk_s:9.0f} chunks/s", flush=True)
    async with Runtime(base) as rt:
        copy_s = await copy_baseline(rt, per_doc)
    print(f"  (b) COPY into chunks' twin     {total / copy_s:9.0f} chunks/s", flush=True)
    floor = min(total / bulk_s, total / copy_s)
    one = await indexer_run(base, root, "bone", texts[:SMALL], small, 1, 1, pg_pid=pg_pid)
    rate_one = small / one.seconds
    line("indexer, batch size 1, 1 proc", small, one, f" ({SMALL} docs)")
    b1 = await indexer_run(base, root, "bbat", texts, total, 500, 1, pg_pid=pg_pid)
    rate_b1 = total / b1.seconds
    line("indexer, batched, 1 process", total, b1)
    b2 = await indexer_run(base, root, "btwo", texts, total, 500, 2, pg_pid=pg_pid)
    rate_b2 = total / b2.seconds
    line("indexer, batched, 2 processes", total, b2)
    after = await indexer_run(
        base, root, "bafter", texts, total, 500, 1, pg_pid=pg_pid, deferred=True
    )
    line("indexer, 1 proc, dense after", total, after)
    print(
        json.dumps(
            {
                "batched_over_min_baseline": round(rate_b1 / floor, 2),
                "batched_over_raw_bulk": round(rate_b1 * bulk_s / total, 2),
                "batched_over_batch_size_1": round(rate_b1 / rate_one, 1),
                "two_processes_over_one": round(rate_b2 / rate_b1, 2),
                "parse_chunk_stamp_share_of_indexer_cpu": round(stamp_cpu / b1.cpu, 2),
            }
        )
    )
    cpu_ms = 1000 * b1.busy_cpu / total
    print(
        f"targets: end to end / raw bulk (a) = {rate_b1 * bulk_s / total:.2f} (>= 0.8); "
        f"worker CPU per chunk batched = {cpu_ms:.3f} ms (<= {CPU_TARGET_MS})"
    )
    return Ceiling("real", len(texts), total, rate_one, b1, b2)


async def standin_runs(
    base: Settings,
    root: Path,
    texts: list[str],
    per_doc: list[list[Chunk]],
    sink: str,
    pg_pid: int,
) -> Ceiling:
    """The same indexer runs with every bulk answered at once by the stand-in; then one
    and two processes once more without the dense channel, which takes the model and
    PostgreSQL's HNSW inserts out and leaves the rest of the indexer's ceiling (with them,
    PostgreSQL's CPU alone can fill the machine's cores, and a second process has none
    left to use)."""
    total = sum(len(d) for d in per_doc)
    small = sum(len(d) for d in per_doc[:SMALL])
    one = await indexer_run(base, root, "sone", texts[:SMALL], small, 1, 1, sink, pg_pid=pg_pid)
    rate_one = small / one.seconds
    line("stand-in, batch size 1, 1 proc", small, one, f" ({SMALL} docs)")
    b1 = await indexer_run(base, root, "sbat", texts, total, 500, 1, sink, pg_pid=pg_pid)
    line("stand-in, batched, 1 process", total, b1)
    b2 = await indexer_run(base, root, "stwo", texts, total, 500, 2, sink, pg_pid=pg_pid)
    line("stand-in, batched, 2 processes", total, b2)
    flat = await indexer_run(
        base, root, "sflat", texts, total, 500, 1, sink, pg_pid=pg_pid, dense=False
    )
    line("stand-in, 1 process, no dense", total, flat)
    flat2 = await indexer_run(
        base, root, "sflat2", texts, total, 500, 2, sink, pg_pid=pg_pid, dense=False
    )
    line("stand-in, 2 processes, no dense", total, flat2)
    after = await indexer_run(
        base, root, "safter", texts, total, 500, 1, sink, pg_pid=pg_pid, deferred=True
    )
    line("stand-in, 1 proc, dense after", total, after)
    after2 = await indexer_run(
        base, root, "safter2", texts, total, 500, 2, sink, pg_pid=pg_pid, deferred=True
    )
    line("stand-in, 2 procs, dense after", total, after2)
    print(
        f"targets: stand-in chunks/s, 1 process = {total / b1.seconds:.0f} "
        f"(>= {3 * STANDIN_BEFORE}, 3 x {STANDIN_BEFORE}); "
        f"two processes / one = {b1.seconds / b2.seconds:.2f} (>= 1.7); worker CPU per chunk "
        f"= {1000 * b1.busy_cpu / total:.3f} ms (<= {CPU_TARGET_MS}); without the dense "
        f"channel {total / flat.seconds:.0f} chunks/s, {1000 * flat.busy_cpu / total:.3f} ms, "
        f"two processes / one {flat.seconds / flat2.seconds:.2f}"
    )
    return Ceiling("standin", len(texts), total, rate_one, b1, b2)


def print_ceilings(figures: list[Ceiling]) -> None:
    """The indexer's figures per sink, side by side, then as JSON."""
    rows = {f.sink: f.rows() for f in figures}
    print(f"{'indexer per sink':33}" + "".join(f"{f.sink:>12}" for f in figures))
    for key in rows[figures[0].sink]:
        print(f"  {key:31}" + "".join(f"{rows[f.sink][key]:>12}" for f in figures))
    print(json.dumps(rows))


async def main(sink: str) -> None:
    configure_logging(level="WARNING", json_output=True)
    root = Path(tempfile.mkdtemp(prefix="govindex-bench-"))
    stack = EmbeddedStack(root / "state", namespace="bench", durable=True)
    standin: subprocess.Popen[bytes] | None = None
    try:
        base = Settings(state_dir=root / "state").model_copy(update=stack.start())
        assert base.pg_dsn and base.opensearch_url
        await migrate(base.pg_dsn)
        pg_pid = stack.processes["postgres"].pid
        texts = corpus(DOCS)
        per_doc, stamp_cpu = stamp(texts)
        total = sum(len(d) for d in per_doc)
        mb = sum(len(t.encode()) for t in texts) / 1e6
        print(f"corpus: {DOCS} documents, {mb:.1f} MB, {total} chunks", flush=True)
        figures: list[Ceiling] = []
        if sink in ("real", "both"):
            figures.append(await real_runs(base, root, texts, per_doc, stamp_cpu, pg_pid))
        if sink in ("standin", "both"):
            standin, url = start_standin()
            figures.append(await standin_runs(base, root, texts, per_doc, url, pg_pid))
            print_ceilings(figures)
    finally:
        if standin is not None:
            standin.terminate()
            standin.wait(timeout=30)
        stack.stop(discard=True)
        shutil.rmtree(root, ignore_errors=True)


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--sink",
        choices=SINKS,
        default=os.environ.get("BENCH_SINK", "real"),
        help="where the indexer's bulks go: the embedded server (real), a loopback "
        "stand-in that answers at once (standin), or one then the other (both)",
    )
    args = parser.parse_args()
    if args.sink not in SINKS:  # a default from BENCH_SINK is not checked by argparse
        parser.error(f"BENCH_SINK must be one of {', '.join(SINKS)}, not {args.sink!r}")
    return args


if __name__ == "__main__":
    asyncio.run(main(options().sink))
