"""Indexer throughput end to end, against what the sinks take in bulk, measured in one run.

A corpus of realistic runbooks is pre-loaded on a documents topic; indexer processes
(`govindex worker indexer`, the production entry point) are started and timed until the
group's offsets are committed to the end and Postgres and OpenSearch both hold every
chunk. Baselines on the same servers, same run, same stamped chunks:

  (a) a raw opensearch-py bulk of the chunks into an index with the same mapping;
  (b) a COPY of the same rows into a table with the same indexes as `chunks`.

Targets (issue 11): batched >= 0.6 x min(a, b), and >= 10 x the same indexer with
batch size 1. Also one and two indexer processes. Not a test: `make bench-throughput`.
BENCH_DOCS overrides the corpus size (default 20000).
"""

from __future__ import annotations

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opensearchpy import AsyncOpenSearch

from corpora import runbook
from govindex.adapters.kafka import OffsetReader
from govindex.adapters.kafka_async import AsyncKafkaPublisher
from govindex.adapters.opensearch import MAPPING
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
    client = AsyncOpenSearch(hosts=[url], timeout=120)
    name = "bench-raw-bulk"
    try:
        await client.indices.create(
            index=name,
            body={
                "settings": {"number_of_shards": 1, "number_of_replicas": 0},
                "mappings": MAPPING,
            },
        )
        started = time.perf_counter()
        for i in range(0, len(per_doc), SLICE):
            lines: list[dict[str, Any]] = []
            for chunk in (c for doc in per_doc[i : i + SLICE] for c in doc):
                lines.append(
                    {
                        "index": {
                            "_index": name,
                            "_id": chunk.chunk_id,
                            "version": chunk.sequence,
                            "version_type": "external",
                        }
                    }
                )
                lines.append(chunk.model_dump(mode="json"))
            response = await client.bulk(body=lines)
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


def start_indexer(settings: Settings, batch: int, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "GOVINDEX_PG_DSN": settings.pg_dsn or "",
        "GOVINDEX_KAFKA_BOOTSTRAP": settings.kafka_bootstrap or "",
        "GOVINDEX_OPENSEARCH_URL": settings.opensearch_url or "",
        "GOVINDEX_NAMESPACE": settings.namespace,
        "GOVINDEX_BATCH_MAX_EVENTS": str(batch),
        "GOVINDEX_METRICS_PORT": "0",  # two workers on one host
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


async def done(rt: Runtime, settings: Settings, tenant: str, chunks: int) -> bool:
    async with rt.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM chunks WHERE tenant_id = %s", (tenant,))
        row = await cur.fetchone()
    if not row or row[0] < chunks:
        return False
    await rt.index.refresh()
    found = await rt.index._client.count(  # read-back only
        index=settings.index_alias, body={"query": {"term": {"tenant_id": tenant}}}
    )
    if int(found["count"]) < chunks:
        return False
    reader = OffsetReader(settings.kafka_bootstrap or "")
    try:
        lag = reader.lag(settings.topics.documents, settings.group("indexer"))
    finally:
        reader.close()
    return all(p.lag <= 0 for p in lag)


async def indexer_run(
    base: Settings, root: Path, name: str, texts: list[str], chunks: int, batch: int, procs: int
) -> tuple[float, float]:
    """Seconds from the workers' start to everything committed, and their CPU seconds."""
    settings = base.model_copy(update={"namespace": name})
    await preload(settings, name, texts)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    logs = [root / f"{name}-{i}.log" for i in range(procs)]
    workers = [start_indexer(settings, batch, log) for log in logs]
    try:
        await wait_started(logs)
        started = time.perf_counter()
        async with Runtime(settings) as rt:
            while not await done(rt, settings, name, chunks):  # noqa: ASYNC110 - polling servers
                await asyncio.sleep(0.25)
        elapsed = time.perf_counter() - started
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait(timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


async def main() -> None:
    configure_logging(level="WARNING", json_output=True)
    root = Path(tempfile.mkdtemp(prefix="govindex-bench-"))
    stack = EmbeddedStack(root / "state", namespace="bench", durable=True)
    try:
        base = Settings(state_dir=root / "state").model_copy(update=stack.start())
        assert base.pg_dsn and base.opensearch_url
        await migrate(base.pg_dsn)
        texts = corpus(DOCS)
        per_doc, stamp_cpu = stamp(texts)
        total = sum(len(d) for d in per_doc)
        small = sum(len(d) for d in per_doc[:SMALL])
        mb = sum(len(t.encode()) for t in texts) / 1e6
        print(f"corpus: {DOCS} documents, {mb:.1f} MB, {total} chunks", flush=True)
        bulk_s = await bulk_baseline(base.opensearch_url, per_doc)
        print(f"  (a) raw opensearch-py bulk     {total / bulk_s:9.0f} chunks/s", flush=True)
        async with Runtime(base) as rt:
            copy_s = await copy_baseline(rt, per_doc)
        print(f"  (b) COPY into chunks' twin     {total / copy_s:9.0f} chunks/s", flush=True)
        floor = min(total / bulk_s, total / copy_s)
        one_s, _ = await indexer_run(base, root, "bone", texts[:SMALL], small, 1, 1)
        rate_one = small / one_s
        print(f"  indexer, batch size 1, 1 proc  {rate_one:9.0f} chunks/s ({SMALL} docs)")
        b1_s, b1_cpu = await indexer_run(base, root, "bbat", texts, total, 500, 1)
        rate_b1 = total / b1_s
        print(f"  indexer, batched, 1 process    {rate_b1:9.0f} chunks/s", flush=True)
        b2_s, _ = await indexer_run(base, root, "btwo", texts, total, 500, 2)
        rate_b2 = total / b2_s
        print(f"  indexer, batched, 2 processes  {rate_b2:9.0f} chunks/s", flush=True)
        print(
            json.dumps(
                {
                    "batched_over_min_baseline": round(rate_b1 / floor, 2),
                    "batched_over_batch_size_1": round(rate_b1 / rate_one, 1),
                    "two_processes_over_one": round(rate_b2 / rate_b1, 2),
                    "parse_chunk_stamp_share_of_indexer_cpu": round(stamp_cpu / b1_cpu, 2),
                }
            )
        )
        print(
            f"targets: batched/min(a,b) = {rate_b1 / floor:.2f} (>= 0.6), "
            f"batched/batch-1 = {rate_b1 / rate_one:.1f} (>= 10)"
        )
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
