"""The CDC connector: Debezium topics in, document events out (DESIGN §2, ingest)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.store import PostgresChunkStore, PostgresSourceRegistry, transaction
from govindex.core import events
from govindex.core.envelope import Delivery, KafkaRecord, encode_document_event
from govindex.core.errors import InvalidEvent, SourceDisabled
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.records import SourceManifest
from govindex.core.settings import Topics
from ingest.cdc import RowChange, translate

log = structlog.get_logger(__name__)
CONSUMER = "cdc"


@dataclass(frozen=True)
class CdcPorts:
    pool: AsyncConnectionPool
    publish: Callable[[str, KafkaRecord], Awaitable[None]]
    topics: Topics
    inline_limit: int


async def cdc_sources(pool: AsyncConnectionPool) -> list[SourceManifest]:
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT manifest FROM sources WHERE manifest->'cdc' IS NOT NULL AND "
            "manifest->'cdc' <> 'null'::jsonb ORDER BY source_id"
        )
        rows = await cur.fetchall()
    return [SourceManifest.model_validate(row[0]) for row in rows]


async def apply_change(delivery: Delivery, source_id: str, ports: CdcPorts) -> int:
    """Translate one Debezium record and publish the document events; return how many.

    Sequences are source positions (LSNs), recorded per document so operator deletes and
    Kafka tombstones get a sequence above every change already seen.
    """
    manifest = await PostgresSourceRegistry(ports.pool).find(source_id)
    if manifest is None or manifest.cdc is None:
        raise InvalidEvent(f"source {source_id!r} no longer has a cdc section")
    if not manifest.enabled:
        raise SourceDisabled(f"source {source_id!r} is disabled")
    change = translate(delivery.key, delivery.value, manifest.cdc)
    if change is None:
        return 0
    if change.op == "truncate":
        targets = await _live_documents(ports.pool, manifest, f"{manifest.cdc.table}/")
        for doc_id in targets:
            await _emit_delete(manifest, doc_id, change, change.sequence, ports, "truncated")
        return len(targets)
    assert change.doc_id is not None
    last, deleted = await _ledger(ports.pool, manifest, change.doc_id)
    if change.op == "delete":
        if change.sequence == 0:  # a Kafka tombstone: only if the delete itself was missed
            if deleted or last == 0:
                return 0
            sequence = last + 1
        else:
            sequence = change.sequence
        await _emit_delete(manifest, change.doc_id, change, sequence, ports, "deleted_in_source")
        return 1
    assert change.text is not None
    content_hash = sha256_hex(change.text)
    inline = len(change.text.encode()) <= ports.inline_limit
    if not inline:
        await PostgresChunkStore(ports.pool).put_blob(content_hash, change.text)
    payload = DocumentChanged(
        tenant_id=manifest.tenant,
        source_id=manifest.source_id,
        doc_id=change.doc_id,
        source_version=change.source_version,
        sequence=change.sequence,
        observed_at=change.observed_at,
        content_hash=content_hash,
        content=change.text if inline else None,
        content_ref=None if inline else content_hash,
        media_type="text/markdown",
        acl=change.acl,
        valid_from=change.valid_from,
        valid_to=change.valid_to,
        metadata=dict(change.metadata or {}),
    )
    kind = events.DOCUMENT_UPDATED if last else events.DOCUMENT_CREATED
    await ports.publish(
        ports.topics.documents,
        encode_document_event(kind, payload, op="upsert", time=change.observed_at),
    )
    await _record(ports.pool, manifest, change.doc_id, change.sequence, deleted=False)
    return 1


async def _emit_delete(
    manifest: SourceManifest,
    doc_id: str,
    change: RowChange,
    sequence: int,
    ports: CdcPorts,
    reason: str,
) -> None:
    payload = DocumentDeleted(
        tenant_id=manifest.tenant,
        source_id=manifest.source_id,
        doc_id=doc_id,
        source_version=change.source_version,
        sequence=sequence,
        deleted_at=change.observed_at,
        reason=reason,
    )
    await ports.publish(
        ports.topics.documents,
        encode_document_event(
            events.DOCUMENT_DELETED, payload, op="deleted", time=change.observed_at
        ),
    )
    await _record(ports.pool, manifest, doc_id, sequence, deleted=True)


async def _ledger(
    pool: AsyncConnectionPool, manifest: SourceManifest, doc_id: str
) -> tuple[int, bool]:
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT last_sequence, deleted FROM ingest_documents WHERE tenant_id = %s "
            "AND source_id = %s AND doc_id = %s",
            (manifest.tenant, manifest.source_id, doc_id),
        )
        row = await cur.fetchone()
    return (int(row[0]), bool(row[1])) if row else (0, False)


async def _record(
    pool: AsyncConnectionPool,
    manifest: SourceManifest,
    doc_id: str,
    sequence: int,
    *,
    deleted: bool,
) -> None:
    async with transaction(pool) as conn:
        await conn.execute(
            "INSERT INTO ingest_documents (tenant_id, source_id, doc_id, last_sequence, "
            " content_hash, deleted) VALUES (%s, %s, %s, %s, 'cdc', %s) "
            "ON CONFLICT (tenant_id, source_id, doc_id) DO UPDATE SET "
            " last_sequence = greatest(ingest_documents.last_sequence, EXCLUDED.last_sequence),"
            " deleted = CASE WHEN EXCLUDED.last_sequence >= ingest_documents.last_sequence "
            " THEN EXCLUDED.deleted ELSE ingest_documents.deleted END",
            (manifest.tenant, manifest.source_id, doc_id, sequence, deleted),
        )


async def _live_documents(
    pool: AsyncConnectionPool, manifest: SourceManifest, prefix: str
) -> list[str]:
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT doc_id FROM ingest_documents WHERE tenant_id = %s AND source_id = %s "
            "AND NOT deleted AND starts_with(doc_id, %s) ORDER BY doc_id",
            (manifest.tenant, manifest.source_id, prefix),
        )
        return [row[0] for row in await cur.fetchall()]
