"""One change is one trace: the W3C traceparent a connector's event carries reaches the
indexer's receipt, and a deletion's reaches the tombstone forwarded to the purger and the
purge receipt, through the outbox, on a running `govindex up` (no SDK: the API alone
carries the context)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from govindex.core.envelope import decode
from tests.support.operator import apply_source, stack_of
from tests.support.pipeline import git, read_topic
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$")


def events(stack: dict[str, Any], topic: str) -> list[Any]:
    found = []
    for record in read_topic(stack["kafka_bootstrap"], f"{stack['namespace']}.{topic}"):
        found.append(decode(record.key, record.value, [(k, bytes(v)) for k, v in record.headers]))
    return found


def trace_of(envelope: Any) -> str:
    match = TRACEPARENT.match(envelope.extensions.get("traceparent", ""))
    assert match, f"{envelope.type} {envelope.id} carries no valid traceparent"
    return match.group(1)


def wait_for(stack: dict[str, Any], topic: str, want: Any, timeout: float = 60) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in events(stack, topic) if want(e)]
        if found:
            return found
        assert time.monotonic() < deadline, f"nothing on {topic} after {timeout} s"
        time.sleep(0.5)


def test_a_change_and_its_deletion_are_each_one_trace(running: Path) -> None:
    root, stack = running, stack_of(running)
    apply_source(root, "hb")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name in ("a", "b"):
        (repo / f"{name}.md").write_text(f"# {name}\n\nSteps for {name}.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    govindex(root, "ingest", "git", "repo", "--source", "hb")

    changes = {e.subject: e for e in events(stack, "documents") if e.data["source_id"] == "hb"}
    assert set(changes) == {"a.md", "b.md"}
    traces = {doc: trace_of(e) for doc, e in changes.items()}
    assert traces["a.md"] != traces["b.md"]  # each change starts its own trace
    for doc, envelope in changes.items():
        [receipt] = wait_for(
            stack, "receipts", lambda e, i=envelope.id: e.data.get("event_id") == i
        )
        assert receipt.type.endswith("document.indexed.v1")
        assert trace_of(receipt) == traces[doc]

    govindex(root, "delete", "--source", "hb", "--doc", "a.md")
    [deletion] = [e for e in events(stack, "deletions") if e.subject == "a.md"]
    deleted = trace_of(deletion)
    assert deleted not in traces.values()
    [forwarded] = wait_for(stack, "tombstones", lambda e: e.id == deletion.id)
    assert trace_of(forwarded) == deleted
    purged = wait_for(
        stack,
        "receipts",
        lambda e: e.type.endswith("document.purged.v1") and e.data["event_id"] == deletion.id,
    )
    assert {trace_of(e) for e in purged} == {deleted}
