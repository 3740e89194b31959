"""The production files in deploy/ parse, and every metric the alert rules and the dashboard
query is one govindex exports; every alert has a runbook page in docs/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

import govindex.core.metrics  # noqa: F401 - registers the metrics

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAME = re.compile(r"\bgovindex_[a-z_]+\b")


def exported() -> set[str]:
    return {
        s.name
        for family in REGISTRY.collect()
        for s in family.samples
        if s.name.startswith("govindex_") and not s.name.endswith("_created")
    } | {
        f"{family.name}{suffix}"
        for family in REGISTRY.collect()
        if family.name.startswith("govindex_")
        for suffix in ("", "_total", "_bucket", "_sum", "_count")
    }


def test_every_deploy_file_parses() -> None:
    for path in [*DEPLOY.rglob("*.yml"), *DEPLOY.rglob("*.yaml")]:
        assert list(yaml.safe_load_all(path.read_text())), path
    json.loads((DEPLOY / "grafana" / "govindex-dashboard.json").read_text())


def test_alerts_and_dashboard_query_only_exported_metrics() -> None:
    names = exported()
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    dashboard = json.loads((DEPLOY / "grafana" / "govindex-dashboard.json").read_text())
    queries = [r["expr"] for r in alerts] + [
        t["expr"] for p in dashboard["panels"] for t in p["targets"]
    ]
    used = {n for q in queries for n in NAME.findall(q)}
    assert used and used <= names, sorted(used - names)
    docs = ROOT / "docs"
    for alert in alerts:
        page = alert["annotations"]["runbook_url"].rsplit("/operating/alerts/", 1)[1].strip("/")
        runbook = docs / "operating" / "alerts" / f"{page}.md"
        assert runbook.read_text().startswith(f"# {alert['alert']}\n"), alert["alert"]
    metrics = (docs / "operating" / "metrics.md").read_text()
    for name in {n for n in names if not n.endswith(("_bucket", "_sum", "_count", "_total"))}:
        assert f"`{name}" in metrics, f"{name} is not documented in docs/operating/metrics.md"
