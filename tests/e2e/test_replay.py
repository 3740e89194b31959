"""`govindex replay` against a running `govindex up`: a dry run predicts, per event, what
the indexer then does when the same range is executed; a replay after a purge brings
nothing back, even when the processed-events ledger forgot the events."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from govindex.adapters.kafka import KafkaEventPublisher
from govindex.core import events
from govindex.core.envelope import encode_document_event
from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex
from tests.support.operator import apply_source, job_of, scrape, stack_of, value, wait_letters
from tests.support.pipeline import git
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e


def change(doc: str, sequence: int, text: str, *, source: str, bad_hash: bool = False) -> Any:
    body = DocumentChanged(
        tenant_id="acme",
        source_id=source,
        doc_id=doc,
        source_version=f"v{sequence}",
        sequence=sequence,
        observed_at=datetime.now(UTC),
        content_hash=sha256_hex(text + ("tampered" if bad_hash else "")),
        content=text,
        path=doc,
    )
    kind, op = (
        (events.DOCUMENT_CREATED, "created")
        if sequence == 1
        else (events.DOCUMENT_UPDATED, "updated")
    )
    return encode_document_event(kind, body, op=op)


def publish(stack: dict[str, Any], records: list[Any]) -> None:
    with KafkaEventPublisher(stack["kafka_bootstrap"]) as publisher:
        for record in records:
            publisher.publish(f"{stack['namespace']}.documents", record)
        publisher.flush()


def items(root: Path, job_id: int) -> list[dict[str, Any]]:
    out = govindex(root, "jobs", "items", str(job_id), "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def documents(dsn: str, source: str) -> dict[str, tuple[str, int, int]]:
    """doc_id -> (state, last_sequence, chunks held)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT d.doc_id, d.state, d.last_sequence, (SELECT count(*) FROM chunks c WHERE "
            " c.tenant_id = d.tenant_id AND c.source_id = d.source_id AND c.doc_id = d.doc_id) "
            "FROM documents d WHERE d.source_id = %s",
            (source,),
        ).fetchall()
    return {r[0]: (r[1], int(r[2]), int(r[3])) for r in rows}


def outcomes(url: str) -> dict[str, float]:
    samples = scrape(url)
    names = ("indexed", "duplicate", "stale", "dead_lettered", "tombstoned", "metadata_updated")
    return {n: value(samples, "govindex_events_total", outcome=n) for n in names}


def test_a_replay_dry_run_predicts_what_its_execute_does(running: Path) -> None:
    root, stack = running, stack_of(running)
    dsn, url = stack["pg_dsn"], stack["metrics_url"]
    text = {n: f"# {n}\n\nHow to handle {n}.\n" for n in ("a1", "a2", "b", "c", "d", "e1", "e2")}
    since = datetime.now(UTC)
    # Source "late" is not registered yet: the indexer dead-letters each of these.
    first = change("a.md", 1, text["a1"], source="late")
    publish(
        stack,
        [
            first,
            first,  # the same event twice: the second copy is a duplicate
            change("a.md", 2, text["a2"], source="late"),
            change("b.md", 1, text["b"], source="late"),  # deleted before the replay
            change("c.md", 1, text["c"], source="late", bad_hash=True),
            change("e.md", 1, text["e1"], source="late"),  # overtaken live before the replay
        ],
    )
    wait_letters(root, 6, "--reason", "unknown_source")
    time.sleep(1.1)
    until = datetime.now(UTC)
    time.sleep(1.1)
    publish(stack, [change("d.md", 1, text["d"], source="late")])  # after --to: not replayed
    wait_letters(root, 7, "--reason", "unknown_source")

    apply_source(root, "late")
    # Never indexed (its events were dead-lettered): a delete of it must be forced.
    govindex(root, "delete", "--source", "late", "--doc", "b.md", "--force")
    publish(stack, [change("e.md", 2, text["e2"], source="late")])
    deadline = time.monotonic() + 60
    while documents(dsn, "late").get("e.md", ("", 0, 0))[1] != 2 or "b.md" not in documents(
        dsn, "late"
    ):
        assert time.monotonic() < deadline, documents(dsn, "late")
        time.sleep(0.5)
    before = documents(dsn, "late")
    assert set(before) == {"b.md", "e.md"} and before["b.md"][0] == "deleted"

    span = ["--source", "late", "--from", since.isoformat(), "--to", until.isoformat()]
    dry = govindex(root, "replay", *span)
    assert "dry run" in dry.stdout, dry.stdout
    dry_job = job_of(root, dry.stdout)
    # In each partition's order; a document's events are in one partition, in order.
    predicted = sorted(items(root, dry_job["id"]), key=lambda x: x["doc_key"])
    want = [
        ("acme/late/a.md", 1, "apply", ""),
        ("acme/late/a.md", 1, "duplicate", ""),
        ("acme/late/a.md", 2, "apply", ""),
        ("acme/late/b.md", 1, "behind_tombstone", ""),
        ("acme/late/c.md", 1, "dead_letter", "invalid_event"),
        ("acme/late/e.md", 1, "stale", ""),
    ]
    assert [(x["doc_key"], x["sequence"], x["outcome"], x["reason"]) for x in predicted] == want
    assert dry_job["counts"] == {
        "apply": 2,
        "duplicate": 1,
        "behind_tombstone": 1,
        "dead_letter": 1,
        "stale": 1,
    }
    assert documents(dsn, "late") == before  # a dry run changes nothing
    assert len(wait_letters(root, 7)) == 7  # and publishes nothing

    seen = outcomes(url)
    done = govindex(root, "replay", *span, "--execute")
    job = job_of(root, done.stdout)
    assert job["counts"] == {**dry_job["counts"], "republished": 6}, job
    executed = sorted(items(root, job["id"]), key=lambda x: x["doc_key"])
    assert [(x["event_id"], x["outcome"], x["reason"]) for x in executed] == [
        (x["event_id"], x["outcome"], x["reason"]) for x in predicted
    ]

    # What the indexer did: two applied, one duplicate, two stale (one behind the tombstone),
    # one dead-lettered with the predicted reason; d.md, outside the range, still absent.
    expected = {"indexed": 2, "duplicate": 1, "stale": 2, "dead_lettered": 1}
    deadline = time.monotonic() + 90
    while True:
        now = outcomes(url)
        delta = {k: now[k] - seen[k] for k in now if now[k] != seen[k]}
        if delta == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    time.sleep(2)  # nothing more arrives
    now = outcomes(url)
    assert {k: now[k] - seen[k] for k in now if now[k] != seen[k]} == expected
    after = documents(dsn, "late")
    assert after["a.md"][:2] == ("active", 2) and after["a.md"][2] > 0
    assert after["b.md"] == before["b.md"] and after["b.md"][2] == 0  # nothing came back
    assert after["e.md"] == before["e.md"]
    assert "c.md" not in after and "d.md" not in after
    with psycopg.connect(dsn) as conn:
        letter = conn.execute(
            "SELECT reason FROM dead_lettered WHERE consumer = 'indexer' AND event_id = %s",
            (predicted[4]["event_id"],),
        ).fetchone()
        outbox = conn.execute(
            "SELECT count(*) FROM outbox WHERE awaits IS NOT NULL AND settled_at IS NULL"
        ).fetchone()
    assert letter == ("invalid_event",) and outbox == (0,)


def test_a_replay_after_a_purge_resurrects_nothing(running: Path) -> None:
    """Even with the processed-events ledger emptied (a restore from an older backup), the
    tombstone's sequence drops every replayed event of the purged document."""
    root, stack = running, stack_of(running)
    dsn = stack["pg_dsn"]
    apply_source(root, "hb")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    since = datetime.now(UTC)
    for n, body in enumerate(("first", "second"), start=1):
        for name in ("keep", "gone"):
            (repo / f"{name}.md").write_text(f"# {name}\n\nThe {body} text of {name}.\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {n}")
        govindex(root, "ingest", "git", "repo", "--source", "hb")
    govindex(root, "delete", "--source", "hb", "--doc", "gone.md")
    deadline = time.monotonic() + 90
    verify = ("verify-purge", "--source", "hb", "--doc", "gone.md")
    while govindex(root, *verify, check=False).returncode != 0:
        assert time.monotonic() < deadline, "gone.md was never purged"
        time.sleep(1)
    before = documents(dsn, "hb")
    assert before["gone.md"][0] == "deleted" and before["gone.md"][2] == 0
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM processed_events WHERE consumer = 'indexer'")

    span = ["--source", "hb", "--from", since.isoformat()]
    dry = job_of(root, govindex(root, "replay", *span).stdout)
    gone = [x for x in items(root, dry["id"]) if x["doc_key"] == "acme/hb/gone.md"]
    assert [x["outcome"] for x in gone] == ["behind_tombstone"] * 3, gone  # 2 changes, delete
    job = job_of(root, govindex(root, "replay", *span, "--execute").stdout)
    assert job["counts"]["republished"] == job["total"] == dry["total"]
    with psycopg.connect(dsn) as conn:
        deadline = time.monotonic() + 90
        while conn.execute(
            "SELECT count(*) FROM outbox WHERE awaits IS NOT NULL AND settled_at IS NULL"
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, "the replayed events were never consumed"
            time.sleep(0.5)
    after = documents(dsn, "hb")
    assert after["gone.md"] == before["gone.md"]
    ask = ("--tenant", "acme", "--principal", "group:eng", "--purpose", "support")
    assert "keep.md" in govindex(root, "query", "second text of keep", *ask).stdout
    assert "gone.md" not in govindex(root, "query", "second text of gone", *ask).stdout
    assert after["keep.md"] == before["keep.md"]
