"""The CDC connector: Debezium topics in, document events out (docs/design/data-flow.md, ingest)."""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from govindex.core import events
from govindex.core.envelope import Delivery
from govindex.core.errors import InvalidEvent, SourceDisabled
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.ports import CdcLedger, ConnectorTransaction, SourceRegistry
from govindex.core.records import SourceManifest
from govindex.core.settings import Consumers, Topics
from ingest.cdc import RowChange, translate
from ingest.handlers import document_message

log = structlog.get_logger(__name__)
CONSUMER = Consumers.CDC


@dataclass(frozen=True)
class CdcPorts:
    registry: SourceRegistry
    ledger: CdcLedger
    topics: Topics


# Long: every Debezium operation (c/u/r/d/tombstone/t) decided in one readable place.
async def apply_change(delivery: Delivery, source_id: str, ports: CdcPorts) -> int:
    """Translate one Debezium record and publish the document events; return how many.

    Sequences are source positions (LSNs), recorded per document so operator deletes and
    Kafka tombstones get a sequence above every change already seen.
    """
    manifest = await ports.registry.find(source_id)
    if manifest is None or manifest.cdc is None:
        raise InvalidEvent(f"source {source_id!r} no longer has a cdc section")
    if not manifest.enabled:
        raise SourceDisabled(f"source {source_id!r} is disabled")
    facts = next((m for m in manifest.facts if m.table == manifest.cdc.table), None)
    change = translate(delivery.key, delivery.value, manifest.cdc, facts)
    tenant, source = manifest.tenant, manifest.source_id
    emitted = await _apply(change, manifest, ports) if change is not None else 0
    await ports.ledger.synced(tenant, source)  # the feed delivered: fresh as of now
    return emitted


async def _apply(change: RowChange, manifest: SourceManifest, ports: CdcPorts) -> int:
    tenant, source = manifest.tenant, manifest.source_id
    assert manifest.cdc is not None  # apply_change checked it
    if change.op == "truncate":
        async with ports.ledger.transaction() as tx:
            # Marked first: a change of a row from before the truncate that is delivered
            # after it (another partition) must not bring the row back.
            await tx.record_truncate(tenant, source, change.sequence)
            targets = await ports.ledger.live_documents(tenant, source, f"{manifest.cdc.table}/")
            for doc_id in targets:
                await _delete(tx, manifest, doc_id, change, change.sequence, ports, "truncated")
        return len(targets)
    if 0 < change.sequence <= await ports.ledger.truncated_at(tenant, source):
        log.info("cdc.before_truncate", doc_id=change.doc_id, sequence=change.sequence)
        return 0
    assert change.doc_id is not None
    last, deleted = await ports.ledger.ledger(tenant, source, change.doc_id)
    if change.op == "delete":
        if change.sequence == 0:  # a Kafka tombstone: only if the delete itself was missed
            if deleted or last == 0:
                return 0
            sequence = last + 1
        else:
            sequence = change.sequence
        async with ports.ledger.transaction() as tx:
            await _delete(tx, manifest, change.doc_id, change, sequence, ports, "deleted_in_source")
        return 1
    assert change.text is not None
    content_hash = sha256_hex(change.text)
    payload = DocumentChanged(
        tenant_id=tenant,
        source_id=source,
        doc_id=change.doc_id,
        source_version=change.source_version,
        sequence=change.sequence,
        observed_at=change.observed_at,
        content_hash=content_hash,
        content_ref=content_hash,
        media_type="text/markdown",
        acl=change.acl,
        valid_from=change.valid_from,
        valid_to=change.valid_to,
        metadata=dict(change.metadata or {}),
    )
    kind = events.DOCUMENT_UPDATED if last else events.DOCUMENT_CREATED
    # The events and the position commit together, before the Debezium offset moves.
    async with ports.ledger.transaction() as tx:
        await tx.put_blob(content_hash, change.text)
        await tx.emit([document_message(ports.topics, kind, payload, "upsert")])
        await tx.record_position(tenant, source, change.doc_id, change.sequence, deleted=False)
    return 1


async def _delete(
    tx: ConnectorTransaction,
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
    await tx.emit([document_message(ports.topics, events.DOCUMENT_DELETED, payload, "deleted")])
    await tx.record_position(manifest.tenant, manifest.source_id, doc_id, sequence, deleted=True)
