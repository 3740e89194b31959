"""Hostile requests to the read API and the admin API, on the real embedded servers: control
characters, oversized lists and bodies, bodies that are not JSON objects and loosely typed
flags are each a 4xx naming the field, never a 500, and never start anything (issue 19)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from govindex.control.admin import OPERATOR_HEADER, AdminServer
from reader.app import ReadServer
from reader.models import MAX_HYDRATED
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e

TOKEN = "hostile-read-token-0123456789"
ADMIN_TOKEN = "hostile-admin-token-0123456789"
# NUL breaks Postgres text outright; ESC is a control character it would store.
CONTROLS = ("\x00", "\x1b")

RUNBOOK = """# Orders DB failover

Promote the replica when the primary of orders-db stops answering.

## Steps

1. Check replication lag on orders-db.
2. Promote the replica with `pg_ctl promote`.
"""


@pytest.fixture
def pipeline(shared_pipeline: Pipeline) -> Pipeline:
    return shared_pipeline


@pytest.fixture
async def api(pipeline: Pipeline) -> AsyncIterator[str]:
    server = ReadServer(pipeline.rt, {TOKEN: [pipeline.tenant]})
    url = await server.start()
    yield url
    await server.stop()


@pytest.fixture
async def admin(pipeline: Pipeline) -> AsyncIterator[str]:
    server = AdminServer(pipeline.rt, ADMIN_TOKEN, "127.0.0.1", 0)
    url = await server.start()
    yield url
    await server.stop()


async def _send(
    url: str,
    path: str,
    *,
    method: str = "POST",
    body: Any = None,
    data: Any = None,
    token: str = TOKEN,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """The status and the decoded JSON answer (every answer here is JSON, refusals too)."""
    sent = {"Authorization": f"Bearer {token}", **(headers or {})}
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            url + path,
            json=body if data is None else None,
            data=data,
            headers=sent,
            skip_auto_headers=["Content-Type"] if data is not None else (),
        ) as resp,
    ):
        raw = await resp.read()
        assert resp.content_type == "application/json", (resp.status, raw[:200])
        return resp.status, json.loads(raw)


def _search(p: Pipeline, **fields: Any) -> dict[str, Any]:
    return {
        "tenant": p.tenant,
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "query": "orders-db failover replica",
        "as_of": datetime.now(UTC).isoformat(),
        "cache": "bypass",
        **fields,
    }


async def _runbook(p: Pipeline) -> None:
    ids = p.publish(p.change("runbooks/orders-db.md", 1, RUNBOOK))
    await p.wait_processed(ids)
    await p.rt.index.refresh()


def _put(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `body` with `value` at the dotted `path` (list indexes as numbers)."""
    copy: dict[str, Any] = json.loads(json.dumps(body))
    *parents, last = path.split(".")
    here: Any = copy
    for part in parents:
        here = here[int(part)] if isinstance(here, list) else here.setdefault(part, {})
    if isinstance(here, list):
        here[int(last)] = value
    else:
        here[last] = value
    return copy


# Where a hostile value can sit in a search, and what the refusal names.
SEARCH_FIELDS: dict[str, Callable[[str], tuple[str, Any]]] = {
    "tenant": lambda c: ("tenant", f"acme{c}"),
    "principal": lambda c: ("subject.principals.0", f"group:eng{c}"),
    "scope": lambda c: ("subject.scopes", [f"pii{c}"]),
    "purpose": lambda c: ("purpose", f"support{c}"),
    "entity": lambda c: ("entities", [f"service:orders-db{c}"]),
    "path_prefix": lambda c: ("filters.path_prefix", f"runbooks/{c}"),
    "label": lambda c: ("filters.labels", [f"key:{c}"]),
    "relation": lambda c: ("graph.relations", [f"owns{c}"]),
    "query": lambda c: ("query", f"orders-db{c} failover"),
}
NAMED = {
    "scope": "subject.scopes.0",
    "entity": "entities.0",
    "label": "filters.labels.0",
    "relation": "graph.relations.0",
}


async def test_a_control_character_anywhere_in_a_search_or_pack_is_a_400_naming_the_field(
    pipeline: Pipeline, api: str
) -> None:
    p = pipeline
    await _runbook(p)
    valid = _search(p)
    status, before = await _send(api, "/v1/search", body=valid)
    assert status == 200 and before["hits"], before  # the positive control
    for route in ("/v1/search", "/v1/packs"):
        for name, place in SEARCH_FIELDS.items():
            for control in CONTROLS:
                path, value = place(control)
                status, refused = await _send(api, route, body=_put(valid, path, value))
                assert status == 400, (route, name, repr(control), refused)
                assert refused["error"] == "bad_request" and refused["reason"], refused
                assert refused["field"] == NAMED.get(name, path), (route, name, refused)
    # Nothing the refusals did changed what a valid request gets back.
    status, after = await _send(api, "/v1/search", body=valid)
    assert status == 200 and after["hits"] == before["hits"]


async def test_lists_and_strings_past_their_bounds_are_400s_naming_the_field(
    pipeline: Pipeline, api: str
) -> None:
    p = pipeline
    cases = {
        "subject.principals": _search(p, subject={"principals": [f"u:{n}" for n in range(65)]}),
        "subject.scopes": _search(
            p, subject={"principals": ["group:eng"], "scopes": [f"s{n}" for n in range(65)]}
        ),
        "entities": _search(p, entities=[f"e:{n}" for n in range(33)]),
        "filters.labels": _search(p, filters={"labels": [f"l:{n}" for n in range(65)]}),
        "channels": _search(p, channels=["bm25"] * 6),
        "subject.principals.0": _search(p, subject={"principals": ["u" * 257]}),
        "filters.path_prefix": _search(p, filters={"path_prefix": "d/" * 600}),
        "query": _search(p, query="q" * 4001),
        "limit": _search(p, limit=201),
    }
    for field, body in cases.items():
        status, refused = await _send(api, "/v1/search", body=body)
        assert status == 400 and refused["field"] == field, (field, refused)
        assert len(refused["reason"]) < 300, refused  # a refusal never echoes the input whole


async def test_a_boolean_or_number_sent_as_a_string_is_refused_not_coerced(
    pipeline: Pipeline, api: str
) -> None:
    p = pipeline
    for field, value in (("trace", "yes"), ("trace", 1), ("limit", "5"), ("window", 5.5)):
        status, refused = await _send(api, "/v1/search", body=_search(p, **{field: value}))
        assert status == 400 and refused["field"] == field, (field, value, refused)
    pack = _search(p, hydration={"parent": "true"})
    status, refused = await _send(api, "/v1/packs", body=pack)
    assert status == 400 and refused["field"] == "hydration.parent", refused


async def test_bodies_that_are_not_json_objects_are_400s_and_huge_bodies_413s(
    pipeline: Pipeline, api: str
) -> None:
    p = pipeline
    for data in (b"[]", b"[1, 2]", b'"text"', b"42", b"null", b"{", b"\xff\xfe", b""):
        status, refused = await _send(api, "/v1/search", data=data)
        assert status == 400 and refused["error"] == "bad_request", (data, refused)
    # Any declared content type: the body is read as JSON, or refused as not JSON.
    for content_type, data in (
        ("text/plain", b"tenant=acme"),
        ("application/x-www-form-urlencoded", b"tenant=acme&query=x"),
        ("multipart/form-data; boundary=x", b"--x\r\n\r\nbody\r\n--x--\r\n"),
    ):
        status, refused = await _send(
            api, "/v1/search", data=data, headers={"Content-Type": content_type}
        )
        assert status == 400 and refused["error"] == "bad_request", (content_type, refused)
    deep = b"[" * 100_000 + b"]" * 100_000
    status, refused = await _send(api, "/v1/search", data=deep)
    assert status == 400, refused
    huge = json.dumps(_search(p, query="x" * (2 * 1024**2))).encode()
    status, refused = await _send(api, "/v1/search", data=huge)
    assert status == 413 and refused["error"] == "too_large", refused

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: refused once read
        yield b'{"query": "'
        for _ in range(64):
            yield b"x" * 32 * 1024

    status, refused = await _send(api, "/v1/search", data=chunked())
    assert status == 413 and refused["error"] == "too_large", refused
    status, _ = await _send(api, "/v1/search", body=_search(p))
    assert status == 200  # the listener is none the worse


def _pin(n: int) -> dict[str, Any]:
    return {
        "chunk_id": f"{n:032x}",
        "doc": "t/s/d.md",
        "version_id": "0" * 32,
        "sequence": 1,
        "source_version": "v1",
        "content_hash": "sha256:" + "0" * 64,
    }


async def test_verify_takes_at_most_the_pins_a_pack_can_hold_and_still_verifies_a_real_pack(
    pipeline: Pipeline, api: str
) -> None:
    p = pipeline
    await _runbook(p)
    status, pack = await _send(api, "/v1/packs", body=_search(p))
    assert status == 200 and pack["manifest"]["items"], pack
    manifest = pack["manifest"]
    status, verdict = await _send(api, "/v1/packs/verify", body={"manifest": manifest})
    assert status == 200 and verdict["status"] == "valid", verdict

    many = [{**_pin(n), "key": f"S{n}", "hydrated": []} for n in range(10_001)]
    status, refused = await _send(
        api, "/v1/packs/verify", body={"manifest": {**manifest, "items": many}}
    )
    assert status == 400 and refused["field"] == "manifest.items", refused
    assert "pins" in refused["reason"] and "10001" in refused["reason"], refused
    # One item may not smuggle in more hydrated pins than a pack attaches to one.
    fat = [{**_pin(0), "key": "S1", "hydrated": [_pin(n) for n in range(MAX_HYDRATED + 1)]}]
    status, refused = await _send(
        api, "/v1/packs/verify", body={"manifest": {**manifest, "items": fat}}
    )
    assert status == 400 and refused["field"] == "manifest.items.0.hydrated", refused

    first = manifest["items"][0]
    for field, value in (
        ("chunk_id", first["chunk_id"] + "\x00"),
        ("key", "S1\x1b"),
        ("doc", "t/s/\x00"),
    ):
        items = [{**first, field: value}, *manifest["items"][1:]]
        status, refused = await _send(
            api, "/v1/packs/verify", body={"manifest": {**manifest, "items": items}}
        )
        assert status == 400 and refused["field"] == f"manifest.items.0.{field}", refused
    naive = {**manifest, "as_of": manifest["as_of"].replace("+00:00", "").rstrip("Z")}
    status, refused = await _send(api, "/v1/packs/verify", body={"manifest": naive})
    assert status == 400 and refused["field"] == "manifest.as_of", refused


async def test_opening_a_chunk_refuses_control_characters_in_its_path_and_query(
    pipeline: Pipeline, api: str
) -> None:
    p = pipeline
    query = [("tenant", p.tenant), ("principal", "group:eng"), ("purpose", "support")]
    many = [("principal", f"u:{n}") for n in range(65)]
    cases: list[tuple[str, list[tuple[str, str]], str]] = [
        ("/v1/chunks/abc%00def", query, "chunk_id"),
        ("/v1/chunks/abc", [*query, ("principal", "group:ops\x00")], "principal"),
        ("/v1/chunks/abc", [*query, ("scope", "pii\x1b")], "scope"),
        ("/v1/chunks/abc", [("tenant", f"{p.tenant}\x00"), *query[1:]], "tenant"),
        ("/v1/chunks/abc", [*query, ("as_of", "2025-01-01T00:00:00")], "as_of"),
        ("/v1/chunks/abc", [*query, *many], "principal"),
    ]
    for path, params, field in cases:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                api + path, params=params, headers={"Authorization": f"Bearer {TOKEN}"}
            ) as resp,
        ):
            body = await resp.json()
            assert resp.status == 400 and body["field"] == field, (path, params, body)
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            api + "/v1/chunks/abc", params=query, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as resp,
    ):
        assert resp.status == 404  # a well-formed unknown id: not found, as before


# --- the admin API ----------------------------------------------------------------------


async def _jobs_by(p: Pipeline, operator: str) -> list[Any]:
    return [j for j in await p.rt.jobs.recent(1000) if j.requested_by == f"http:{operator}"]


async def test_only_a_json_true_makes_a_job_execute_and_a_refused_start_runs_nothing(
    pipeline: Pipeline, admin: str
) -> None:
    p = pipeline
    operator = f"hostile-{uuid.uuid4().hex[:8]}"
    headers = {OPERATOR_HEADER: operator}
    redrive = {"kind": "dlq-redrive"}
    for execute in ("yes", 1, "true", "1", 0, "false", None, [True], {"value": True}):
        status, refused = await _send(
            admin,
            "/v1/jobs",
            body={"job": redrive, "execute": execute},
            token=ADMIN_TOKEN,
            headers=headers,
        )
        assert status == 400 and refused["field"] == "execute", (execute, refused)
    # 1e400 is a JSON number that parses as infinity.
    raw = b'{"job": {"kind": "dlq-redrive"}, "execute": true, "rate": 1e400}'
    status, refused = await _send(admin, "/v1/jobs", data=raw, token=ADMIN_TOKEN, headers=headers)
    assert status == 400 and refused["field"] == "rate", refused
    for body, field in (
        ({"job": redrive, "execute": True, "rate": "2"}, "rate"),
        ({"job": redrive, "execute": True, "rate": 0}, "rate"),
        ({"job": {**redrive, "max": "5"}, "execute": True}, "job.dlq-redrive.max"),
        ({"job": {**redrive, "reason": "unknown\x00"}, "execute": True}, "job.dlq-redrive.reason"),
        ({"job": {"kind": "reindex", "switch": "no"}, "execute": True}, "job.reindex.switch"),
        (
            {"job": {"kind": "replay", "source": "s\x00", "from": "2025-01-01T00:00:00Z"}},
            "job.replay.source",
        ),
        (
            {
                "job": {"kind": "offsets-reset", "group": "g", "topic": "t", "to": {"latest": 1}},
                "execute": True,
            },
            "job.offsets-reset.to.latest",
        ),
    ):
        status, refused = await _send(
            admin, "/v1/jobs", body=body, token=ADMIN_TOKEN, headers=headers
        )
        assert status == 400 and refused["field"] == field, (body, refused)
    for data in (b"[]", b'"execute"', b"{", b"x" * (65 * 1024)):
        status, refused = await _send(
            admin, "/v1/jobs", data=data, token=ADMIN_TOKEN, headers=headers
        )
        assert status in (400, 413) and refused["error"] in ("bad_request", "too_large"), data
    assert await _jobs_by(p, operator) == []  # no job was recorded, so none ran

    status, job = await _send(
        admin,
        "/v1/jobs",
        body={"job": redrive, "execute": True},
        token=ADMIN_TOKEN,
        headers=headers,
    )
    assert status == 202 and job["dry_run"] is False, job
    deadline = asyncio.get_running_loop().time() + 90
    while job["state"] == "running" and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
        status, job = await _send(admin, f"/v1/jobs/{job['id']}", method="GET", token=ADMIN_TOKEN)
    assert job["state"] == "succeeded", job
    assert [j.id for j in await _jobs_by(p, operator)] == [job["id"]]


async def test_admin_path_and_query_parameters_are_400s_not_500s(admin: str) -> None:
    for path, field in (
        ("/v1/jobs/%C2%B2", "job_id"),  # "²" is a digit to str.isdigit, not to int
        ("/v1/jobs/99999999999999999999", "job_id"),
        ("/v1/jobs/%C2%B2/items", "job_id"),
        ("/v1/jobs?limit=%C2%B2", "limit"),
        ("/v1/jobs?limit=0", "limit"),
        ("/v1/jobs?kind=%00", "kind"),
        ("/v1/jobs?kind=" + "k" * 65, "kind"),
    ):
        status, refused = await _send(admin, path, method="GET", token=ADMIN_TOKEN)
        assert status == 400 and refused["field"] == field, (path, refused)
    status, refused = await _send(admin, "/v1/jobs/%C2%B2/pause", token=ADMIN_TOKEN, body={})
    assert status == 400 and refused["field"] == "job_id", refused
