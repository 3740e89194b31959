"""Graph retrieval by approved path templates (issue 23), on the real embedded servers: a
template walks its steps in their direction only, to their entity type only; a template or
relation the server does not know is a 400 naming the field; an edge whose evidence the
caller may not see is never walked; a walk past the statement timeout is stopped and named
in `degraded`, and the rest of the read answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from govindex.core.graph_templates import GraphStep, GraphTemplates
from govindex_client import AsyncGovindexClient
from reader.app import ReadServer
from reader.models import SearchRequest, SearchResponse
from reader.service import ReadPorts, ReadService
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

TOKEN = "graph-templates-token-0123456789"
SERVICE = "service:ledger"
TEAM = "team:team-ledger"

RUNBOOK = "---\nservice: ledger\n---\n# Ledger runbook\n\nRestart the ledger workers.\n"
OWNERS = "---\nservice: ledger\nowner: team-ledger\n---\n# Ledger ownership\n\nOn call.\n"


@pytest.fixture
async def api(shared_pipeline: Pipeline) -> AsyncIterator[tuple[Pipeline, str]]:
    server = ReadServer(shared_pipeline.rt, {TOKEN: [shared_pipeline.tenant]})
    url = await server.start()
    yield shared_pipeline, url
    await server.stop()


def _client(p: Pipeline, url: str, *principals: str) -> AsyncGovindexClient:
    return AsyncGovindexClient(
        url, TOKEN, tenant=p.tenant, purpose="support", principals=list(principals or ["group:eng"])
    )


async def _ledger(p: Pipeline, *, owners_acl: list[str] | None = None) -> None:
    """A runbook that GOVERNS service:ledger, and a catalog entry stating that the service
    is OWNED_BY team:team-ledger (under `owners_acl`, when given)."""
    owners: dict[str, Any] = {} if owners_acl is None else {"acl": owners_acl}
    ids = p.publish(
        p.change("runbooks/ledger.md", 1, RUNBOOK),
        p.change("catalog/ledger.md", 1, OWNERS, **owners),
    )
    await p.wait_processed(ids)


def _walked(found: SearchResponse) -> set[tuple[str, tuple[str, ...]]]:
    return {(h.anchor.doc_id, tuple(h.graph_path)) for h in found.hits}


async def test_a_template_walks_its_relation_only_in_its_direction(
    api: tuple[Pipeline, str],
) -> None:
    p, url = api
    await _ledger(p)
    owner_path = (SERVICE, "OWNED_BY", TEAM)
    async with _client(p, url) as client:

        async def walk(entity: str, **graph: Any) -> SearchResponse:
            return await client.search(
                entities=[entity], channels=["graph"], graph=graph, cache="bypass"
            )

        # From the service, `owner` (OWNED_BY out, to a team) reaches the owner's evidence,
        # and nothing else: not the runbook, whose GOVERNS edge it does not walk.
        assert _walked(await walk(SERVICE, templates=["owner"])) == {
            ("catalog/ledger.md", owner_path)
        }
        # `owned` walks the same stored edge from the team's side only (OWNS): from the
        # service it reaches nothing, from the team it reaches the same evidence.
        assert (await walk(SERVICE, templates=["owned"])).hits == []
        assert _walked(await walk(TEAM, templates=["owned"])) == {
            ("catalog/ledger.md", (TEAM, "OWNED_BY", SERVICE))
        }
        # Relations alone honour direction too: OWNS from the service walks nothing.
        assert (await walk(SERVICE, relations=["OWNS"])).hits == []
        assert _walked(await walk(SERVICE, relations=["OWNED_BY"], hops=1)) == {
            ("catalog/ledger.md", owner_path)
        }
        # The defaults still walk what a question about the service needs: its owner and its
        # runbook (GOVERNS read backwards), and the catalog entry ABOUT it.
        default = _walked(await walk(SERVICE))
        assert ("catalog/ledger.md", owner_path) in default
        assert any(doc == "runbooks/ledger.md" for doc, _ in default)
        # Two steps, each in its direction: from the team to its service, then its runbook.
        two = await walk(TEAM, templates=["team_runbooks"])
        runbook = f"document:{p.source}/runbooks/ledger.md"
        assert ("runbooks/ledger.md", (TEAM, "OWNED_BY", SERVICE, "GOVERNS", runbook)) in (
            _walked(two)
        )
        # hops cuts a template: one step from the team reaches the service, not the runbook.
        one = _walked(await walk(TEAM, templates=["team_runbooks"], hops=1))
        assert one == {("catalog/ledger.md", (TEAM, "OWNED_BY", SERVICE))}


async def test_templates_declared_in_settings_are_walked_and_a_forbidden_direction_is_not(
    shared_pipeline: Pipeline,
) -> None:
    """`service_owner` [OWNED_BY -> team] and `team_only` [OWNS -> service], declared as
    GOVINDEX_GRAPH_TEMPLATES declares them, with `service_owner` the only default."""
    p = shared_pipeline
    await _ledger(p)
    settings = p.rt.settings.model_copy(
        update={
            "graph_templates": {
                "service_owner": [GraphStep(relation="OWNED_BY", to="team")],
                "team_only": [GraphStep(relation="OWNS", to="service")],
                "owner_as_group": [GraphStep(relation="OWNED_BY", to="group")],
            },
            "graph_default_templates": ["service_owner"],
        }
    )
    service = ReadService(ReadPorts(store=p.rt.reads, index=None, cache=None, graph=settings.graph))

    async def walk(entity: str, *templates: str) -> SearchResponse:
        body = {
            "tenant": p.tenant,
            "subject": {"principals": ["group:eng"]},
            "purpose": "support",
            "entities": [entity],
            "channels": ["graph"],
            "graph": {"templates": list(templates)},
        }
        return await service.search(SearchRequest.model_validate(body))

    owner = {("catalog/ledger.md", (SERVICE, "OWNED_BY", TEAM))}
    assert _walked(await walk(SERVICE, "service_owner")) == owner
    assert _walked(await walk(SERVICE)) == owner  # the only default
    assert (await walk(SERVICE, "team_only")).hits == []  # OWNS: from a team only
    assert _walked(await walk(TEAM, "team_only")) == {
        ("catalog/ledger.md", (TEAM, "OWNED_BY", SERVICE))
    }
    assert (await walk(SERVICE, "owner_as_group")).hits == []  # the owner is a team


async def test_an_unknown_template_or_relation_is_a_400_naming_the_field(
    api: tuple[Pipeline, str],
) -> None:
    p, url = api
    body = {
        "tenant": p.tenant,
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "entities": [SERVICE],
    }
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=url) as http:
        for path in ("/v1/search", "/v1/packs"):
            refused = await http.post(
                path, json={**body, "graph": {"templates": ["owner", "nope"]}}, headers=headers
            )
            assert refused.status_code == 400, refused.text
            error = refused.json()
            assert error["error"] == "bad_request" and error["field"] == "graph.templates"
            assert "'nope'" in error["reason"] and "team_runbooks" in error["reason"]
            assert error["errors"] == [{"field": "graph.templates", "reason": error["reason"]}]

            refused = await http.post(
                path, json={**body, "graph": {"relations": ["OWNS", "LIKES"]}}, headers=headers
            )
            assert refused.status_code == 400, refused.text
            error = refused.json()
            assert error["field"] == "graph.relations.1"
            assert "LIKES" in error["reason"] and "OWNED_BY" in error["reason"]
        # Refused before anything is read, and recorded like any refusal.
        async with p.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT endpoint, status FROM read_audit WHERE tenant = %s ORDER BY id",
                (p.tenant,),
            )
            assert await cur.fetchall() == [("search", 400), ("pack", 400)]


async def test_an_edge_whose_evidence_the_caller_may_not_see_is_never_walked(
    api: tuple[Pipeline, str],
) -> None:
    p, url = api
    await _ledger(p, owners_acl=["group:hr"])
    async with _client(p, url, "group:eng") as eng, _client(p, url, "group:eng", "group:hr") as hr:
        for client, sees in ((hr, True), (eng, False)):
            owner = await client.search(
                entities=[SERVICE], channels=["graph"], graph={"templates": ["owner"]}
            )
            assert bool(owner.hits) is sees
            # The second step needs the first: the team reaches the runbook only through the
            # HR-only edge, so without it nothing, not even the runbook, is reached.
            two = await client.search(
                entities=[TEAM], channels=["graph"], graph={"templates": ["team_runbooks"]}
            )
            assert any(h.anchor.doc_id == "runbooks/ledger.md" for h in two.hits) is sees
            if not sees:
                assert two.hits == [] and "team-ledger" not in owner.model_dump_json()


async def test_a_walk_past_the_statement_timeout_is_stopped_and_the_read_still_answers(
    shared_pipeline: Pipeline,
) -> None:
    """The walk waits on a lock another transaction holds on graph_edges, so it passes its
    50 ms statement timeout every time; the fulltext channel, after it in the same
    snapshot, still answers."""
    p = shared_pipeline
    await _ledger(p)
    graph = GraphTemplates.of(statement_timeout_ms=50)
    service = ReadService(ReadPorts(store=p.rt.reads, index=None, cache=None, graph=graph))
    request = SearchRequest.model_validate(
        {
            "tenant": p.tenant,
            "subject": {"principals": ["group:eng"]},
            "purpose": "support",
            "query": "ledger workers",
            "entities": [SERVICE],
            "channels": ["graph", "fulltext"],
            "trace": True,
            "cache": "bypass",
        }
    )
    control = await service.search(request)
    assert control.degraded == [] and any("graph" in h.channels for h in control.hits)
    async with p.pool.connection() as holder:
        await holder.execute("LOCK TABLE graph_edges IN ACCESS EXCLUSIVE MODE")
        try:
            started = time.monotonic()
            found = await asyncio.wait_for(service.search(request), timeout=30)
            took = time.monotonic() - started
        finally:
            await holder.rollback()
    assert took < 10
    assert found.degraded == ["graph"]
    assert found.hits and all(set(h.channels) == {"fulltext"} for h in found.hits)
    assert found.trace is not None
    stopped = [t for t in found.trace if t.stage == "graph"]
    assert [t.decision for t in stopped] == ["stopped"]
    assert "statement timeout (50 ms)" in stopped[0].reason
