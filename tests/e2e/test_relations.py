"""POST /v1/relations on the real embedded servers: who owned a service at T, from
frontmatter versions, with each edge's validity window and evidence; an edge whose evidence
the caller may not see is never returned; two owners at once are both returned, marked
contradicting; an inverse reads the same edges backwards; an unknown relation is a 400."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from pydantic import ValidationError

from govindex_client import AsyncGovindexClient
from reader.app import ReadServer
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

TOKEN = "relations-token-0123456789"
SERVICE = "service:payment-api"


def _owners(owner: str) -> str:
    return f"---\nservice: payment-api\nowner: {owner}\n---\n# Payment API ownership\n\nOn call.\n"


@pytest.fixture
async def api(shared_pipeline: Pipeline) -> AsyncIterator[tuple[Pipeline, str]]:
    server = ReadServer(shared_pipeline.rt, {TOKEN: [shared_pipeline.tenant]})
    url = await server.start()
    yield shared_pipeline, url
    await server.stop()


def _client(p: Pipeline, url: str, *principals: str) -> AsyncGovindexClient:
    return AsyncGovindexClient(
        url, TOKEN, tenant=p.tenant, purpose="support", principals=list(principals)
    )


async def test_the_owner_at_a_moment_comes_with_its_window_and_evidence(
    api: tuple[Pipeline, str],
) -> None:
    p, url = api
    now = datetime.now(UTC)
    first = p.change(
        "catalog/payment.md", 1, _owners("team-a"), observed_at=now - timedelta(days=30)
    )
    await p.wait_processed(p.publish(first))
    second = p.change(
        "catalog/payment.md", 2, _owners("team-b"), observed_at=now - timedelta(days=10)
    )
    await p.wait_processed(p.publish(second))
    async with _client(p, url, "group:eng") as client:
        then = await client.relations(
            SERVICE, relation="OWNED_BY", direction="out", as_of=now - timedelta(days=20)
        )
        (edge,) = then.edges
        assert (edge.subject, edge.relation, edge.object) == (SERVICE, "OWNED_BY", "team:team-a")
        assert edge.valid_from == now - timedelta(days=30)
        assert edge.valid_to == now - timedelta(days=10)  # the next version ended it
        versions = {r["version_sequence"]: r["version_id"] for r in await p.pg_chunks()}
        assert edge.evidence.doc_id == "catalog/payment.md"
        assert edge.evidence.version_id == versions[1]  # stated by the first version
        assert edge.direction == "out" and edge.contradicts == []

        current = await client.relations(SERVICE, relation="OWNED_BY")
        assert [(e.object, e.valid_to) for e in current.edges] == [("team:team-b", None)]

        # The inverse reads the same edge backwards, from the team.
        owned = await client.relations("team:team-b", relation="OWNS")
        assert [(e.subject, e.relation, e.direction) for e in owned.edges] == [
            (SERVICE, "OWNED_BY", "in")
        ]
        before = await client.relations(SERVICE, as_of=now - timedelta(days=40))
        assert before.edges == []  # nothing was stated yet

        with pytest.raises(ValidationError):  # the client's own model refuses it first
            await client.relations(SERVICE, relation="LIKES")
    body = {"tenant": p.tenant, "purpose": "support", "entity": SERVICE, "relation": "LIKES"}
    async with httpx.AsyncClient(base_url=url) as http:
        refused = await http.post(
            "/v1/relations",
            json={**body, "subject": {"principals": ["group:eng"]}},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    assert refused.status_code == 400
    error = refused.json()
    assert error["field"] == "relation" and "OWNED_BY" in error["reason"]


async def test_an_edge_whose_evidence_is_hidden_is_never_returned_and_two_owners_contradict(
    api: tuple[Pipeline, str],
) -> None:
    p, url = api
    now = datetime.now(UTC)
    since = now - timedelta(days=5)
    ids = p.publish(
        p.change("catalog/payment.md", 1, _owners("team-a"), observed_at=since),
        p.change(
            "catalog/payment-hr.md", 1, _owners("team-hr"), observed_at=since, acl=["group:hr"]
        ),
    )
    await p.wait_processed(ids)
    async with _client(p, url, "group:eng") as eng:
        seen = await eng.relations(SERVICE, relation="OWNED_BY")
        assert [e.object for e in seen.edges] == ["team:team-a"]  # the HR record: not a trace
        assert seen.edges[0].contradicts == []
        assert "team-hr" not in seen.model_dump_json()
        assert (await eng.relations("team:team-hr", relation="OWNS")).edges == []

    async with _client(p, url, "group:eng", "group:hr") as both:
        found = await both.relations(SERVICE, relation="OWNED_BY")
        by_owner = {e.object: e for e in found.edges}
        assert set(by_owner) == {"team:team-a", "team:team-hr"}
        a, hr = by_owner["team:team-a"], by_owner["team:team-hr"]
        assert a.contradicts == [hr.edge_id] and hr.contradicts == [a.edge_id]
        # Asked from one owner, its edge still names the other owner's edge, read backwards.
        (owns,) = (await both.relations("team:team-a", relation="OWNS")).edges
        assert owns.edge_id == a.edge_id and owns.contradicts == [hr.edge_id]
    async with _client(p, url, "group:eng") as eng:
        (owns,) = (await eng.relations("team:team-a", relation="OWNS")).edges
        assert owns.contradicts == []  # the hidden owner's edge is not even named

    async with p.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT endpoint, chunk_ids FROM read_audit WHERE tenant = %s AND "
            "endpoint = 'relations' ORDER BY id",
            (p.tenant,),
        )
        rows = await cur.fetchall()
    assert len(rows) == 5 and all(endpoint == "relations" for endpoint, _ in rows)
