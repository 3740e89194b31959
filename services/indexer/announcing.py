"""Announcing: the outbox messages a unit of work commits with its writes.

See docs/design/events.md, docs/design/deletion.md.

A receipt on the receipts topic for every applied event; a tombstone, and a revocation of
principals, forwarded to the purger, pending until the purger has done with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from govindex.core import events
from govindex.core.envelope import KafkaRecord, encode_document_event
from govindex.core.events import AccessRevoked, DocumentChanged, DocumentDeleted, DocumentIndexed
from govindex.core.ports import ApplyResult, OutboxMessage, TombstonePlan, VersionPlan
from govindex.core.settings import Consumers, Topics
from indexer.planning import PlannedEvent

PURGER = Consumers.PURGER  # the consumer of the tombstones topic


@dataclass(frozen=True)
class Announcer:
    """Builds the messages; `generation` is the index generation receipts name."""

    topics: Topics
    generation: int

    def change(
        self, event: PlannedEvent, plan: VersionPlan, result: ApplyResult
    ) -> list[OutboxMessage]:
        """A new version or a metadata-only change: its receipt, and the principals it
        revoked for the purger (which evicts what was built for them)."""
        payload = event.payload
        assert isinstance(payload, DocumentChanged)
        now = plan.recorded_at
        messages = [self._receipt(event, result, now, payload.content_hash)]
        if result.revoked:
            revoked = AccessRevoked(
                **payload.identity(), principals=list(result.revoked), revoked_at=now
            )
            record = encode_document_event(
                events.ACCESS_REVOKED,
                revoked,
                op=f"revoked:{payload.sequence}",
                time=now,
                cause=event.envelope.extensions,
            )
            messages.append(self._to_purger(record, payload.tenant_id, payload.source_id))
        return messages

    def deletion(
        self, event: PlannedEvent, plan: TombstonePlan, result: ApplyResult
    ) -> list[OutboxMessage]:
        """A tombstone: the delete forwarded to the purger (with its deletion mode), and
        its receipt."""
        payload = event.payload
        assert isinstance(payload, DocumentDeleted)
        forward = encode_document_event(
            events.DOCUMENT_DELETED,
            payload,
            op="deleted",
            time=plan.recorded_at,
            event_id=event.envelope.id,
            extensions={"deletionmode": plan.deletion_mode},
            cause=event.envelope.extensions,
        )
        return [
            self._to_purger(forward, payload.tenant_id, payload.source_id),
            self._receipt(event, result, plan.recorded_at, None),
        ]

    def _to_purger(self, record: KafkaRecord, tenant_id: str, source_id: str) -> OutboxMessage:
        """A deletion or revocation for the purger: pending (re-published) until it is done."""
        return OutboxMessage(
            self.topics.tombstones,
            record,
            awaits=PURGER,
            tenant_id=tenant_id,
            source_id=source_id,
        )

    def _receipt(
        self,
        event: PlannedEvent,
        result: ApplyResult,
        now: datetime,
        content_hash: str | None,
    ) -> OutboxMessage:
        outcome = result.outcome
        assert outcome in ("indexed", "metadata_updated", "tombstoned")
        payload = event.payload
        receipt = DocumentIndexed(
            **payload.identity(),
            event_id=event.envelope.id,
            outcome=outcome,
            version_id=result.version_id,
            chunk_count=result.chunk_count,
            content_hash=content_hash,
            index_generation=self.generation,
            indexed_at=now,
        )
        record = encode_document_event(
            events.DOCUMENT_INDEXED,
            receipt,
            op=f"indexed:{payload.sequence}",
            time=now,
            cause=event.envelope.extensions,
        )
        return OutboxMessage(self.topics.receipts, record)
