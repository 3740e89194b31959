"""Every statement the code sends to a table that grows finds its rows through an index.

A representative workload runs on the real stack with every statement recorded (creates,
updates and deletes through the pipeline, a purge, a connector sync, searches, packs kept
and read back, relations, `govindex documents`, status, metrics, retention, the outbox
relay, the read audit, lineage). The test's database is then inflated to a size at which a
sequential scan costs more than any usable index, analysed, and each distinct statement is
explained with the parameters it was recorded with (EXPLAIN only, never ANALYZE, in a
transaction that is rolled back). A `Seq Scan` on a growing table fails the test, unless
the statement is in ALLOWED below, each with the reason it may read the whole table.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types import TypeInfo

from govindex.adapters.postgres.inspect import PostgresGauges
from govindex.adapters.postgres.lineage import PostgresLineage
from govindex.adapters.postgres.vectors import VectorBytes, vector_dumper
from govindex.control.bootstrap import prepare
from govindex.control.status import collect_status
from govindex.core.ports import AuditEntry, DocumentKey
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from ingest.app import sync_source
from purger.app import apply_retention, verify_document_purge
from reader.app import read_service
from reader.keeping import Keeping, PackKeeper
from reader.models import PackRequest, RelationsRequest, SearchRequest
from tests.support.pipeline import V1, V2, Pipeline
from tests.support.statements import Statement, StatementLog, recording

pytestmark = pytest.mark.e2e

# The tables whose rows grow with the corpus, its history and its traffic.
GROWING = frozenset(
    {
        "documents",
        "document_versions",
        "chunks",
        "chunk_vectors",
        "embedding_backlog",
        "tombstones",
        "purge_receipts",
        "processed_events",
        "dead_lettered",
        "outbox",
        "blobs",
        "ingest_documents",
        "graph_entities",
        "graph_edges",
        "derived_artifacts",
        "webhook_deliveries",
        "read_audit",
        "stored_packs",
    }
)

# A statement (its whole text, whitespace aside) allowed to scan a growing table, and why.
ALLOWED: dict[str, str] = {
    "SELECT (SELECT count(*) FROM sources), (SELECT count(*) FROM documents WHERE state = "
    "'active'), (SELECT count(*) FROM chunks), (SELECT count(*) FROM embedding_backlog)": (
        "`govindex status` reports the corpus's size: counting every row is its job"
    ),
    "SELECT count(*) FROM chunks": (
        "generations.stored_chunks: the total a reindex (and start-up's check) counts against"
    ),
    "UPDATE chunks SET index_generation = %s": (
        "generations.go_live re-stamps every chunk with the live generation: all rows, by design"
    ),
    "SELECT (SELECT count(*) FROM chunk_vectors WHERE embedder = %s AND embedder_version = %s), "
    "(SELECT count(*) FROM chunks)": (
        "vectors.count: `govindex reembed`'s progress, a model's vectors of all chunks"
    ),
    "SELECT count(*) FROM embedding_backlog": (
        "vectors.backlog_size: the size of a queue that drains to empty is what it reports"
    ),
    "SELECT (SELECT count(*) FROM outbox WHERE awaits IS NOT NULL AND settled_at IS NULL), "
    "(SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM outbox WHERE "
    "awaits IS NOT NULL AND settled_at IS NULL), (SELECT count(*) FROM outbox WHERE "
    "published_at IS NULL), (SELECT count(*) FROM tombstones WHERE purge_state <> 'purged'), "
    "(SELECT coalesce(extract(epoch FROM now() - min(recorded_at)), 0) FROM tombstones WHERE "
    "purge_state <> 'purged'), (SELECT count(*) FROM embedding_backlog), (SELECT "
    "coalesce(extract(epoch FROM now() - min(queued_at)), 0) FROM embedding_backlog)": (
        "the metrics' gauges: the embedding backlog's size (a queue that drains) is the metric"
    ),
}

EXPLAINABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "MERGE")
MIN_DISTINCT = 80  # a recorder that misses statements cannot pass below this

FRONTMATTER = """---
service: payment-api
owner: team:payments
---
# Payment API runbook

If payment-api answers 503, check the database pool.
"""


@pytest.fixture
async def recorded(settings: Settings) -> AsyncIterator[tuple[Pipeline, StatementLog]]:
    """A pipeline whose every Postgres connection (pool, relay listener, status's own
    synchronous one) records what it executes: the Runtime is built under the recorder."""
    log = StatementLog()
    with recording(log):
        await prepare(settings)
        async with Runtime(settings, pool_size=6) as rt:
            p = Pipeline(rt, tenant=f"tenant-{uuid.uuid4().hex[:8]}")
            await p.register(history_retention=timedelta(0))
            await p.start_workers()
            try:
                yield p, log
            finally:
                await p.stop_workers()
                p.close()


def _files(folder: Path, files: dict[str, str | None]) -> None:
    """Write (None: remove) the files of a folder source."""
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        if text is None:
            (folder / name).unlink()
        else:
            (folder / name).write_text(text)


async def _workload(p: Pipeline, folder: Path) -> None:
    rt = p.rt
    # Documents created, updated, restated with the same content, deleted and purged.
    await p.wait_processed(
        p.publish(
            p.change("run.md", 1, V1),
            p.change("pay.md", 1, FRONTMATTER),
            p.change("gone.md", 1, "# Gone\nSoon deleted.\n"),
        )
    )
    await p.wait_processed(p.publish(p.change("run.md", 2, V2), p.change("pay.md", 2, FRONTMATTER)))
    await p.wait_processed(p.publish(p.change("run.md", 3, V2, acl=["group:ops"])))
    await p.wait_processed(p.publish(p.deletion("gone.md", 4)))
    await p.wait_purged("gone.md", 4)

    # A connector: a folder synced, changed and synced again (a deletion among it).
    _files(folder, {"a.md": "# A\nThe amber light.\n", "b.md": "# B\nThe blue light.\n"})
    await sync_source(rt, p.source, folder)
    await p.wait_caught_up(p.source)
    _files(folder, {"a.md": "# A\nThe amber light blinks.\n", "b.md": None})
    await sync_source(rt, p.source, folder)
    await p.wait_caught_up(p.source)

    # The read service: searches, packs (one kept and read back), relations, a chunk.
    await rt.index.refresh()
    service = read_service(rt)
    now = datetime.now(UTC)
    scope: dict[str, Any] = {
        "tenant": p.tenant,
        "subject": {"principals": ["group:eng", "group:ops"]},
        "purpose": "support",
        "cache": "bypass",
    }
    for channels in (None, ["fulltext"], ["bm25"]):
        extra = {} if channels is None else {"channels": channels}
        found = await service.search(
            SearchRequest.model_validate({**scope, "query": "payment pool lever", **extra})
        )
    await service.search(
        SearchRequest.model_validate(
            {**scope, "query": "switch", "as_of": (now - timedelta(minutes=1)).isoformat()}
        )
    )
    pack = await service.pack(PackRequest.model_validate({**scope, "query": "payment-api 503"}))
    await service.verify(pack.manifest)
    await service.relations(
        RelationsRequest.model_validate(
            {k: v for k, v in scope.items() if k != "cache"} | {"entity": "service:payment-api"}
        )
    )
    assert found.hits, "the workload's searches should find something"

    def audit(_: Any) -> AuditEntry:
        return AuditEntry(
            endpoint="pack",
            status=200,
            credential_kind="token",
            credential_name="ops",
            tenant=p.tenant,
            principals=("group:eng",),
            scopes=(),
            request_hash="sha256:0",
        )

    keeper = PackKeeper(service, rt.packs, p.settings.topics.receipts, 30)
    request = PackRequest.model_validate({**scope, "query": "payment-api database"})
    kept, _ = await keeper.pack(request, Keeping("ops", "key-1", "sha256:0", audit))
    await keeper.pack(request, Keeping("ops", "key-1", "sha256:0", audit))  # a retry
    assert kept.manifest.pack_id is not None
    await keeper.stored(p.tenant, kept.manifest.pack_id, None)

    # The read audit: written and listed the ways `govindex audit` lists it.
    await rt.audit.record(audit(None))
    await rt.audit.entries()
    await rt.audit.entries(tenant=p.tenant)
    await rt.audit.entries(credential="ops", principal="group:eng")

    # Lineage: a summary built from a document, looked up, invalidated by a deletion.
    doc = f"{p.tenant}/{p.source}/run.md"
    chunk_ids = [c["chunk_id"] for c in await p.pg_chunks("run.md")]
    await rt.lineage.register_derived(
        "summary", "s-1", [doc, *chunk_ids[:1]], "summaries/s-1", tenant_id=p.tenant, text="t"
    )
    await PostgresLineage(rt.pool).get(p.tenant, "summary", "s-1")
    await rt.lineage.remaining(p.tenant, doc, chunk_ids)
    await p.wait_processed(p.publish(p.deletion("run.md", 5)))
    await p.wait_purged("run.md", 5)

    # Operators: listing, status, metrics, purge status and verification, retention.
    key = DocumentKey(p.tenant, p.source, "run.md")
    manifest = await rt.registry.find(p.source)
    assert manifest is not None
    await rt.chunks.documents(p.source)
    await rt.chunks.last_sequence(key)
    await rt.chunks.chunks_present(chunk_ids)
    await rt.versions.current_versions(p.source, None)
    await rt.purges.pending()
    await rt.purges.latest_tombstone(key)
    await verify_document_purge(rt, manifest, "run.md")
    await collect_status(p.settings)
    await PostgresGauges(rt.pool).sample()
    await apply_retention(rt, [manifest])
    await rt.audit.prune(p.settings.audit_retention_days)
    await rt.packs.expire()
    await rt.ingest_state.behind(p.source)
    await rt.outbox.settle()
    await rt.outbox.republish(0.0)
    await rt.outbox.prune(86400.0)  # the relay's default

    # The ports' other statements: webhook deliveries, worker controls, jobs, the
    # connectors' ledger, vectors, the registry, generations, chunks read back.
    await rt.deliveries.seen("github", "d-1")
    await rt.deliveries.record("github", "d-1", p.source)
    await rt.controls.set_paused("purger", False, "test")
    await rt.controls.paused()
    await rt.controls.alive(60.0)
    job = await rt.jobs.create(
        "replay", {}, requested_by="test", dry_run=True, rate=None, runner="test:1"
    )
    await rt.jobs.get(job.id)
    await rt.jobs.recent(10)
    await rt.jobs.items(job.id)
    await rt.ingest_state.known(p.tenant, p.source)
    await rt.ingest_state.checkpoint(p.tenant, p.source)
    await rt.ingest_state.ledger(p.tenant, p.source, "a.md")
    await rt.ingest_state.live_documents(p.tenant, p.source, "")
    await rt.vectors.missing("bulk-model", "1", 10)
    await rt.vectors.missing_after("bulk-model", "1", "", 10)
    await rt.vectors.count("bulk-model", "1")
    claimed = await rt.vectors.claim_backlog(10, 60.0)
    await rt.vectors.release([chunk_id for chunk_id, _ in claimed])
    await rt.vectors.backlog_size()
    await rt.registry.held_documents(p.source)
    await rt.registry.index_state(p.source)
    await rt.generations.digests("", 10)
    pay = await p.pg_chunks("pay.md")
    await rt.generations.digests_of([c["chunk_id"] for c in pay])
    await rt.chunks.chunks_of_version(pay[0]["version_id"])
    await rt.chunks.chunks_by_id([c["chunk_id"] for c in pay])
    await rt.chunks.chunks_changed_by(DocumentKey(p.tenant, p.source, "pay.md"), 2)
    async for _ in rt.chunks.iter_all_chunks(batch=5):
        break


# --- inflating the database --------------------------------------------------------------

DOCS = 30_000  # documents; two versions each; 4 chunks per document (120,000)

INFLATE = f"""
INSERT INTO documents (tenant_id, source_id, doc_id, state, last_sequence,
    current_version_id, source_version, content_hash, path, last_indexed_at)
SELECT 'bulk-t' || (i % 20 % 10), 'bulk-s' || (i % 20), 'doc-' || i,
    CASE WHEN i % 10 = 0 THEN 'deleted' ELSE 'active' END, 2, 'bv-' || i || '-2', 'v2',
    md5(i::text), 'doc-' || i, now()
FROM generate_series(1, {DOCS}) i;

INSERT INTO document_versions (version_id, tenant_id, source_id, doc_id, version_sequence,
    sequence, source_version, content_hash, content, media_type, title, valid_from,
    valid_to, observed_at, recorded_at, superseded_at, parser, parser_version,
    content_purged_at)
SELECT 'bv-' || i || '-' || n, 'bulk-t' || (i % 20 % 10), 'bulk-s' || (i % 20), 'doc-' || i,
    n, n, 'v' || n, md5(i::text || n), CASE WHEN n = 2 OR i % 2 = 0 THEN 'text ' || i END,
    'text/markdown', 'Doc ' || i, now() - interval '60 days' + n * interval '20 days',
    CASE WHEN n = 1 THEN now() - interval '20 days' END, now(), now(),
    CASE WHEN n = 1 THEN now() - interval '20 days' END, 'markdown', '1',
    CASE WHEN n = 1 AND i % 2 = 1 THEN now() END
FROM generate_series(1, {DOCS}) i, generate_series(1, 2) n;

INSERT INTO chunks (chunk_id, version_id, tenant_id, source_id, doc_id, source_version,
    sequence, version_sequence, content_hash, text, valid_from, valid_to, recorded_at,
    superseded_at, observed_at, indexed_at, acl, required_scopes, allowed_purposes,
    classification, parser, parser_version, locator, char_start, char_end, line_start,
    line_end, heading_path, ordinal, kind, trust_level, contains_instructions,
    token_estimate, simhash, index_generation, event_time)
SELECT 'bc-' || i || '-' || k, 'bv-' || i || '-' || CASE WHEN k = 0 THEN 1 ELSE 2 END,
    'bulk-t' || (i % 20 % 10), 'bulk-s' || (i % 20), 'doc-' || i, 'v2', 2,
    CASE WHEN k = 0 THEN 1 ELSE 2 END, md5(i::text || k), 'bulk words ' || i || ' part ' || k,
    now() - interval '20 days', NULL, now(), CASE WHEN k = 0 THEN now() END, now(), now(),
    ARRAY['group:bulk-' || (i % 50)], '{{}}', ARRAY['support'], 'internal', 'markdown', '1',
    'L1', 0, 10, 1, 1, '{{}}', k, 'paragraph', 'authoritative', false, 10, 0, 1,
    CASE WHEN k = 1 THEN now() - (i % 100) * interval '1 day' END
FROM generate_series(1, {DOCS}) i, generate_series(0, 3) k;

INSERT INTO chunk_vectors (chunk_id, embedder, embedder_version, dims, embedding)
SELECT 'bc-' || i || '-1', 'bulk-model', '1', 3, '[1,0,0]'::vector
FROM generate_series(1, {DOCS}) i;

INSERT INTO embedding_backlog (chunk_id, queued_at)
SELECT 'bc-' || i || '-2', now() - i * interval '1 second'
FROM generate_series(1, {DOCS} / 2) i;

INSERT INTO tombstones (tenant_id, source_id, doc_id, sequence, event_id, source_version,
    reason, deletion_mode, deleted_at, recorded_at, version_ids, content_hashes, chunk_ids,
    purge_state, purged_at)
SELECT 'bulk-t' || (i % 20 % 10), 'bulk-s' || (i % 20), 'gone-' || i, 3, 'bulk-del-' || i,
    'del3', 'deleted_in_source', 'tombstone_and_purge', now(), now(), ARRAY['x'],
    ARRAY['h'], ARRAY['c'], 'purged', now()
FROM generate_series(1, 20000) i;

INSERT INTO purge_receipts (tenant_id, source_id, doc_id, sequence, receipt)
SELECT 'bulk-t' || (i % 20 % 10), 'bulk-s' || (i % 20), 'gone-' || i, 3, '{{}}'
FROM generate_series(1, 20000) i;

INSERT INTO processed_events (consumer, event_id, processed_at)
SELECT (ARRAY['indexer', 'purger', 'indexer-deletions', 'lineage'])[1 + i % 4],
    'bulk-e' || i, now() - i * interval '1 second'
FROM generate_series(1, 200000) i;

INSERT INTO dead_lettered (consumer, event_id, reason)
SELECT 'indexer', 'bulk-dl' || i, 'bad' FROM generate_series(1, 20000) i;

INSERT INTO outbox (topic, key, value, headers, created_at, published_at, event_id, awaits,
    tenant_id, source_id, content_hash, sequence, publish_count, settled_at)
SELECT 'bulk', 'k' || i, '\\x00'::bytea, '[]', now() - i * interval '800 ms',
    now() - i * interval '800 ms', 'bulk-o' || i, CASE WHEN i % 2 = 0 THEN 'indexer' END,
    'bulk-t' || (i % 10), 'bulk-s' || (i % 20), CASE WHEN i % 5 = 0 THEN md5(i::text) END, i,
    1, now() - i * interval '800 ms'
FROM generate_series(1, 100000) i;

INSERT INTO blobs (content_hash, content)
SELECT md5('blob' || i), 'blob ' || i FROM generate_series(1, 10000) i;

INSERT INTO ingest_documents (tenant_id, source_id, doc_id, last_sequence, content_hash,
    deleted)
SELECT 'bulk-t' || (i % 20 % 10), 'bulk-s' || (i % 20), 'doc-' || i, 2, md5(i::text),
    i % 10 = 0
FROM generate_series(1, {DOCS}) i;

INSERT INTO graph_entities (tenant_id, entity_id, kind, aliases)
SELECT 'bulk-t' || (i % 10), 'service:bulk-' || i, 'service', ARRAY['bulk-' || i]
FROM generate_series(1, 30000) i;

INSERT INTO graph_edges (edge_id, tenant_id, subject, relation, object, source_id, doc_id,
    version_id, version_sequence, source_version, evidence_chunk_id, valid_from, valid_to,
    recorded_at, superseded_at, evidence_ordinal)
SELECT 'be-' || i || '-' || n, 'bulk-t' || (i % 20 % 10), 'service:bulk-' || i, 'owner',
    'team:bulk-' || (i % 100), 'bulk-s' || (i % 20), 'doc-' || i, 'bv-' || i || '-' || n, n,
    'v' || n, 'bc-' || i || '-1', now() - interval '60 days',
    CASE WHEN n = 1 THEN now() - interval '20 days' END, now(),
    CASE WHEN n = 1 THEN now() - interval '20 days' END, 1
FROM generate_series(1, {DOCS}) i, generate_series(1, 2) n;

INSERT INTO derived_artifacts (tenant_id, kind, artifact_id, location, text,
    built_from_docs, built_from_chunks)
SELECT 'bulk-t' || (i % 10), 'summary', 'bulk-s' || i, 'summaries/' || i, 'summary',
    ARRAY['bulk-t' || (i % 20 % 10) || '/bulk-s' || (i % 20) || '/doc-' || i],
    ARRAY['bc-' || i || '-1']
FROM generate_series(1, 20000) i;

INSERT INTO webhook_deliveries (provider, delivery_id, source_id, outcome)
SELECT 'github', 'bulk-d' || i, 'bulk-s' || (i % 20), 'emitted'
FROM generate_series(1, 20000) i;

INSERT INTO read_audit (at, endpoint, status, credential_kind, credential_name, tenant,
    principals, scopes, request_hash, chunk_ids)
SELECT now() - (i % 60) * interval '1 day', 'search', 200, 'token', 'bulk-' || (i % 20),
    'bulk-t' || (i % 10), ARRAY['group:bulk'], '{{}}', 'sha256:' || i, ARRAY['bc-1-1']
FROM generate_series(1, 50000) i;

INSERT INTO stored_packs (pack_id, tenant_id, credential_name, idempotency_key,
    request_hash, pack_hash, built_at, expires_at, shell)
SELECT 'bulk-p' || i, 'bulk-t' || (i % 10), 'bulk-' || (i % 20), 'bulk-key-' || i,
    'sha256:' || i, 'sha256:' || i, now(), now() + interval '30 days', '{{}}'
FROM generate_series(1, 20000) i;
"""


def _inflate(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(INFLATE)
        conn.execute("ANALYZE")
        return {
            table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
            for table in sorted(GROWING)
        }


def _explainable(statement: Statement) -> bool:
    words = statement.query.lstrip(" (").split(None, 1)
    return bool(words) and words[0].upper() in EXPLAINABLE


def _plans(dsn: str, statements: list[Statement]) -> tuple[dict[str, str], dict[str, str]]:
    """Each statement's plan (EXPLAIN only, in a transaction rolled back), and those that
    could not be explained, with the error."""
    plans: dict[str, str] = {}
    refused: dict[str, str] = {}
    with psycopg.connect(dsn) as conn:
        vector = TypeInfo.fetch(conn, "vector")  # vectors were recorded as pgvector binary
        assert vector is not None
        conn.adapters.register_dumper(VectorBytes, vector_dumper(vector.oid))
        for statement in statements:
            try:
                with conn.transaction(force_rollback=True):
                    rows = conn.execute(
                        "EXPLAIN " + statement.query,
                        statement.params,
                    ).fetchall()
            except psycopg.Error as exc:
                refused[statement.query] = str(exc).strip()
                continue
            plans[statement.query] = "\n".join(str(row[0]) for row in rows)
    return plans, refused


def _plain(query: str) -> str:
    return " ".join(query.replace("( ", "(").split())


def _scanned(plan: str) -> set[str]:
    return set(re.findall(r"Seq Scan on (\w+)", plan)) & GROWING


async def test_every_statement_on_a_growing_table_uses_an_index(
    recorded: tuple[Pipeline, StatementLog], tmp_path: Path
) -> None:
    p, log = recorded
    await _workload(p, tmp_path / "folder")
    await p.stop_workers()  # nothing writes while the database is inflated and explained
    log.active = False
    statements = [s for s in log.distinct().values() if _explainable(s)]
    assert len(statements) >= MIN_DISTINCT, [s.query for s in statements]

    assert p.settings.pg_dsn
    counts = _inflate(p.settings.pg_dsn)
    assert counts["chunks"] >= 100_000 and counts["documents"] >= 20_000, counts
    plans, refused = _plans(p.settings.pg_dsn, statements)
    assert not refused, "\n\n".join(f"{q}\n  -> {e}" for q, e in refused.items())

    allowed = {_plain(q): q for q in ALLOWED}
    by_text = {_plain(q): plan for q, plan in plans.items()}
    unused = [q for text, q in allowed.items() if text not in by_text]
    assert not unused, f"allowlist entries that match no recorded statement: {unused}"
    stale = [q for text, q in allowed.items() if not _scanned(by_text[text])]
    assert not stale, f"allowlist entries whose statements no longer scan: {stale}"

    scans = [
        f"{query}\n  scans {sorted(_scanned(plan))}:\n{plan}"
        for query, plan in plans.items()
        if _scanned(plan) and _plain(query) not in allowed
    ]
    assert not scans, f"{len(scans)} of {len(plans)} statements scan a growing table:\n\n" + (
        "\n\n".join(scans)
    )
