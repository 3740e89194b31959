"""Helpers of the end-to-end tests that drive `govindex up` from a second terminal: the
stack's addresses, poison records, dead letters, jobs, metrics and a settled pipeline."""

from __future__ import annotations

import json
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from govindex.adapters.kafka import KafkaEventPublisher
from govindex.core import events
from govindex.core.envelope import encode_document_event
from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex
from tests.support.builders import MANIFEST_YAML
from tests.support.stack import govindex

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def settled(dsn: str, timeout: float = 120) -> None:
    """Every emitted event applied, every purge done."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            pending = conn.execute(
                "SELECT (SELECT count(*) FROM outbox WHERE awaits IS NOT NULL "
                " AND settled_at IS NULL) + (SELECT count(*) FROM outbox WHERE "
                " published_at IS NULL) + (SELECT count(*) FROM tombstones "
                " WHERE purge_state <> 'purged')"
            ).fetchone()
            if pending == (0,):
                return
            assert time.monotonic() < deadline, f"{pending} events or purges still pending"
            time.sleep(0.5)


def apply_source(root: Path, source: str) -> None:
    (root / f"{source}.yaml").write_text(f"source_id: {source}\nsource_type: git\n" + MANIFEST_YAML)
    govindex(root, "source", "apply", f"{source}.yaml")


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum over the series of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def stack_of(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / ".govindex" / "stack.json").read_text())
    return data


def poison(stack: dict[str, Any], source: str, docs: range) -> None:
    """Document events of a source nobody registered: the indexer dead-letters each one."""
    with KafkaEventPublisher(stack["kafka_bootstrap"]) as publisher:
        for n in docs:
            text = f"# Doc {n}\n\nbody {n}\n"
            body = DocumentChanged(
                tenant_id="acme",
                source_id=source,
                doc_id=f"d{n}.md",
                source_version="v1",
                sequence=1,
                observed_at=datetime.now(UTC),
                content_hash=sha256_hex(text),
                content=text,
                path=f"d{n}.md",
            )
            record = encode_document_event(events.DOCUMENT_CREATED, body, op="created")
            publisher.publish(f"{stack['namespace']}.documents", record)
        publisher.flush()


def letters(root: Path, *args: str) -> list[dict[str, Any]]:
    out = govindex(root, "dlq", "list", "--json", "--max", "1000", *args).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def wait_letters(root: Path, want: int, *args: str, timeout: float = 90) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        found = letters(root, *args)
        if len(found) >= want:
            return found
        time.sleep(1)
    raise AssertionError(f"{len(found)} dead letters after {timeout} s, wanted {want}")


def job_of(root: Path, output: str) -> dict[str, Any]:
    job_id = output.split()[1]  # "job 7 (dlq-redrive, ...) succeeded: ..."
    shown: dict[str, Any] = json.loads(govindex(root, "jobs", "show", job_id).stdout)
    return shown


def wait_job(
    stack: dict[str, Any], ready: Any, timeout: float = 90, kind: str = "dlq-redrive"
) -> dict[str, Any]:
    """The newest job of `kind` once `ready(job)` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with psycopg.connect(stack["pg_dsn"]) as conn:
            row = conn.execute(
                "SELECT id, state, done, total FROM jobs WHERE kind = %s ORDER BY id DESC LIMIT 1",
                (kind,),
            ).fetchone()
        if row is not None:
            job = dict(zip(("id", "state", "done", "total"), row, strict=True))
            if ready(job):
                return job
        time.sleep(0.2)
    raise AssertionError(f"the {kind} job did not get there")
