"""Debezium's documented envelope → row changes, for every operation and encoding."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from govindex.core.errors import InvalidEvent
from govindex.core.facts import FactMapping
from govindex.core.records import CdcSettings
from ingest.cdc import position, translate, when

CDC = CdcSettings(
    topic="db.public.runbooks",
    table="public.runbooks",
    id_columns=["id"],
    text_template="# {title}\n\n{body}",
    acl_column="acl",
    valid_from_column="effective_from",
    valid_to_column="effective_to",
    metadata_columns=["owner"],
)
ROW = {
    "id": 7,
    "title": "Failover",
    "body": "Promote.",
    "acl": ["group:sre"],
    "effective_from": 1740787200000000,
    "effective_to": None,
    "owner": "data",
}
SOURCE = {
    "version": "2.7.0.Final",
    "connector": "postgresql",
    "name": "db",
    "ts_ms": 1740787200123,
    "snapshot": "false",
    "db": "app",
    "schema": "public",
    "table": "runbooks",
    "txId": 771,
    "lsn": 24023128,
}


def envelope(
    op: str, before: dict[str, object] | None, after: dict[str, object] | None, **source: object
) -> dict[str, object]:
    return {
        "before": before,
        "after": after,
        "source": {**SOURCE, **source},
        "op": op,
        "ts_ms": 1740787200500,
    }


@pytest.mark.parametrize("op", ["c", "u", "r"])
def test_create_update_and_snapshot_read_become_upserts(op: str) -> None:
    change = translate(b'{"id": 7}', json.dumps(envelope(op, None, ROW)).encode(), CDC)
    assert change is not None
    assert (change.op, change.doc_id, change.sequence) == ("upsert", "public.runbooks/7", 24023128)
    assert change.text == "# Failover\n\nPromote."
    assert change.acl == ["group:sre"] and change.metadata == {"owner": "data"}
    assert change.valid_from == datetime(2025, 3, 1, tzinfo=UTC) and change.valid_to is None
    assert change.snapshot == (op == "r")


def test_the_schema_payload_wrapper_and_the_cloudevents_converter_are_accepted() -> None:
    wrapped = {"schema": {"type": "struct"}, "payload": envelope("c", None, ROW)}
    assert translate(None, json.dumps(wrapped).encode(), CDC) == translate(
        None, json.dumps(envelope("c", None, ROW)).encode(), CDC
    )
    cloudevent = {
        "specversion": "1.0",
        "id": "x",
        "source": "/debezium/postgresql/db",
        "type": "io.debezium.postgresql.datachangeevent",
        "iodebeziumop": "u",
        "iodebeziumlsn": "24023999",
        "iodebeziumtsms": 1740787200123,
        "data": {"before": None, "after": ROW},
    }
    change = translate(None, json.dumps(cloudevent).encode(), CDC)
    assert change is not None and change.op == "upsert" and change.sequence == 24023999


def test_delete_truncate_and_the_kafka_tombstone() -> None:
    deleted = translate(b'{"id": 7}', json.dumps(envelope("d", ROW, None)).encode(), CDC)
    assert deleted is not None and (deleted.op, deleted.doc_id) == ("delete", "public.runbooks/7")
    truncated = translate(None, json.dumps(envelope("t", None, None, lsn=24029999)).encode(), CDC)
    assert truncated is not None and truncated.op == "truncate" and truncated.doc_id is None
    tombstone = translate(json.dumps({"schema": {}, "payload": {"id": 7}}).encode(), None, CDC)
    assert tombstone is not None and tombstone.op == "delete" and tombstone.sequence == 0


def test_positions_order_by_lsn_then_binlog_then_ts_ms() -> None:
    assert position({"lsn": 10}, None) < position({"lsn": 11}, None)
    assert position({"file": "mysql-bin.000003", "pos": 5}, None) > position(
        {"file": "mysql-bin.000002", "pos": 999999}, None
    )
    assert position({}, 1740787200123) == 1740787200123000
    with pytest.raises(InvalidEvent):
        position({}, None)


def test_time_columns_in_every_debezium_encoding() -> None:
    march = datetime(2025, 3, 1, tzinfo=UTC)
    assert when(1740787200000000) == when(1740787200000) == when(1740787200) == march
    assert when("2025-03-01T00:00:00Z") == march


def test_bad_records_are_invalid_events() -> None:
    with pytest.raises(InvalidEvent, match="not JSON"):
        translate(None, b"{", CDC)
    with pytest.raises(InvalidEvent, match="unknown Debezium operation"):
        translate(None, json.dumps(envelope("x", None, ROW)).encode(), CDC)
    with pytest.raises(InvalidEvent, match="id column"):
        translate(None, json.dumps(envelope("c", None, {"title": "t"})).encode(), CDC)


def test_a_change_event_nested_thousands_deep_is_an_invalid_event() -> None:
    deep = b'{"payload": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    with pytest.raises(InvalidEvent, match="not JSON"):
        translate(None, deep, CDC)
    with pytest.raises(InvalidEvent, match="not JSON"):
        translate(deep, None, CDC)


def test_the_columns_a_fact_mapping_reads_travel_as_metadata_times_in_iso() -> None:
    facts = FactMapping.model_validate(
        {
            "name": "runbook-owners",
            "table": "public.runbooks",
            "relations": [
                {
                    "subject": {"type": "document", "id": "title"},
                    "relation": "OWNED_BY",
                    "object": {"type": "team", "id": "owner"},
                }
            ],
            "event_time": "effective_from",
            "acl": "acl",
        }
    )
    change = translate(b'{"id": 7}', json.dumps(envelope("c", None, ROW)).encode(), CDC, facts)
    assert change is not None and change.metadata == {
        "owner": "data",
        "title": "Failover",
        "effective_from": "2025-03-01T00:00:00+00:00",  # Debezium's epoch micros, as a time
        "acl": "group:sre",
    }
