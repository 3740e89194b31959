"""The admin API of a running `govindex up`: the jobs the CLI runs, started, paused,
re-rated, resumed and listed over HTTP behind the admin token, recorded in the same table."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from govindex.core.deadletters import JOB_HEADER
from tests.support.operator import poison, stack_of, wait_letters
from tests.support.pipeline import read_topic
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e


def call(
    stack: dict[str, Any], method: str, path: str, body: Any = None, token: str | None = ""
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", "X-Govindex-Operator": "tester"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token or stack['admin_token']}"
    request = urllib.request.Request(
        stack["admin_url"] + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers=headers,
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def until(stack: dict[str, Any], job_id: int, ready: Any, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status, job = call(stack, "GET", f"/v1/jobs/{job_id}")
        assert status == 200, job
        if ready(job):
            return dict(job)
        assert time.monotonic() < deadline, job
        time.sleep(0.2)


def test_jobs_are_run_and_steered_over_http_behind_the_admin_token(running: Path) -> None:
    root, stack = running, stack_of(running)
    assert stack["admin_url"].startswith("http://127.0.0.1:") and len(stack["admin_token"]) >= 16
    assert call(stack, "GET", "/v1/jobs", token=None)[0] == 401
    assert call(stack, "GET", "/v1/jobs", token="x" * 32)[0] == 401
    assert call(stack, "GET", "/healthz", token=None) == (200, {"ok": True})
    assert call(stack, "GET", "/livez", token=None) == (200, {"ok": True})
    assert call(stack, "GET", "/readyz", token=None) == (200, {"ok": True})

    since = datetime.now(UTC).isoformat()
    poison(stack, "ghost", range(10))
    wait_letters(root, 10, "--reason", "unknown_source")

    status, refused = call(stack, "POST", "/v1/jobs", {"job": {"kind": "replay"}})
    assert status == 400 and refused["field"] == "job.replay.source", refused
    status, refused = call(stack, "POST", "/v1/jobs", {"job": {"kind": "nope"}})
    assert status == 400, refused
    # Every problem of one request in one 400, the first also as field/reason.
    wrong = {"job": {"kind": "replay"}, "execute": "yes", "rate": -1, "extra": 1}
    status, refused = call(stack, "POST", "/v1/jobs", wrong)
    assert status == 400 and {e["field"] for e in refused["errors"]} == {
        "job.replay.source",
        "job.replay.from",
        "execute",
        "rate",
        "extra",
    }, refused
    assert refused["field"] == refused["errors"][0]["field"], refused

    status, dry = call(stack, "POST", "/v1/jobs", {"job": {"kind": "dlq-redrive"}})
    assert status == 202 and dry["dry_run"] is True and dry["requested_by"] == "http:tester"
    dry = until(stack, dry["id"], lambda j: j["state"] == "succeeded")
    assert dry["counts"] == {"redrive": 10}

    replay = {"kind": "replay", "source": "ghost", "from": since}
    status, job = call(stack, "POST", "/v1/jobs", {"job": replay, "execute": True, "rate": 2})
    assert status == 202 and job["dry_run"] is False, job
    until(stack, job["id"], lambda j: j["done"] >= 2)
    status, paused = call(stack, "POST", f"/v1/jobs/{job['id']}/pause")
    assert status == 200 and paused["state"] == "paused" and paused["done"] < 10, paused
    assert call(stack, "POST", f"/v1/jobs/{job['id']}/rate", {"rate": None})[1]["rate"] is None
    # Resumed at once, while the paused run may still be inside a step: its step is rolled
    # back (every step is fenced on the run holding the job), so nothing goes out twice.
    status, resumed = call(stack, "POST", f"/v1/jobs/{job['id']}/resume")
    assert status == 202 and resumed["state"] == "running"
    done = until(stack, job["id"], lambda j: j["state"] == "succeeded")
    assert done["done"] == 10 and done["counts"]["republished"] == 10, done
    assert done["counts"]["dead_letter"] == 10  # the source is still unknown

    deadline = time.monotonic() + 60
    while True:  # what the relay sent for the job: each record once
        sent = [
            r
            for r in read_topic(stack["kafka_bootstrap"], f"{stack['namespace']}.documents")
            if dict(r.headers).get(JOB_HEADER) == str(job["id"]).encode()
        ]
        if len(sent) >= 10 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    time.sleep(1)
    sent = [
        r
        for r in read_topic(stack["kafka_bootstrap"], f"{stack['namespace']}.documents")
        if dict(r.headers).get(JOB_HEADER) == str(job["id"]).encode()
    ]
    assert len(sent) == 10 and len({dict(r.headers)["ce_id"] for r in sent}) == 10

    status, items = call(stack, "GET", f"/v1/jobs/{job['id']}/items")
    assert status == 200 and [x["reason"] for x in items] == ["unknown_source"] * 10
    status, listed = call(stack, "GET", "/v1/jobs?kind=replay")
    assert status == 200 and [j["id"] for j in listed] == [job["id"]]
    assert call(stack, "POST", f"/v1/jobs/{job['id']}/cancel")[0] == 409
    assert call(stack, "GET", "/v1/jobs/999999")[0] == 404
    shown = json.loads(govindex(root, "jobs", "show", str(job["id"])).stdout)
    assert shown["kind"] == "replay" and shown["requested_by"] == "http:tester"
