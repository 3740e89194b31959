"""`/metrics` of a running `govindex up`, scraped as Prometheus would: what the pipeline did
(events by outcome, dead letters by reason, bulk items, stage durations, purge latency) and
what is waiting (consumer lag, outbox and purge backlogs, jobs), with bounded labels only."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.builders import MANIFEST_YAML
from tests.support.operator import Samples, poison, scrape, stack_of, value
from tests.support.pipeline import git
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e


def until(url: str, ready: object, timeout: float = 90) -> Samples:
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(url)
        if ready(samples):  # type: ignore[operator]
            return samples
        shown = {k: v for k, v in samples.items() if not k[0].endswith("_bucket")}
        assert time.monotonic() < deadline, f"the metrics never got there: {shown}"
        time.sleep(1)


def test_metrics_are_scraped_from_a_running_stack(running: Path) -> None:
    root, stack = running, stack_of(running)
    url = stack["metrics_url"]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")

    (root / "handbook.yaml").write_text("source_id: handbook\nsource_type: git\n" + MANIFEST_YAML)
    govindex(root, "source", "apply", "handbook.yaml")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name in ("a", "b", "c"):
        (repo / f"{name}.md").write_text(f"# {name}\n\nSteps for {name}.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    govindex(root, "ingest", "git", "repo", "--source", "handbook")
    poison(stack, "nobody", range(4))
    samples = until(
        url,
        lambda s: (
            value(s, "govindex_events_total", consumer="indexer", outcome="indexed") >= 3
            and value(s, "govindex_dead_letters_total", reason="unknown_source") >= 4
        ),
    )
    assert value(samples, "govindex_events_total", outcome="dead_lettered") >= 4
    assert value(samples, "govindex_opensearch_bulk_items_total", result="created") >= 3
    assert value(samples, "govindex_stage_duration_seconds_count", stage="postgres") >= 1
    assert value(samples, "govindex_batch_events_count", consumer="indexer") >= 1
    # The same listener answers the probes a Kubernetes kubelet asks.
    base = url.removesuffix("/metrics")
    with urllib.request.urlopen(base + "/livez", timeout=10) as live:
        body = json.loads(live.read())
    assert body["ok"] is True and "indexer" in body["workers"]
    assert body["heartbeat_age_s"] is not None and body["heartbeat_age_s"] < 60
    with urllib.request.urlopen(base + "/readyz", timeout=10) as ready:
        assert json.loads(ready.read()) == {"ok": True}

    govindex(root, "delete", "--source", "handbook", "--doc", "a.md")
    samples = until(
        url,
        lambda s: (
            value(s, "govindex_purge_latency_seconds_count") >= 1
            and any(
                n == "govindex_consumer_lag_records" and ("group", "govindex.indexer") in ls
                for n, ls in s
            )
            and value(s, "govindex_consumer_lag_records", group="govindex.indexer") == 0
            and any(n == "govindex_consumer_lag_seconds" for n, _ in s)
        ),
    )
    assert value(samples, "govindex_stage_duration_seconds_count", stage="purge") >= 1
    assert value(samples, "govindex_deletion_hidden_seconds_count") >= 1
    for gauge in (
        "govindex_outbox_pending_events",
        "govindex_outbox_oldest_pending_age_seconds",
        "govindex_purges_pending",
        "govindex_purge_oldest_pending_age_seconds",
    ):
        assert any(n == gauge for n, _ in samples), gauge

    govindex(root, "dlq", "redrive")  # a dry-run job, recorded
    samples = until(url, lambda s: value(s, "govindex_jobs", kind="dlq-redrive") >= 1, 60)
    labels = {k for (n, ls) in samples for k, _ in ls if n.startswith("govindex_")}
    assert not labels & {"doc_id", "tenant", "tenant_id", "source", "source_id", "event_id"}
    assert all(n.startswith(("govindex_", "python_", "process_")) for n, _ in samples)
