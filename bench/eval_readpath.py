"""Retrieval quality and governance of the read path, on a real public runbook corpus.

The corpus is the Prometheus Operator runbooks (Apache-2.0, pinned in bench/corpus/), plus
a small governed overlay generated here: a service catalog whose frontmatter links alerts
to services, services to teams and runbooks (the multi-hop cohort), a policy with two
versions and a policy that only exists later (temporal), restricted documents (ACL), two
documents deleted before querying (deletion), and two owners of one service (conflict).

For every channel alone, channels added one by one, and full fusion, it reports Recall@10,
nDCG@10 and MRR per cohort (document level: a document counts once, at its best chunk),
p50/p95 latency as a ratio to BM25 alone measured in the same run, and governance counts
(a forbidden document in any result), which must be zero.

    make eval-readpath
"""

from __future__ import annotations

import asyncio
import math
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from govindex.control.bootstrap import prepare
from govindex.control.workers import Workers
from govindex.core.logs import configure_logging
from govindex.core.records import SourceManifest
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.composition import Runtime
from ingest.app import sync_source
from reader.app import read_service
from reader.models import PackRequest, SearchRequest

HERE = Path(__file__).parent
CORPUS = HERE / "corpus" / "prometheus-runbooks"
QUERIES = HERE / "eval" / "queries.yaml"
TENANT = "eval"
CONFIGS: dict[str, list[str]] = {
    "bm25": ["bm25"],
    "fulltext": ["fulltext"],
    "dense": ["dense"],
    "structured": ["structured"],
    "graph": ["graph"],
    "bm25+fulltext": ["bm25", "fulltext"],
    "+structured": ["bm25", "fulltext", "structured"],
    "+graph": ["bm25", "fulltext", "structured", "graph"],
    "full (+dense)": ["bm25", "fulltext", "structured", "graph", "dense"],
}
RANKED = ("exact", "paraphrase", "multihop", "temporal", "acl", "deletion", "conflict")

# --- the governed overlay ---------------------------------------------------------------

SERVICES = {
    "checkout": ("team-payments", ["KubeHpaMaxedOut", "KubeDeploymentReplicasMismatch"]),
    "ledger": ("team-payments", ["KubePersistentVolumeFillingUp", "KubeJobFailed"]),
    "metrics-gateway": ("team-observability", ["PrometheusRemoteWriteBehind"]),
    "paging": ("team-observability", ["AlertmanagerFailedToSendAlerts"]),
    "search": ("team-discovery", ["KubePodCrashLooping", "CPUThrottlingHigh"]),
    "notifications": ("team-messaging", ["KubeQuotaExceeded"]),
    "inventory": ("team-supply", ["NodeFilesystemSpaceFillingUp"]),
}
PURPOSE = {
    "checkout": "takes orders and payments from the web shop",
    "ledger": "books every payment into the double-entry ledger with a nightly batch",
    "metrics-gateway": "forwards metrics from all clusters to long-term storage",
    "paging": "routes alerts to the on-call engineers",
    "search": "answers product search queries from the catalogue index",
    "notifications": "sends e-mails and push messages to customers",
    "inventory": "tracks stock levels in the warehouses",
}


def overlay_v1() -> dict[str, str]:
    files: dict[str, str] = {}
    teams: dict[str, list[str]] = {}
    for service, (team, alerts) in SERVICES.items():
        teams.setdefault(team, []).append(service)
        files[f"services/{service}.md"] = (
            f"---\nservice: {service}\nowner: {team}\nalerts: [{', '.join(alerts)}]\n---\n"
            f"# {service} service\n\nThe {service} service {PURPOSE[service]}.\n\n## Alerts\n\n"
            f"{' and '.join(alerts)} page the on-call engineer of {team}.\n"
        )
        files[f"runbooks/{service}.md"] = (
            f"---\nservice: {service}\n---\n# Runbook: {service}\n\n## Restart\n\n"
            f"Roll the {service} deployment with `kubectl rollout restart deploy/{service}` "
            f"and watch the error rate settle.\n\n## Scale\n\nRaise the replica count of "
            f"{service} when latency grows; lower it again after the peak.\n"
        )
    for team, services in teams.items():
        files[f"teams/{team}.md"] = (
            f"---\nservices: [{', '.join(services)}]\n---\n# {team}\n\n{team} runs "
            f"{', '.join(services)}. The on-call rotation is in the paging tool; the "
            f"escalation phone is on the team page.\n"
        )
    files["ownership/search-2025.md"] = (
        "---\nservice: search\nowner: team-relevance\n---\n# Search ownership 2025\n\n"
        "From 2025 the search service is owned by team-relevance.\n"
    )
    files["policies/escalation.md"] = (
        "---\nvalid_from: 2025-01-01T00:00:00Z\n---\n# Incident escalation\n\n"
        "Escalate an incident to the incident commander after 30 minutes without progress.\n"
    )
    files["restricted/break-glass.md"] = (
        "---\nacl: [group:sre-leads]\n---\n# Break glass for KubeAPIDown\n\nThe emergency "
        "admin credentials for the api server are in vault path ops/break-glass; rotate "
        "them after use.\n"
    )
    files["restricted/oncall-pay.md"] = (
        "---\nacl: [group:hr]\n---\n# On-call allowance\n\nSalary bands: the on-call "
        "allowance per week is 450 EUR for band 3.\n"
    )
    files["restricted/etcd-root-ca.md"] = (
        "---\nacl: [group:sre-leads]\n---\n# etcd root certificate\n\nDisaster recovery of "
        "etcd with the root certificate authority key stored offline.\n"
    )
    files["runbooks/legacy-ledger.md"] = (
        "---\nservice: ledger\n---\n# Legacy ledger reconciliation\n\nLegacyLedgerStuck: "
        "replay the old ledger batch from the archive tapes.\n"
    )
    files["runbooks/fax-gateway.md"] = (
        "# Fax gateway\n\nRestart the decommissioned fax gateway when its queue is stuck.\n"
    )
    return files


def overlay_v2(v1: dict[str, str]) -> dict[str, str]:
    files = {
        k: v
        for k, v in v1.items()
        if k not in ("runbooks/legacy-ledger.md", "runbooks/fax-gateway.md")
    }
    files["policies/escalation.md"] = (
        "---\nvalid_from: 2025-06-01T00:00:00Z\n---\n# Incident escalation\n\n"
        "Escalate an incident to the incident commander after 15 minutes without progress.\n"
    )
    files["policies/paging-rotation.md"] = (
        "---\nvalid_from: 2025-06-01T00:00:00Z\n---\n# Paging rotation\n\nThe paging "
        "rotation hands over every Monday at 10:00 local time.\n"
    )
    return files


def write(folder: Path, files: dict[str, str]) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    for path, text in files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def manifest(source_id: str) -> SourceManifest:
    return SourceManifest.model_validate(
        {
            "source_id": source_id,
            "tenant": TENANT,
            "source_type": "folder",
            "owner_team": "platform",
            "classification": "internal",
            "default_acl": ["group:eng", "group:sre-leads"],
            "allowed_purposes": ["support"],
            "trust_level": "authoritative",
            "folder": {"path": ".", "include": ["*.md"]},
        }
    )


# --- measuring --------------------------------------------------------------------------


@dataclass
class Scores:
    recall: list[float] = field(default_factory=list)
    ndcg: list[float] = field(default_factory=list)
    mrr: list[float] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)
    governance: int = 0
    returned: list[int] = field(default_factory=list)


def doc_of(source_id: str, doc_id: str) -> str:
    return f"overlay:{doc_id}" if source_id == "catalog" else doc_id


def rank_metrics(ranked: list[str], relevant: set[str]) -> tuple[float, float, float]:
    top = ranked[:10]
    hits = [1.0 if d in relevant else 0.0 for d in top]
    recall = sum(hits) / len(relevant)
    dcg = sum(h / math.log2(i + 2) for i, h in enumerate(hits))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    mrr = next((1 / (i + 1) for i, h in enumerate(hits) if h), 0.0)
    return recall, dcg / ideal, mrr


async def evaluate(rt: Runtime, queries: dict[str, list[dict[str, Any]]]) -> None:
    service = read_service(rt)
    results: dict[tuple[str, str], Scores] = {}
    for config, channels in CONFIGS.items():
        for cohort, items in queries.items():
            scores = results.setdefault((config, cohort), Scores())
            for item in items:
                request = SearchRequest.model_validate(
                    {
                        "tenant": TENANT,
                        "subject": {"principals": item.get("principals", ["group:eng"])},
                        "purpose": "support",
                        "as_of": item.get("as_of"),
                        "query": item["q"],
                        "entities": item.get("entities", []),
                        "channels": channels,
                        "limit": 40,
                        "cache": "bypass",
                    }
                )
                started = time.perf_counter()
                response = await service.search(request)
                scores.latency.append(time.perf_counter() - started)
                ranked = list(
                    dict.fromkeys(
                        doc_of(h.anchor.source_id, h.anchor.doc_id) for h in response.hits
                    )
                )
                scores.governance += len(set(ranked) & set(item.get("forbidden", [])))
                scores.returned.append(len(ranked[:10]))
                relevant = set(item["relevant"])
                if relevant:
                    r, n, m = rank_metrics(ranked, relevant)
                    scores.recall.append(r)
                    scores.ndcg.append(n)
                    scores.mrr.append(m)
    conflicts = await conflict_flags(service, queries.get("conflict", []))
    report(results, conflicts, queries)


async def conflict_flags(service: Any, items: list[dict[str, Any]]) -> tuple[int, int]:
    flagged = 0
    for item in items:
        pack = await service.pack(
            PackRequest.model_validate(
                {
                    "tenant": TENANT,
                    "subject": {"principals": ["group:eng"]},
                    "purpose": "support",
                    "query": item["q"],
                    "entities": item.get("entities", []),
                    "cache": "bypass",
                }
            )
        )
        if any(f.kind == "relation" for i in pack.items for f in i.flags):
            flagged += 1
    return flagged, len(items)


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(
    results: dict[tuple[str, str], Scores],
    conflicts: tuple[int, int],
    queries: dict[str, list[dict[str, Any]]],
) -> None:
    total = sum(len(v) for v in queries.values())
    print(
        f"\n{total} labelled queries over {len(queries)} cohorts: "
        + ", ".join(f"{c} {len(v)}" for c, v in queries.items())
    )
    for metric in ("recall", "ndcg", "mrr"):
        name = {"recall": "Recall@10", "ndcg": "nDCG@10", "mrr": "MRR"}[metric]
        print(f"\n{name:<16}" + "".join(f"{c[:10]:>11}" for c in RANKED) + f"{'overall':>11}")
        for config in CONFIGS:
            row = [getattr(results[(config, c)], metric) for c in RANKED]
            overall = [v for values in row for v in values]
            print(
                f"{config:<16}"
                + "".join(f"{_mean(v):>11.3f}" for v in row)
                + f"{_mean(overall):>11.3f}"
            )
    base = [t for c in queries for t in results[("bm25", c)].latency]
    print(
        f"\n{'latency':<16}{'p50 ms':>10}{'p95 ms':>10}{'p50 ×bm25':>11}{'p95 ×bm25':>11}"
        f"{'governance':>12}{'no-answer hits':>16}"
    )
    for config in CONFIGS:
        lat = [t for c in queries for t in results[(config, c)].latency]
        gov = sum(results[(config, c)].governance for c in queries)
        noanswer = results.get((config, "noanswer"))
        empty = _mean([float(n) for n in noanswer.returned]) if noanswer else float("nan")
        print(
            f"{config:<16}{_pct(lat, 0.5) * 1000:>10.1f}{_pct(lat, 0.95) * 1000:>10.1f}"
            f"{_pct(lat, 0.5) / _pct(base, 0.5):>11.2f}{_pct(lat, 0.95) / _pct(base, 0.95):>11.2f}"
            f"{gov:>12}{empty:>16.1f}"
        )
    print(f"\nconflict flags raised on {conflicts[0]}/{conflicts[1]} conflict-cohort packs")
    full = [v for c in RANKED for v in results[("full (+dense)", c)].ndcg]
    bm25 = [v for c in RANKED for v in results[("bm25", c)].ndcg]
    hop_full = _mean(results[("full (+dense)", "multihop")].recall)
    hop_bm25 = _mean(results[("bm25", "multihop")].recall)
    governance = sum(results[(k, c)].governance for k in CONFIGS for c in queries)
    print(
        f"targets: full nDCG@10 {_mean(full):.3f} vs bm25 {_mean(bm25):.3f} "
        f"({'met' if _mean(full) >= _mean(bm25) else 'MISSED'}); multi-hop Recall@10 "
        f"{hop_full:.3f} vs bm25 {hop_bm25:.3f} + 0.15 "
        f"({'met' if hop_full >= hop_bm25 + 0.15 else 'MISSED'}); governance failures "
        f"{governance} ({'met' if governance == 0 else 'MISSED'})"
    )


async def main() -> int:
    configure_logging(level="WARNING")
    queries: dict[str, list[dict[str, Any]]] = yaml.safe_load(QUERIES.read_text())
    with tempfile.TemporaryDirectory(prefix="govindex-eval-") as tmp:
        root = Path(tmp)
        stack = EmbeddedStack(root / "state", namespace="eval", durable=False)
        print("starting the embedded stack ...", flush=True)
        settings = Settings(state_dir=root / "state", namespace="eval").model_copy(
            update=stack.start()
        )
        try:
            await prepare(settings)
            async with Runtime(settings) as rt:
                workers = Workers(rt, run=("indexer", "purger"))
                await workers.start()
                try:
                    for source in ("runbooks", "catalog"):
                        await rt.registry.register(manifest(source))
                    started = time.perf_counter()
                    await sync_source(rt, "runbooks", CORPUS)
                    v1 = overlay_v1()
                    write(root / "overlay", v1)
                    await sync_source(rt, "catalog", root / "overlay")
                    await caught_up(rt)
                    write(root / "overlay", overlay_v2(v1))
                    await sync_source(rt, "catalog", root / "overlay")
                    await caught_up(rt)
                    await rt.index.refresh()
                    print(f"ingested and indexed in {time.perf_counter() - started:.1f}s")
                    await evaluate(rt, queries)
                finally:
                    await workers.stop()
        finally:
            stack.stop()
    return 0


async def caught_up(rt: Runtime, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        behind = [await rt.ingest_state.behind(s) for s in ("runbooks", "catalog")]
        if not any(behind):
            return
        await asyncio.sleep(0.3)
    raise TimeoutError("the indexer did not catch up")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
