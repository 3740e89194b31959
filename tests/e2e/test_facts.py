"""Facts from structured sources on the real embedded servers: a deployments table whose
row finished before its commit, an ownership table with validity columns, a row update
that ends exactly its old edge, a row the caller may not see, a purge that takes a row's
edges, and the owner at T from a CDC feed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from govindex.adapters.kafka import ensure_topics
from govindex_client import AsyncGovindexClient
from reader.app import ReadServer
from tests.support.cdc import DEBEZIUM_SHAPE, Cdc
from tests.support.pipeline import Pipeline, until

pytestmark = pytest.mark.e2e

TOKEN = "facts-token-0123456789abc"
T0 = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)

DEPLOYMENTS: dict[str, Any] = {
    "name": "deployments",
    "paths": ["deploy/*.csv"],
    "entities": [{"type": "deployment", "id": "deploy_id", "aliases": ["version"]}],
    "relations": [
        {
            "subject": {"type": "service", "id": "service"},
            "relation": "DEPLOYED_AS",
            "object": {"type": "deployment", "id": "deploy_id"},
        }
    ],
    "event_time": "finished_at",
}
OWNERSHIP: dict[str, Any] = {
    "name": "ownership",
    "paths": ["ownership.csv"],
    "entities": [{"type": "team", "id": "team"}],
    "relations": [
        {
            "subject": {"type": "service", "id": "service"},
            "relation": "OWNED_BY",
            "object": {"type": "team", "id": "team"},
        }
    ],
    "valid_from": "valid_from",
    "valid_to": "valid_to",
    "acl": "acl",
}


@pytest.fixture
async def api(shared_pipeline: Pipeline) -> AsyncIterator[tuple[Pipeline, str, str]]:
    p = shared_pipeline
    source = f"facts-{p.tenant}"
    await p.register(source_id=source, facts=[DEPLOYMENTS, OWNERSHIP])
    server = ReadServer(p.rt, {TOKEN: [p.tenant]})
    url = await server.start()
    yield p, url, source
    await server.stop()


def _client(p: Pipeline, url: str, *principals: str) -> AsyncGovindexClient:
    return AsyncGovindexClient(
        url, TOKEN, tenant=p.tenant, purpose="support", principals=list(principals or ["group:eng"])
    )


async def test_a_deployment_is_visible_between_its_event_time_and_its_commit(
    api: tuple[Pipeline, str, str],
) -> None:
    p, url, source = api
    table = (
        "deploy_id,service,version,environment,started_at,finished_at\n"
        "d-1,payment-api,1.4.0,prod,2025-03-01T01:58:00Z,2025-03-01T02:01:22Z\n"
        "d-2,ledger,2.0.0,prod,2025-03-01T01:30:00Z,2025-03-01T01:31:00Z\n"
    )
    committed = T0 + timedelta(minutes=10)  # 02:10, nine minutes after it finished
    await p.wait_processed(
        p.publish(p.change("deploy/prod.csv", 1, table, source=source, observed_at=committed))
    )
    async with _client(p, url) as client:
        between = await client.relations(
            "service:payment-api", relation="DEPLOYED_AS", as_of=T0 + timedelta(minutes=5)
        )
        (edge,) = between.edges
        assert edge.object == "deployment:d-1" and edge.method == "facts:deployments"
        assert edge.event_time == datetime(2025, 3, 1, 2, 1, 22, tzinfo=UTC)
        assert edge.valid_from == edge.event_time and edge.unresolved is False
        assert edge.evidence.doc_id == "deploy/prod.csv"
        before = await client.relations(
            "service:payment-api", relation="DEPLOYED_AS", as_of=T0 + timedelta(minutes=1)
        )
        assert before.edges == []  # it had not finished yet

        # The row's chunk is its own evidence: found by an event_time window, cut at its row.
        hits = await client.search(
            "payment-api 1.4.0",
            as_of=T0 + timedelta(minutes=5),
            filters={"event_from": T0, "event_to": T0 + timedelta(minutes=5)},
        )
        assert [h.text for h in hits.hits] == [table.splitlines()[1]]
        assert hits.hits[0].event_time == datetime(2025, 3, 1, 2, 1, 22, tzinfo=UTC)

    # The next commit restates the row: one edge and one row at any moment, never two.
    later = table + "d-3,payment-api,1.4.1,prod,2025-03-01T02:50:00Z,2025-03-01T02:55:00Z\n"
    await p.wait_processed(
        p.publish(
            p.change(
                "deploy/prod.csv", 2, later, source=source, observed_at=T0 + timedelta(hours=1)
            )
        )
    )
    async with _client(p, url) as client:
        for minutes, expected in (
            (5, ["deployment:d-1"]),
            (90, ["deployment:d-1", "deployment:d-3"]),
        ):
            at = T0 + timedelta(minutes=minutes)
            found = await client.relations("service:payment-api", relation="DEPLOYED_AS", as_of=at)
            assert sorted(e.object for e in found.edges) == expected, minutes
        hits = await client.search(
            "payment-api 1.4.0",
            as_of=T0 + timedelta(minutes=5),
            filters={"event_from": T0, "event_to": T0 + timedelta(minutes=5)},
        )
        assert [h.text for h in hits.hits] == [table.splitlines()[1]]  # once, not per version

    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT entity_id, aliases, declared FROM graph_entities WHERE tenant_id = %s "
            "AND entity_id LIKE 'deployment:%%' ORDER BY entity_id",
            (p.tenant,),
        )
        assert await cur.fetchall() == [
            ("deployment:d-1", ["1.4.0", "d-1"], True),
            ("deployment:d-2", ["2.0.0", "d-2"], True),
            ("deployment:d-3", ["1.4.1", "d-3"], True),
        ]


async def test_owner_at_t_from_validity_columns_a_row_update_ends_exactly_its_edge(
    api: tuple[Pipeline, str, str],
) -> None:
    p, url, source = api
    v1 = (
        "team,service,valid_from,valid_to,acl\n"
        "team-a,payment-api,2024-01-01T00:00:00Z,2025-01-01T00:00:00Z,\n"
        "team-b,payment-api,2025-01-01T00:00:00Z,,\n"
        "team-c,ledger,2024-06-01T00:00:00Z,,\n"
        "team-hr,payroll,2024-01-01T00:00:00Z,,group:hr\n"
    )
    first = T0 - timedelta(days=10)
    await p.wait_processed(
        p.publish(p.change("ownership.csv", 1, v1, source=source, observed_at=first))
    )
    async with _client(p, url) as client:
        then = await client.relations(
            "service:payment-api", relation="OWNED_BY", as_of=datetime(2024, 6, 1, tzinfo=UTC)
        )
        (edge,) = then.edges  # the table's own history, stated before it was committed
        assert edge.object == "team:team-a"
        assert (edge.valid_from, edge.valid_to) == (
            datetime(2024, 1, 1, tzinfo=UTC),
            datetime(2025, 1, 1, tzinfo=UTC),
        )
        now = await client.relations("service:payment-api", relation="OWNED_BY")
        assert [(e.object, e.valid_to) for e in now.edges] == [("team:team-b", None)]
        ledger = (await client.relations("service:ledger", relation="OWNED_BY")).edges
        assert [e.object for e in ledger] == ["team:team-c"]
        # A row the caller may not see states an edge the caller never gets, not a trace.
        assert (await client.relations("service:payroll")).edges == []
        assert (await client.relations("team:team-hr", relation="OWNS")).edges == []
    async with _client(p, url, "group:hr") as hr:
        (payroll,) = (await hr.relations("service:payroll")).edges
        assert payroll.object == "team:team-hr"

    # v2 changes one row: team-b's ownership ends; ledger's row is untouched.
    recorded_v1 = datetime.now(UTC)  # system time: when the index held v1 and not yet v2
    v2 = v1.replace(
        "team-b,payment-api,2025-01-01T00:00:00Z,,",
        "team-b,payment-api,2025-01-01T00:00:00Z,2025-03-01T00:00:00Z,",
    )
    second = T0 - timedelta(days=1)
    await p.wait_processed(
        p.publish(p.change("ownership.csv", 2, v2, source=source, observed_at=second))
    )
    async with _client(p, url) as client:
        now = await client.relations("service:payment-api", relation="OWNED_BY")
        assert now.edges == []  # team-b's row now ends on 1 March; no one owns it after
        during = await client.relations(
            "service:payment-api", relation="OWNED_BY", as_of=datetime(2025, 2, 1, tzinfo=UTC)
        )
        (b,) = during.edges  # exactly one: the old open-ended copy is gone, not doubled
        assert (b.object, b.valid_to) == ("team:team-b", datetime(2025, 3, 1, tzinfo=UTC))
        assert b.source_version == "v2"
        # What was known before the update still reads as it was then.
        known = await client.relations(
            "service:payment-api",
            relation="OWNED_BY",
            as_of=datetime(2025, 2, 1, tzinfo=UTC),
            known_at=recorded_v1,
        )
        assert [(e.object, e.valid_to, e.source_version) for e in known.edges] == [
            ("team:team-b", None, "v1")
        ]
        # The untouched row states the same edge, window for window.
        ledger2 = (await client.relations("service:ledger", relation="OWNED_BY")).edges
        assert [(e.object, e.valid_from, e.valid_to) for e in ledger2] == [
            (e.object, e.valid_from, e.valid_to) for e in ledger
        ]

    # Deleting the table purges its rows' edges: nothing of them stays in Postgres.
    await p.wait_processed(p.publish(_deletion(p, source, "ownership.csv", 3)))
    await p.wait_purged("ownership.csv", 3)
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM graph_edges WHERE tenant_id = %s AND doc_id = 'ownership.csv'",
            (p.tenant,),
        )
        assert await cur.fetchone() == (0,)


def _deletion(p: Pipeline, source: str, doc_id: str, sequence: int) -> Any:
    from govindex.core import events
    from govindex.core.envelope import encode_document_event
    from govindex.core.events import DocumentDeleted

    body = DocumentDeleted(
        tenant_id=p.tenant,
        source_id=source,
        doc_id=doc_id,
        source_version=f"del{sequence}",
        sequence=sequence,
        deleted_at=datetime.now(UTC),
    )
    return encode_document_event(events.DOCUMENT_DELETED, body, op="deleted")


OWNERS_TABLE = """
CREATE TABLE owners (id int PRIMARY KEY, service text NOT NULL, team text NOT NULL,
    summary text NOT NULL, changed_at timestamptz);
CREATE TRIGGER owners_rows AFTER INSERT OR UPDATE OR DELETE ON owners
    FOR EACH ROW EXECUTE FUNCTION debezium_shape();
"""


async def test_owner_at_t_from_a_cdc_feed_and_a_deleted_row_purges_its_edges(
    idle_pipeline: Pipeline,
) -> None:
    p = idle_pipeline
    source, topic = f"cdc-{p.tenant}", f"{p.settings.namespace}.dbserver1.public.owners"
    assert p.settings.kafka_bootstrap
    ensure_topics(p.settings.kafka_bootstrap, [topic], 2)
    await p.register(
        source_id=source,
        source_type="cdc",
        parser="markdown",
        cdc={
            "topic": topic,
            "table": "public.owners",
            "id_columns": ["id"],
            "text_template": "# {service} is owned by {team}\n\n{summary}\n",
        },
        facts=[
            {
                "name": "owners",
                "table": "public.owners",
                "relations": [
                    {
                        "subject": {"type": "service", "id": "service"},
                        "relation": "OWNED_BY",
                        "object": {"type": "team", "id": "team"},
                    }
                ],
                "event_time": "changed_at",
            }
        ],
    )
    await p.start_workers()
    cdc = Cdc(p, topic)
    sql, ship = cdc.sql, cdc.ship

    async def owners(as_of: datetime | None = None) -> list[Any]:
        server = ReadServer(p.rt, {TOKEN: [p.tenant]})
        url = await server.start()
        try:
            async with _client(p, url) as client:
                found = await client.relations(
                    "service:payment-api",
                    relation="OWNED_BY",
                    **({"as_of": as_of} if as_of else {}),
                )
                return list(found.edges)
        finally:
            await server.stop()

    try:
        await sql(DEBEZIUM_SHAPE)
        await sql(OWNERS_TABLE)
        await sql(
            "INSERT INTO owners VALUES (1, 'payment-api', 'team-a', 'Payments on call.', "
            "'2025-01-01T00:00:00Z')"
        )
        await ship()
        first = await until(owners, lambda e: len(e) == 1, 60, "the first owner")
        assert first[0].object == "team:team-a" and first[0].method == "facts:owners"
        assert first[0].event_time == datetime(2025, 1, 1, tzinfo=UTC)
        assert first[0].unresolved is True  # no entry declares team-a: kept as written
        # Debezium stamps changes in milliseconds: the handover as it can be observed.
        now = datetime.now(UTC)
        handover = now.replace(microsecond=now.microsecond // 1000 * 1000)
        await sql("UPDATE owners SET team = 'team-b', changed_at = now() WHERE id = 1")
        await ship()
        now = await until(
            owners, lambda e: [x.object for x in e] == ["team:team-b"], 60, "the new owner"
        )
        assert now[0].valid_to is None
        # The update ended exactly the old edge, at the new row's validity.
        before = await owners(handover - timedelta(seconds=1))
        assert [x.object for x in before] == ["team:team-a"]
        assert before[0].valid_to is not None and before[0].valid_to >= handover

        await sql("DELETE FROM owners WHERE id = 1")
        await ship()

        async def edges() -> int:
            async with p.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT count(*) FROM graph_edges WHERE source_id = %s", (source,)
                )
                row = await cur.fetchone()
                return int(row[0]) if row else -1

        await until(edges, lambda n: n == 0, 60, "the deleted row's edges purged")
        assert await owners(handover - timedelta(seconds=1)) == []
    finally:
        cdc.producer.close()
