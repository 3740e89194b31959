"""Growth: what ingest, a purge and `govindex documents` cost per document as the corpus grows.

Starts its own embedded stack and one `govindex worker indexer purger` process (the
production entry point), then grows one source's corpus through the pipeline in steps
(default 10,000, 50,000 and 200,000 documents; `--sizes`). At each size, on the same stack:

- **ingest**: PROBE_DOCS new documents published at once on the documents topic, timed
  until the indexer has applied every one (per document);
- **the server's bulk**: the search server's own time for the same number of new
  documents' bulks (the indexer's bodies, serialized beforehand), per document;
- **purge**: PURGE_DOCS documents deleted at once on the deletions topic, timed until every
  purge receipt is written (per document);
- **the server's read-back**: the search server's own time for the counts the purge sends
  to read back PURGE_DOCS documents (the purge waits for them), per document: whether any
  document bears their names (`terms` alone: all the purge sends when none does), then the
  exact count (sent when one does); and for the count it sent before both, a clause per
  document (one round);
- **`govindex documents`**: the command as a process, listing the whole source as JSON
  lines, and as a table, less the same command's time on an empty source (its start),
  per document listed.

Each is the best of ROUNDS rounds.

Each figure is printed with its ratio to the step before, per document: flat is about
1x, a cost that grows with the corpus shows as the size ratio (5x, 4x), a quadratic one as
its square. Target: every step <= 1.2x. The corpus documents are small (a heading and a
paragraph: one chunk each), so that the corpus grows fast through the real pipeline;
what grows is the tables and the index, which is what the costs depend on.
Not a test: `make bench-growth`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

from opensearchpy import AsyncOpenSearch, OpenSearch

from govindex.adapters.kafka_async import AsyncKafkaPublisher
from govindex.adapters.opensearch import OpenSearchIndex
from govindex.adapters.opensearch.purge import covering_queries, target_query
from govindex.core import events
from govindex.core.envelope import KafkaRecord, encode_document_event
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.logs import configure_logging
from govindex.core.ports import PurgeTarget
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from indexer.planning import plan_version
from purge_latency import count, manifest, wait_for, worker_env, worker_stack

TENANT, SOURCE, EMPTY = "bench", "growth", "growth-empty"
SIZES = (10_000, 50_000, 200_000)
FILL_STEP = 5_000  # documents published at a time while the corpus grows
PROBE_DOCS = 2_000
PURGE_DOCS = 200
ROUNDS = 2
PROBES = itertools.count()  # the server-bulk probes' document ids
TARGET = 1.2
WORDS = ("cache", "flush", "replica", "failover", "primary", "rollback", "quorum", "shard")

APPLIED = "SELECT count(*) FROM processed_events WHERE consumer = 'indexer'"
RECEIPTS = "SELECT count(*) FROM purge_receipts WHERE source_id = 'growth'"


def text(doc: int) -> str:
    body = " ".join(WORDS[(doc * 3 + k) % len(WORDS)] + str((doc + k) % 89) for k in range(40))
    return f"# Document {doc}\n\n{body}\n"


def changed(doc_id: str, t: str) -> DocumentChanged:
    return DocumentChanged(
        tenant_id=TENANT,
        source_id=SOURCE,
        doc_id=doc_id,
        source_version="v1",
        sequence=1,
        observed_at=datetime.now(UTC),
        content_hash=sha256_hex(t),
        content=t,
    )


def change(doc: int) -> KafkaRecord:
    return encode_document_event(events.DOCUMENT_CREATED, changed(f"g{doc}.md", text(doc)), op="v1")


def deletion(doc: int) -> KafkaRecord:
    payload = DocumentDeleted(
        tenant_id=TENANT,
        source_id=SOURCE,
        doc_id=f"g{doc}.md",
        source_version="bench-delete",
        sequence=2,
        deleted_at=datetime.now(UTC),
    )
    return encode_document_event(events.DOCUMENT_DELETED, payload, op="deleted")


def documents_seconds(settings: Settings, source: str, json_lines: bool) -> tuple[float, int]:
    """`govindex documents --source SOURCE` as a process: its wall time and the lines it
    printed."""
    command = [sys.executable, "-m", "govindex.cli.main", "documents", "--source", source]
    started = time.perf_counter()
    proc = subprocess.run(
        [*command, "--json"] if json_lines else command,
        env={**worker_env(settings), "COLUMNS": "200"},
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - started, proc.stdout.count(b"\n")


class Corpus:
    """Documents published so far (ids 0..n-1), and those deleted."""

    def __init__(self) -> None:
        self.n = 0
        self.deleted = 0  # the oldest documents are the ones deleted

    async def grow(self, rt: Runtime, publisher: AsyncKafkaPublisher, to: int) -> float:
        """Publish documents up to `to`; returns documents/s."""
        started, before = time.perf_counter(), self.n
        applied = await count(rt, APPLIED)
        while self.n < to:
            step = min(FILL_STEP, to - self.n)
            records = [change(d) for d in range(self.n, self.n + step)]
            await publisher.publish_many(rt.settings.topics.documents, records)
            self.n += step
            applied += step
            await wait_for(rt, APPLIED, applied, timeout=3600)
            print(f"    corpus {self.n:>7} documents", flush=True)
        return (self.n - before) / (time.perf_counter() - started)


async def ingest_seconds(rt: Runtime, publisher: AsyncKafkaPublisher, corpus: Corpus) -> float:
    """PROBE_DOCS new documents at once, until the indexer applied them all: s/document."""
    applied = await count(rt, APPLIED)
    records = [change(d) for d in range(corpus.n, corpus.n + PROBE_DOCS)]
    started = time.perf_counter()
    await publisher.publish_many(rt.settings.topics.documents, records)
    await wait_for(rt, APPLIED, applied + PROBE_DOCS)
    corpus.n += PROBE_DOCS
    return (time.perf_counter() - started) / PROBE_DOCS


async def purge_seconds(rt: Runtime, publisher: AsyncKafkaPublisher, corpus: Corpus) -> float:
    """PURGE_DOCS deletions at once, until every purge receipt is written: s/document."""
    receipts = await count(rt, RECEIPTS)
    victims = range(corpus.deleted, corpus.deleted + PURGE_DOCS)
    started = time.perf_counter()
    await publisher.publish_many(rt.settings.topics.deletions, [deletion(d) for d in victims])
    await wait_for(rt, RECEIPTS, receipts + PURGE_DOCS)
    corpus.deleted += PURGE_DOCS
    return (time.perf_counter() - started) / PURGE_DOCS


def read_back_seconds(settings: Settings, corpus: Corpus, *, form: str) -> float:
    """The search server's own time for the purge's read-back of PURGE_DOCS documents (those
    purged last), in seconds per document, by `form`: `names`, the `terms` on their names
    the purge sends first; `exact`, the count it sends when a name is found
    (`covering_queries`); `per_document`, the one it sent before, a clause per document."""
    assert settings.opensearch_url
    client = OpenSearch(settings.opensearch_url, timeout=900)
    victims = range(corpus.deleted - PURGE_DOCS, corpus.deleted)
    targets = [PurgeTarget(TENANT, SOURCE, f"g{d}.md", 2, ()) for d in victims]
    if form == "names":
        query: dict[str, Any] = {"terms": {"doc_id": sorted(t.doc_id for t in targets)}}
    else:
        queries = (
            [target_query(t) for t in targets]
            if form == "per_document"
            else covering_queries(targets)
        )
        query = {"bool": {"should": queries, "minimum_should_match": 1}}
    try:
        started = time.perf_counter()
        client.count(index=f"{settings.index_alias}-g*", body={"query": query})
        return (time.perf_counter() - started) / PURGE_DOCS
    finally:
        client.close()


async def server_bulk_seconds(settings: Settings) -> float:
    """The search server's own time for the bulks of PROBE_DOCS new documents: the bodies
    the indexer sends (its adapter's, stamped by its planning), serialized before the clock
    starts, into the live index under ids of their own. Seconds per document."""
    assert settings.opensearch_url
    source, now = manifest(TENANT, SOURCE), datetime.now(UTC)
    chunks = [
        c
        for n in range(PROBE_DOCS)
        for c in plan_version(
            changed(f"probe-{next(PROBES)}.md", text(n)), text(n), source, generation=1, now=now
        ).chunks
    ]
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
    try:
        bodies = list(index._bulk_bodies(chunks, settings.index_alias))
        client = AsyncOpenSearch(settings.opensearch_url, timeout=600)
        try:
            started = time.perf_counter()
            for body in bodies:
                answer = await client.bulk(body=body)
                assert not answer.get("errors"), "the server must take every probe chunk"
            return (time.perf_counter() - started) / PROBE_DOCS
        finally:
            await client.close()
    finally:
        await index.close()


async def measure(rt: Runtime, publisher: AsyncKafkaPublisher, corpus: Corpus) -> dict[str, float]:
    """Per-document seconds of each operation at the corpus's present size, the best of
    ROUNDS (a busy spell of the shared machine falls on one round, not on the figure)."""
    settings, figures = rt.settings, {}
    figures["ingest"] = min([await ingest_seconds(rt, publisher, corpus) for _ in range(ROUNDS)])
    figures["server bulk"] = min([await server_bulk_seconds(settings) for _ in range(ROUNDS)])
    figures["purge"] = min([await purge_seconds(rt, publisher, corpus) for _ in range(ROUNDS)])
    for name, form in (("server name check", "names"), ("server read-back", "exact")):
        figures[name] = min(
            [
                await asyncio.to_thread(read_back_seconds, settings, corpus, form=form)
                for _ in range(ROUNDS)
            ]
        )
    # One round: at 200,000 documents this one takes over a minute.
    figures["server, clause per doc"] = await asyncio.to_thread(
        read_back_seconds, settings, corpus, form="per_document"
    )
    for name, json_lines in (("documents --json", True), ("documents (table)", False)):
        # The command's own start (interpreter, imports, connections), timed on a source
        # that holds nothing, is taken off: what is left is the listing.
        empty, _ = await asyncio.to_thread(documents_seconds, settings, EMPTY, json_lines)
        runs = [
            await asyncio.to_thread(documents_seconds, settings, SOURCE, json_lines)
            for _ in range(ROUNDS)
        ]
        lines = runs[0][1]
        if json_lines and lines != corpus.n:
            raise AssertionError(f"`govindex documents --json` listed {lines} of {corpus.n}")
        figures[name] = max(min(seconds for seconds, _ in runs) - empty, 0.0) / corpus.n
    return figures


def report(rows: list[tuple[int, dict[str, float]]]) -> None:
    names = list(rows[0][1])
    print("\nper document (ratio to the step before; target <= 1.2x):")
    print(f"  {'documents':>9}  " + "  ".join(f"{n:>26}" for n in names))
    worst: dict[str, float] = {}
    for k, (size, figures) in enumerate(rows):
        cells = []
        for name in names:
            value = figures[name]
            cell = f"{value * 1000:9.3f} ms"
            if k:
                ratio = value / rows[k - 1][1][name]
                worst[name] = max(worst.get(name, 0.0), ratio)
                cell += f" ({ratio:5.2f}x)"
            cells.append(f"{cell:>26}")
        print(f"  {size:>9}  " + "  ".join(cells))
    for name, ratio in worst.items():
        verdict = "met" if ratio <= TARGET else "NOT met"
        print(f"  {name}: worst step {ratio:.2f}x <= {TARGET:g}x: {verdict}")


async def main(sizes: list[int]) -> None:
    configure_logging(level="WARNING", json_output=True)
    async with worker_stack(SOURCE, EMPTY) as (rt, publisher):
        corpus, rows = Corpus(), []
        for size in sizes:
            print(f"growing the corpus to {size} documents", flush=True)
            rate = await corpus.grow(rt, publisher, size)
            print(f"    {rate:.0f} documents/s while growing", flush=True)
            figures = await measure(rt, publisher, corpus)
            rows.append((size, figures))
            print(
                f"  at {size}: "
                + ", ".join(f"{k} {v * 1000:.3f} ms/doc" for k, v in figures.items()),
                flush=True,
            )
        report(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--sizes",
        type=lambda v: [int(x) for x in v.split(",")],
        default=list(SIZES),
        help="corpus sizes in documents, comma-separated (default 10000,50000,200000)",
    )
    asyncio.run(main(parser.parse_args().sizes))
