"""CDC end to end: real row changes in PostgreSQL, shaped as Debezium shapes them, through
Kafka and the CDC connector, into the governed index."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from prometheus_client import REGISTRY

from govindex.adapters.kafka import KafkaEventPublisher, ensure_topics
from govindex.control.status import collect_status
from govindex.core import events
from tests.support.cdc import DEBEZIUM_SHAPE, Cdc, debezium
from tests.support.pipeline import Pipeline, query, until

pytestmark = pytest.mark.e2e


async def settle(p: Pipeline, source: str, expected: set[str]) -> None:
    """Until the index holds exactly `expected` as active, and nothing emitted is pending."""
    await until(
        lambda: p.active_documents(source),
        lambda docs: set(docs) == expected,
        60,
        f"active documents {sorted(expected)}",
    )
    await p.wait_caught_up(source)


async def test_row_inserts_updates_deletes_and_truncate_become_document_changes(
    idle_pipeline: Pipeline,
) -> None:
    p = idle_pipeline
    source, topic = f"cdc-{p.tenant}", f"{p.settings.namespace}.dbserver1.public.runbooks"
    assert p.settings.kafka_bootstrap
    ensure_topics(p.settings.kafka_bootstrap, [topic], 2)
    await p.register(
        source_id=source,
        source_type="cdc",
        parser="markdown",
        cdc={
            "topic": topic,
            "table": "public.runbooks",
            "id_columns": ["id"],
            "text_template": "# {title}\n\n{body}\n",
            "acl_column": "acl",
            "valid_from_column": "effective_from",
            "valid_to_column": "effective_to",
            "metadata_columns": ["owner"],
        },
    )
    await p.start_workers()  # the CDC worker subscribes to the topics of registered sources
    cdc = Cdc(p, topic)
    try:
        await _scenario(p, cdc, source)
    finally:
        cdc.producer.close()
    # `govindex status` shows the feed's topic and group; metrics never label its source.
    report = await collect_status(p.settings)
    (feed,) = [t for t in report["topics"] if t.get("source") == source]
    assert feed["topic"] == topic and feed["messages"] > 0 and feed["lag"] >= 0
    assert feed["group"] == p.settings.group(f"cdc.{source}")
    consumers = {
        sample.labels["consumer"]
        for family in REGISTRY.collect()
        if family.name == "govindex_events"
        for sample in family.samples
    }
    assert "cdc" in consumers and not any(c.startswith("cdc:") for c in consumers)


# Long: one scenario of real row changes whose steps depend on each other.
async def _scenario(p: Pipeline, cdc: Cdc, source: str) -> None:
    await cdc.sql(DEBEZIUM_SHAPE)

    await cdc.sql(
        "INSERT INTO runbooks VALUES (1, 'Failover', 'Promote the replica.', NULL, "
        "'2025-01-01T00:00:00Z', NULL, 'data'), (2, 'Salaries', 'Band E4 is paid.', "
        "'{group:hr}', '2025-01-01T00:00:00Z', '2030-01-01T00:00:00Z', 'people')"
    )
    await cdc.ship()
    await settle(p, source, {"public.runbooks/1", "public.runbooks/2"})
    assert await query(p, "salaries band") == []  # acl column: group:hr only
    assert len(await query(p, "salaries band", principals=("group:hr",))) == 1
    assert len(await query(p, "replica", as_of=datetime(2025, 2, 1, tzinfo=UTC))) == 1

    # Two updates of row 1; the newer is delivered first, the older after it (ignored).
    await cdc.sql("UPDATE runbooks SET body = 'Run dbctl failover.' WHERE id = 1")
    await cdc.sql(
        "UPDATE runbooks SET body = 'Run dbctl failover --to db-3.', "
        "effective_from = '2025-06-01T00:00:00Z' WHERE id = 1"
    )
    await cdc.ship(wrap=True, hold_back=2)
    newer, older = cdc.kept[1], cdc.kept[0]
    cdc.kept = [newer, older]
    cdc.replay_kept()
    await until(
        lambda: query(p, "dbctl failover"),
        lambda hits: any("db-3" in h for h in hits),
        60,
        "the newest update",
    )
    late = json.loads(older[1] or b"{}")["payload"]
    late_id = events.event_id(
        p.tenant, source, "public.runbooks/1", f"lsn:{late['source']['lsn']}", "upsert"
    )
    await p.wait_processed([late_id])  # the older update did arrive, after the newer one
    await p.wait_caught_up(source)
    assert await query(p, "dbctl failover") == ["# Failover\n\nRun dbctl failover --to db-3.\n"]
    assert await query(p, "replica", as_of=datetime(2025, 3, 1, tzinfo=UTC)) == [
        "# Failover\n\nPromote the replica.\n"
    ]

    # A delete whose Kafka tombstone never arrives is still a delete; the tombstone of another
    # delete arriving after its delete changes nothing.
    await cdc.sql("DELETE FROM runbooks WHERE id = 2")
    await cdc.ship()
    await settle(p, source, {"public.runbooks/1"})
    assert await query(p, "salaries band", principals=("group:hr",)) == []

    await cdc.sql(
        "INSERT INTO runbooks VALUES (3, 'Cache', 'Flush the edge cache.', NULL, "
        "NULL, NULL, 'edge')"
    )
    await cdc.sql("DELETE FROM runbooks WHERE id = 3")
    await cdc.ship(tombstones=True)
    await until(
        lambda: p.pg_chunks("public.runbooks/3"),
        lambda rows: rows == [],
        60,
        "row 3 created then deleted",
    )
    await settle(p, source, {"public.runbooks/1"})

    # The delete record itself is lost; only its Kafka tombstone (key, null value) arrives.
    await cdc.sql(
        "INSERT INTO runbooks VALUES (5, 'Pager', 'Rotate the pager.', NULL, NULL, NULL, 'ops')"
    )
    await cdc.ship()
    await settle(p, source, {"public.runbooks/1", "public.runbooks/5"})
    await cdc.sql("DELETE FROM runbooks WHERE id = 5")
    await cdc.ship(hold_back=1)
    (lost_key, _lost_delete) = cdc.kept.pop()
    cdc.producer.publish(cdc.topic, debezium(lost_key, None))
    cdc.producer.flush()
    await settle(p, source, {"public.runbooks/1"})

    # Truncate deletes every document of the table.
    await cdc.sql(
        "INSERT INTO runbooks VALUES (4, 'Queue', 'Drain the queue.', NULL, NULL, NULL, 'ops')"
    )
    await cdc.sql("TRUNCATE runbooks")
    await cdc.ship()
    await settle(p, source, set())
    assert await query(p, "queue failover replica") == []


async def test_a_cdc_source_registered_after_the_worker_started_is_picked_up(
    idle_pipeline: Pipeline,
) -> None:
    """No restart: the CDC worker looks for new CDC sources every `cdc_rescan_s`."""
    p = idle_pipeline
    source, topic = f"late-{p.tenant}", f"{p.settings.namespace}.dbserver1.public.late"
    assert p.settings.kafka_bootstrap
    ensure_topics(p.settings.kafka_bootstrap, [topic], 1)
    p.rt.settings = p.rt.settings.model_copy(update={"cdc_rescan_s": 0.5})
    await p.start_workers()  # no CDC source registered yet
    await p.register(
        source_id=source,
        source_type="cdc",
        parser="markdown",
        cdc={
            "topic": topic,
            "table": "public.late",
            "id_columns": ["id"],
            "text_template": "# {title}\n\n{body}\n",
        },
    )
    row = {"id": 7, "title": "Rotation", "body": "Rotate the signing keys quarterly."}
    change = {
        "before": None,
        "after": row,
        "op": "c",
        "source": {"connector": "postgresql", "table": "late", "lsn": 1000, "ts_ms": 1e12},
        "ts_ms": 1e12,
    }
    with KafkaEventPublisher(p.settings.kafka_bootstrap) as producer:
        producer.publish(
            topic, debezium(json.dumps({"id": 7}).encode(), json.dumps(change).encode())
        )
        producer.flush()
    await settle(p, source, {"public.late/7"})
    assert len(await query(p, "signing keys quarterly")) == 1
