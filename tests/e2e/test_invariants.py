"""docs/design/guarantees.md invariants, each proven on the real embedded servers through the real
workers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from govindex.control.bootstrap import rebuild_projection
from govindex.runtime.deadletter import REASON_HEADER
from tests.support.pipeline import V1, V2, Pipeline, event_id_of, query, read_topic

pytestmark = pytest.mark.e2e


async def test_create_update_delete_keeps_both_sinks_in_agreement_and_leaves_nothing(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    t0 = datetime.now(UTC) - timedelta(hours=2)
    t1 = datetime.now(UTC) - timedelta(hours=1)
    await p.wait_processed(p.publish(p.change("run.md", 1, V1, observed_at=t0)))
    await p.assert_sinks_agree()
    assert len(await p.pg_chunks()) == 2

    await p.wait_processed(p.publish(p.change("run.md", 2, V2, observed_at=t1)))
    await p.assert_sinks_agree()
    rows = await p.pg_chunks()
    old = [r for r in rows if r["version_sequence"] == 1]
    new = [r for r in rows if r["version_sequence"] == 2]
    assert len(old) == 2 and len(new) == 2
    assert all(r["superseded_at"] is not None and r["valid_to"] == t1 for r in old)
    assert all(r["superseded_at"] is None and r["valid_to"] is None for r in new)
    assert any("green switch" in t for t in await query(p, "lever switch"))
    assert not any("blue lever" in t for t in await query(p, "lever switch"))

    await p.wait_processed(p.publish(p.deletion("run.md", 3)))
    await p.wait_purged("run.md", 3)
    assert await p.pg_chunks() == []
    assert p.os_chunks() == []
    assert await query(p, "lever switch") == []
    assert await query(p, "lever", as_of=t0 + timedelta(minutes=1)) == []
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM document_versions WHERE tenant_id = %s AND "
            "(content IS NOT NULL OR title IS NOT NULL)",
            (p.tenant,),
        )
        assert (await cur.fetchone()) == (0,)
        cur = await conn.execute(
            "SELECT cardinality(chunk_ids), cardinality(content_hashes), purge_state "
            "FROM tombstones WHERE tenant_id = %s",
            (p.tenant,),
        )
        assert (await cur.fetchone()) == (4, 2, "purged")


async def test_duplicates_and_a_replay_of_the_whole_topic_change_nothing(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    ids = p.publish(p.change("a.md", 1, V1), p.change("a.md", 2, V2), p.change("b.md", 1, V1))
    await p.wait_processed(ids)
    before_pg, before_os = await p.pg_chunks(), p.os_chunks()

    # The same records again, then the whole topic replayed from the beginning.
    assert p.settings.kafka_bootstrap
    replay = read_topic(p.settings.kafka_bootstrap, p.settings.topics.documents)
    assert len(replay) == 3
    p.publish(*p.sent[:])
    for record in replay:
        p.producer.publish(
            p.settings.topics.documents,
            type(p.sent[0])(key=record.key, value=record.value, headers=list(record.headers)),
        )
    marker = p.publish(p.change("marker.md", 1, V1))
    await p.wait_processed(marker)

    assert [r for r in await p.pg_chunks() if r["doc_id"] != "marker.md"] == before_pg
    assert [d for d in p.os_chunks() if d["doc_id"] != "marker.md"] == before_os
    await p.assert_sinks_agree()


async def test_an_older_version_arriving_after_a_newer_one_is_ignored(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    newer, older = p.change("doc.md", 5, V2), p.change("doc.md", 3, V1)
    await p.wait_processed(p.publish(newer, older))
    rows = await p.pg_chunks()
    assert {r["version_sequence"] for r in rows} == {5}
    assert not any("blue lever" in r["text"] for r in rows)
    await p.assert_sinks_agree()


async def test_late_update_after_delete_does_not_resurrect_the_document(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    await p.wait_processed(p.publish(p.change("gone.md", 1, V1), p.deletion("gone.md", 4)))
    await p.wait_purged("gone.md", 4)

    # Long after the delete: a new OpenSearch generation has no memory of deleted versions,
    # so only the Postgres tombstone can stop the late update.
    await rebuild_projection(p.rt)
    late = p.publish(p.change("gone.md", 3, V2), p.change("gone.md", 4, V2, version="x"))
    await p.wait_processed(late)
    assert await p.pg_chunks("gone.md") == []
    assert p.os_chunks("gone.md") == []
    assert await query(p, "green switch") == []

    # A genuinely newer version (sequence > the tombstone's) is a re-creation and is indexed.
    await p.wait_processed(p.publish(p.change("gone.md", 5, V2)))
    assert len(await p.pg_chunks("gone.md")) == 2
    await p.assert_sinks_agree()


async def test_a_document_without_acl_and_no_manifest_default_is_rejected_and_never_indexed(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    await p.register(source_id=f"noacl-{p.tenant}", default_acl=None)
    healthy = p.change("fine.md", 1, V1)
    no_acl = p.change("secret.md", 1, "# Secret\nThe vault code.\n", source=f"noacl-{p.tenant}")
    p.publish(no_acl, healthy)
    await p.wait_processed([event_id_of(healthy)])
    assert await _wait_reasons(p, 1) == [b"missing_acl"]
    letters = [r for r in p.dead_letters() if dict(r.headers).get(REASON_HEADER)]
    assert b"no ACL" in dict(letters[0].headers)["govindex-dlq-error"]
    assert await p.pg_chunks("secret.md") == [] and p.os_chunks("secret.md") == []
    assert await query(p, "vault code", principals=("group:eng", "*", "public")) == []
    assert len(await p.pg_chunks("fine.md")) == 2


async def test_unknown_source_disabled_source_and_malformed_events_are_dead_lettered(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    await p.register(source_id=f"off-{p.tenant}", enabled=False)
    unknown = p.change("x.md", 1, V1, source="nobody-registered-this")
    disabled = p.change("y.md", 1, V1, source=f"off-{p.tenant}")
    garbage = type(unknown)(key=b"k", value=b"{not json", headers=[])
    bad_payload = type(unknown)(
        key=unknown.key,
        value=b'{"tenant_id": "t"}',
        headers=[(k, v) for k, v in unknown.headers if k != "ce_id"] + [("ce_id", b"bad-1")],
    )
    healthy = [p.change("ok1.md", 1, V1), p.change("ok2.md", 1, V2)]
    p.publish(healthy[0], unknown, garbage, disabled, bad_payload, healthy[1])
    await p.wait_processed([event_id_of(r) for r in healthy])
    reasons = await _wait_reasons(p, 4)
    assert sorted(reasons) == sorted(
        [b"unknown_source", b"invalid_event", b"source_disabled", b"invalid_event"]
    )
    assert {r["doc_id"] for r in await p.pg_chunks()} == {"ok1.md", "ok2.md"}
    await p.assert_sinks_agree()


async def _wait_reasons(p: Pipeline, count: int) -> list[bytes]:
    import asyncio

    for _ in range(100):
        reasons = [dict(r.headers).get(REASON_HEADER) for r in p.dead_letters()]
        found = [r for r in reasons if r]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.2)
    raise AssertionError(f"expected {count} dead letters, found {found}")


async def test_a_metadata_only_change_keeps_chunk_ids_and_restamps_acl(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    await p.wait_processed(p.publish(p.change("m.md", 1, V1)))
    before = await p.pg_chunks("m.md")
    await p.wait_processed(p.publish(p.change("m.md", 2, V1, acl=["group:sre"])))
    after = await p.pg_chunks("m.md")
    assert [r["chunk_id"] for r in after] == [r["chunk_id"] for r in before]
    assert all(list(r["acl"]) == ["group:sre"] and r["sequence"] == 2 for r in after)
    assert await query(p, "lever", principals=("group:eng",)) == []
    assert len(await query(p, "lever", principals=("group:sre",))) == 2
    await p.assert_sinks_agree()


async def test_as_of_returns_the_version_that_was_valid_then(pipeline: Pipeline) -> None:
    p = pipeline
    jan, mar, jun = (datetime(2025, m, 1, tzinfo=UTC) for m in (1, 3, 6))
    await p.wait_processed(
        p.publish(
            p.change("policy.md", 1, "# Policy\nStanding access is allowed.\n", observed_at=jan),
            p.change(
                "policy.md",
                2,
                "# Policy\nOnly just-in-time access is allowed.\n",
                observed_at=mar,
                valid_from=jun,
            ),
        )
    )
    assert await query(p, "access allowed", as_of=datetime(2025, 4, 1, tzinfo=UTC)) == [
        "# Policy\nStanding access is allowed.\n"
    ]
    assert await query(p, "access allowed") == ["# Policy\nOnly just-in-time access is allowed.\n"]
    assert await query(p, "access allowed", as_of=datetime(2024, 12, 1, tzinfo=UTC)) == []
    assert await query(p, "access allowed", purpose="marketing") == []


async def test_graph_edges_are_versioned_not_overwritten_and_go_with_a_purge(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    jan, apr = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC)
    v1 = "---\nservice: Orders DB\nowner: team-a\n---\n# Failover\nSteps.\n"
    v2 = v1.replace("team-a", "team-b")
    await p.wait_processed(
        p.publish(
            p.change("runbooks/db.md", 1, v1, observed_at=jan),
            p.change("runbooks/db.md", 2, v2, observed_at=apr),
        )
    )
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT object, valid_from, valid_to, superseded_at IS NOT NULL, "
            " evidence_chunk_id IS NOT NULL FROM graph_edges WHERE tenant_id = %s "
            " AND relation = 'OWNED_BY' ORDER BY valid_from",
            (p.tenant,),
        )
        owners = await cur.fetchall()
        cur = await conn.execute(
            "SELECT aliases FROM graph_entities WHERE tenant_id = %s AND entity_id = %s",
            (p.tenant, "service:orders-db"),
        )
        assert (await cur.fetchone()) == (["Orders DB"],)
    assert owners == [
        ("team:team-a", jan, apr, True, True),
        ("team:team-b", apr, None, False, True),
    ]
    await p.wait_processed(p.publish(p.deletion("runbooks/db.md", 3)))
    await p.wait_purged("runbooks/db.md", 3)
    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM graph_edges WHERE tenant_id = %s", (p.tenant,)
        )
        assert (await cur.fetchone()) == (0,)
