"""The production files in deploy/ parse, and every metric the alert rules and the dashboard
query is one govindex exports; every alert has a runbook page in docs/. The compose stack
keeps Kafka's log on its volume, gives the webhook receiver a mirror volume it may write and
registers the example sources; the image installs only hash-pinned packages as user 10001.
(The Helm chart: tests/unit/test_helm_chart.py.)"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from prometheus_client import REGISTRY

import govindex.core.metrics  # noqa: F401 - registers the metrics

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAME = re.compile(r"\bgovindex_[a-z_]+\b")
COMPOSE = DEPLOY / "compose" / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
# Go templates, YAML only once rendered (tests/unit/test_helm_chart.py renders them).
TEMPLATES = DEPLOY / "helm" / "govindex" / "templates"
UID = "10001"
PIN = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s;]+)(?: ;[^\\]+)? \\$")
HASH = re.compile(r"^    --hash=sha256:[0-9a-f]{64}(?: \\)?$")


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
    paths = [*DEPLOY.rglob("*.yml"), *DEPLOY.rglob("*.yaml")]
    paths = [p for p in paths if TEMPLATES not in p.parents]
    assert len(paths) >= 10
    for path in paths:
        assert list(yaml.safe_load_all(path.read_text())), path
    json.loads((DEPLOY / "grafana" / "govindex-dashboard.json").read_text())
    json.loads((DEPLOY / "helm" / "govindex" / "values.schema.json").read_text())


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


def compose() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    return services


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """volume (or host path) -> where the container sees it."""
    found = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        found[source] = target
    return found


def test_kafka_writes_its_log_to_its_volume() -> None:
    kafka = compose()["kafka"]
    # apache/kafka's own default, /tmp/kraft-combined-logs, is not on the volume.
    assert kafka["environment"]["KAFKA_LOG_DIRS"] == mounts(kafka)["kafkadata"]


def test_the_webhook_receiver_can_write_its_mirror_volume() -> None:
    services = compose()
    webhooks, init = services["webhooks"], services["mirrors-init"]
    state = webhooks["environment"]["GOVINDEX_STATE_DIR"]
    assert mounts(webhooks)["mirrors"] == state == mounts(init)["mirrors"]
    assert init["user"] == "0:0"
    assert init["entrypoint"] == ["chown", "-R", f"{UID}:{UID}", state]
    needs = webhooks["depends_on"]
    assert needs["mirrors-init"] == {"condition": "service_completed_successfully"}
    # The image's user is that uid, and the image makes the directory its own too.
    text = DOCKERFILE.read_text()
    assert f"USER {UID}:{UID}" in text
    assert f"install -d -o {UID} -g {UID} -m 0750 {state} {state}/mirrors" in text
    assert f"GOVINDEX_STATE_DIR={state}" in text


def test_the_sources_one_shot_registers_every_manifest_after_bootstrap(
    capsys: Any,
) -> None:
    from govindex.cli.main import main

    services = compose()
    sources = services["sources"]
    folder = mounts(sources)["./sources"]
    assert sources["volumes"] == [f"./sources:{folder}:ro"]
    assert sources["entrypoint"] == ["sh", "-c", f"exec govindex source apply {folder}/*.yaml"]
    assert sources["depends_on"] == {"bootstrap": {"condition": "service_completed_successfully"}}
    assert sources["environment"] == services["bootstrap"]["environment"]
    manifests = sorted((COMPOSE.parent / "sources").glob("*.yaml"))
    assert [p.name for p in manifests] == ["example.yaml"]
    assert main(["source", "apply", "--check", *map(str, manifests)]) == 0
    assert "ok  handbook" in capsys.readouterr().out
    # The receiver has the variable the example names for its secret.
    secret_env = yaml.safe_load(manifests[0].read_text())["git"]["webhook_secret_env"]
    assert secret_env in services["webhooks"]["environment"]


def test_the_image_installs_only_hash_pinned_packages() -> None:
    text = DOCKERFILE.read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) == 2
    assert "--require-hashes --only-binary=:all: \\\n        -r /tmp/requirements.lock" in text
    assert "-r /tmp/build-requirements.lock" in text
    assert "pip install --no-deps --no-index /tmp/wheels/*.whl" in text
    assert "--no-build-isolation" in text
    # Every file a COPY takes from the context is one .dockerignore lets through.
    allowed = {
        line[1:].strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = [
        source
        for line in text.splitlines()
        if line.startswith("COPY ") and "--from=" not in line
        for source in line.split()[1:-1]
    ]
    assert copied
    for source in copied:
        assert any(source == a or source.startswith(f"{a}/") for a in allowed), source


def locked(path: Path) -> dict[str, str]:
    """name -> version of a lock file, checking each entry's shape."""
    pins: dict[str, str] = {}
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    assert lines, path
    current = None
    for line in lines:
        pin = PIN.match(line)
        if pin:
            current = canonicalize_name(pin["name"])
            assert current not in pins, line
            pins[current] = pin["version"]
            continue
        assert HASH.match(line) and current, f"{path.name}: {line!r}"
    assert not lines[-1].endswith("\\"), path
    return pins


def test_the_lock_files_pin_every_requirement_with_hashes() -> None:
    projects = [ROOT, ROOT / "clients" / "python"]
    pyprojects = [tomllib.loads((p / "pyproject.toml").read_text()) for p in projects]
    runtime = locked(DEPLOY / "requirements.lock")
    local = {canonicalize_name(p["project"]["name"]) for p in pyprojects}
    assert not local & set(runtime), "the projects themselves are built from the tree"
    for project in pyprojects:
        for line in project["project"]["dependencies"]:
            requirement = Requirement(line)
            name = canonicalize_name(requirement.name)
            if name in local:
                continue
            assert name in runtime, f"{name} is not in deploy/requirements.lock: run deploy/lock.py"
            assert requirement.specifier.contains(runtime[name], prereleases=True), (
                f"{name}=={runtime[name]} does not satisfy {requirement}: run deploy/lock.py"
            )
    build = locked(DEPLOY / "build-requirements.lock")
    for project in pyprojects:
        for line in project["build-system"]["requires"]:
            requirement = Requirement(line)
            version = build[canonicalize_name(requirement.name)]
            assert requirement.specifier.contains(version), (requirement, version)


def test_compose_runs_every_consumer_and_the_deletion_lane_in_a_container_of_its_own() -> None:
    from govindex.cli.stack import _names
    from govindex.control.workers import parts

    services = compose()
    run = {
        name: service["command"][1:2]
        for name, service in services.items()
        if service.get("command", [None])[0] == "worker"
    }
    assert run["deletions"] == ["deletions"] and run["indexer"] == ["documents"]
    kinds = parts(_names([kind for (kind,) in run.values()]))
    assert {"documents", "deletions", "purger", "cdc"} <= set(kinds)
