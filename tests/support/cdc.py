"""Debezium's envelope from real row changes: triggers write each change as Debezium would."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from govindex.adapters.kafka import KafkaEventPublisher
from govindex.core.envelope import KafkaRecord
from tests.support.pipeline import Pipeline

# Row-level triggers write each change in Debezium's envelope (before, after, source with the
# change's LSN, op, ts_ms) to an outbox: real row changes, Debezium's shape.
DEBEZIUM_SHAPE = """
CREATE TABLE runbooks (
    id int PRIMARY KEY, title text NOT NULL, body text NOT NULL, acl text[],
    effective_from timestamptz, effective_to timestamptz, owner text);
CREATE TABLE cdc_outbox (id bigserial PRIMARY KEY, key jsonb, value jsonb);
CREATE FUNCTION debezium_shape() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    src jsonb := jsonb_build_object(
        'version', '2.7.0.Final', 'connector', 'postgresql', 'name', 'dbserver1',
        'db', current_database(), 'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME,
        'snapshot', 'false', 'txId', txid_current(),
        'lsn', (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint,
        'ts_ms', (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO cdc_outbox (key, value) VALUES (NULL, jsonb_build_object(
            'before', NULL, 'after', NULL, 'op', 't', 'source', src,
            'ts_ms', src->'ts_ms'));
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO cdc_outbox (key, value) VALUES (jsonb_build_object('id', OLD.id),
            jsonb_build_object('before', to_jsonb(OLD), 'after', NULL, 'op', 'd',
                               'source', src, 'ts_ms', src->'ts_ms'));
    ELSE
        INSERT INTO cdc_outbox (key, value) VALUES (jsonb_build_object('id', NEW.id),
            jsonb_build_object(
                'before', CASE WHEN TG_OP = 'UPDATE' THEN to_jsonb(OLD) END,
                'after', to_jsonb(NEW), 'op', CASE TG_OP WHEN 'INSERT' THEN 'c' ELSE 'u' END,
                'source', src, 'ts_ms', src->'ts_ms'));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER runbooks_rows AFTER INSERT OR UPDATE OR DELETE ON runbooks
    FOR EACH ROW EXECUTE FUNCTION debezium_shape();
CREATE TRIGGER runbooks_truncate AFTER TRUNCATE ON runbooks
    FOR EACH STATEMENT EXECUTE FUNCTION debezium_shape();
"""


def ship_rows(dsn: str, bootstrap: str, topic: str, after_id: int = 0) -> int:
    """Send the recorded changes after `after_id` to `topic`, as Debezium would (its key and
    envelope); return the last id sent. Playing Debezium after a crash: from its position."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, key, value FROM cdc_outbox WHERE id > %s ORDER BY id", (after_id,)
        ).fetchall()
    with KafkaEventPublisher(bootstrap) as producer:
        for _id, key, value in rows:
            producer.publish(topic, debezium(_json(key), _json(value)))
        producer.flush()
    return int(rows[-1][0]) if rows else after_id


def _json(value: Any) -> bytes | None:
    return json.dumps(value).encode() if value is not None else None


def debezium(key: bytes | None, value: bytes | None) -> KafkaRecord:
    """A record as Debezium sends it: key and value, no headers; a null value is Kafka's
    tombstone (which `KafkaRecord`, made for events, does not spell)."""
    return KafkaRecord(key=key, value=value, headers=[])  # type: ignore[arg-type]


class Cdc:
    def __init__(self, p: Pipeline, topic: str) -> None:
        assert p.settings.kafka_bootstrap
        self.p, self.topic = p, topic
        self.producer = KafkaEventPublisher(p.settings.kafka_bootstrap)
        self.shipped = 0
        self.kept: list[tuple[bytes | None, bytes | None]] = []

    async def sql(self, statement: str, *params: Any) -> None:
        async with self.p.pool.connection() as conn:
            await conn.execute(statement, params or None)

    async def ship(
        self, *, wrap: bool = False, tombstones: bool = False, hold_back: int = 0
    ) -> None:
        """Send new outbox rows as Debezium would; `hold_back` keeps the last N to replay
        late (out of order)."""
        async with self.p.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT id, key, value FROM cdc_outbox WHERE id > %s ORDER BY id", (self.shipped,)
            )
            rows = await cur.fetchall()
        for n, (row_id, key, value) in enumerate(rows):
            self.shipped = row_id
            k = (
                json.dumps({"schema": {"type": "struct"}, "payload": key} if wrap else key).encode()
                if key
                else None
            )
            v = json.dumps(
                {"schema": {"type": "struct"}, "payload": value} if wrap else value
            ).encode()
            if n >= len(rows) - hold_back:
                self.kept.append((k, v))
                continue
            self.producer.publish(self.topic, debezium(k, v))
            if tombstones and value["op"] == "d":
                self.producer.publish(self.topic, debezium(k, None))
        self.producer.flush()

    def replay_kept(self) -> None:
        for k, v in self.kept:
            self.producer.publish(self.topic, debezium(k, v))
        self.producer.flush()
        self.kept.clear()
