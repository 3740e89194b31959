"""Purge latency under load: from a tombstone's production to the last sink's verified removal.

Starts its own embedded stack, indexes a corpus, keeps a steady background load of updates
going, deletes documents one by one, and reads each purge receipt's `purged_at` (written
after every sink was read back empty). Prints p50 / p95 / p99 and the load. Not a test:
run it with `make bench-purge`. Target: p99 <= OpenSearch refresh interval (1 s) + 2 s.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from govindex.adapters.kafka import KafkaEventPublisher
from govindex.core import events
from govindex.core.envelope import encode_document_event
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.logs import configure_logging
from govindex.core.records import SourceManifest
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.bootstrap import prepare
from govindex.runtime.composition import Runtime
from govindex.runtime.workers import Workers

DOCS, DELETES, DELETE_EVERY_S = 400, 120, 0.25
TENANT, SOURCE = "bench", "bench-docs"


def text(doc: int, version: int) -> str:
    body = " ".join(f"word{(doc * 7 + version + k) % 97}" for k in range(120))
    return f"# Doc {doc}\n\n## Section\n\n{body}\n\n## Steps\n\n1. First.\n2. Second v{version}.\n"


def change(doc: int, seq: int) -> object:
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


# Long: one benchmark run reads top to bottom (stack, load, deletions, figures).
async def run(update_rate: float) -> None:
    configure_logging(level="WARNING", json_output=True)
    root = Path(tempfile.mkdtemp(prefix="govindex-bench-"))
    stack = EmbeddedStack(root / "state", namespace="bench", durable=False)
    settings = Settings(state_dir=root / "state").model_copy(update=stack.start())
    assert settings.pg_dsn and settings.kafka_bootstrap
    try:
        await prepare(settings)
        rt = await Runtime(settings).__aenter__()
        pool = rt.pool
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
        workers = Workers(rt)
        await workers.start()
        producer = KafkaEventPublisher(settings.kafka_bootstrap)
        topic = settings.topics.documents
        for doc in range(DOCS):
            producer.publish(topic, change(doc, 1))  # type: ignore[arg-type]
        producer.flush()
        await _wait(pool, "SELECT count(*) FROM documents WHERE state = 'active'", DOCS)
        print(f"indexed {DOCS} documents; starting the load")

        sequences = dict.fromkeys(range(DOCS), 1)
        updates = 0
        stop = asyncio.Event()
        victims = list(range(DELETES))  # deleted in order; the rest take the update load

        async def background() -> None:
            nonlocal updates
            interval = 1 / update_rate
            k = 0
            while not stop.is_set():
                doc = DELETES + k % (DOCS - DELETES)
                k += 1
                sequences[doc] += 1
                producer.publish(topic, change(doc, sequences[doc]))  # type: ignore[arg-type]
                producer.flush()
                updates += 1
                await asyncio.sleep(interval)

        load = asyncio.create_task(background())
        produced: dict[str, float] = {}
        started = time.monotonic()
        for doc in victims:
            payload = DocumentDeleted(
                tenant_id=TENANT,
                source_id=SOURCE,
                doc_id=f"d{doc}.md",
                source_version="bench-delete",
                sequence=2,
                deleted_at=datetime.now(UTC),
            )
            producer.publish(
                topic, encode_document_event(events.DOCUMENT_DELETED, payload, op="deleted")
            )
            producer.flush()
            produced[f"d{doc}.md"] = time.time()
            await asyncio.sleep(DELETE_EVERY_S)
        await _wait(pool, "SELECT count(*) FROM purge_receipts", DELETES, timeout=120)
        elapsed = time.monotonic() - started
        stop.set()
        await load
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT doc_id, receipt->>'purged_at' FROM purge_receipts")
            rows = await cur.fetchall()
        latencies = sorted(
            datetime.fromisoformat(purged.replace("Z", "+00:00")).timestamp() - produced[doc]
            for doc, purged in rows
        )
        q = statistics.quantiles(latencies, n=100)
        print(
            f"load: {updates / elapsed:.1f} updates/s in the background, "
            f"{DELETES / elapsed:.1f} deletes/s, {DOCS} documents, 2 cores"
        )
        print(f"tombstone produced -> every sink verified empty ({len(latencies)} purges):")
        print(
            f"  p50 {q[49] * 1000:7.0f} ms\n  p95 {q[94] * 1000:7.0f} ms\n"
            f"  p99 {q[98] * 1000:7.0f} ms\n  max {latencies[-1] * 1000:7.0f} ms"
        )
        print(
            f"target p99 <= refresh interval (1 s) + 2 s = 3000 ms: "
            f"{'met' if q[98] <= 3.0 else 'NOT met'}"
        )
        producer.close()
        await workers.stop()
        await rt.__aexit__(None, None, None)
    finally:
        stack.stop()


async def _wait(pool: object, sql: str, want: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with pool.connection() as conn:  # type: ignore[attr-defined]
            cur = await conn.execute(sql)
            row = await cur.fetchone()
        if row and row[0] >= want:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{sql!r} did not reach {want}")


if __name__ == "__main__":
    import sys

    # Background update rates to measure under, each on a fresh stack (default: 10 and 35/s).
    for rate in [float(a) for a in sys.argv[1:]] or [10.0, 35.0]:
        print(f"\n=== background load: {rate:g} updates/s requested ===")
        asyncio.run(run(rate))
