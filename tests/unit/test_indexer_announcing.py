"""What a unit of work announces: receipts, and what the purger must act on (pure)."""

from __future__ import annotations

from govindex.core.envelope import decode
from govindex.core.events import ACCESS_REVOKED, DOCUMENT_DELETED, DOCUMENT_INDEXED
from govindex.core.ports import ApplyResult, OutboxMessage, TombstonePlan, VersionPlan
from govindex.core.settings import Consumers, Topics
from indexer.announcing import Announcer
from tests.unit.test_indexer_planning import change, deletion

TOPICS = Topics.for_namespace("test")
ANNOUNCER = Announcer(TOPICS, generation=7)


def data(message: OutboxMessage) -> tuple[str, dict[str, object], dict[str, object]]:
    record = message.record
    event = decode(record.key, record.value, list(record.headers))
    return event.type, event.data, event.extensions


def test_a_new_version_is_announced_by_its_receipt_only() -> None:
    event = change(0, "a.md", 3)
    assert isinstance(event.plan, VersionPlan)
    (receipt,) = ANNOUNCER.change(event, event.plan, ApplyResult("indexed", "v3", 2))
    kind, body, _ = data(receipt)
    assert receipt.topic == TOPICS.receipts and receipt.awaits is None
    assert kind == DOCUMENT_INDEXED
    assert body["event_id"] == event.envelope.id and body["outcome"] == "indexed"
    assert body["index_generation"] == 7 and body["chunk_count"] == 2
    assert body["content_hash"] == event.plan.content_hash


def test_lost_principals_are_forwarded_to_the_purger_until_it_is_done() -> None:
    event = change(0, "a.md", 4)
    assert isinstance(event.plan, VersionPlan)
    result = ApplyResult("metadata_updated", "v3", 2, revoked=("group:sre",))
    receipt, revoked = ANNOUNCER.change(event, event.plan, result)
    assert receipt.topic == TOPICS.receipts
    assert revoked.topic == TOPICS.tombstones and revoked.awaits == Consumers.PURGER
    assert (revoked.tenant_id, revoked.source_id) == ("acme", "docs")
    kind, body, _ = data(revoked)
    assert kind == ACCESS_REVOKED and body["principals"] == ["group:sre"]


def test_a_tombstone_is_forwarded_with_its_deletion_mode_then_receipted() -> None:
    event = deletion(0, "a.md", 5, reason="source_deleted")
    assert isinstance(event.plan, TombstonePlan)
    forward, receipt = ANNOUNCER.deletion(event, event.plan, ApplyResult("tombstoned", None, 3))
    assert forward.topic == TOPICS.tombstones and forward.awaits == Consumers.PURGER
    assert forward.event_id == event.envelope.id  # the purger settles the same event
    kind, _, extensions = data(forward)
    assert kind == DOCUMENT_DELETED
    assert extensions["deletionmode"] == "tombstone_and_purge"
    kind, body, _ = data(receipt)
    assert receipt.topic == TOPICS.receipts and kind == DOCUMENT_INDEXED
    assert body["outcome"] == "tombstoned" and body["content_hash"] is None
