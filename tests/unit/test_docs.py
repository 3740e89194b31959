"""The documentation site builds with --strict, its generated references cover the code, every
alert links to a page that exists, and the examples it shows are ones govindex accepts."""

from __future__ import annotations

import ast
import hashlib
import html
import importlib
import json
import os
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from prometheus_client import REGISTRY

import govindex.core.metrics  # noqa: F401 - registers the metrics
from govindex.cli.main import app
from govindex.core.envelope import decode, parse_payload
from govindex.core.events import DocumentChanged
from govindex.core.manifests import load_manifests
from govindex.core.settings import Settings
from ingest.cdc import translate

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
RUNBOOK_URL = re.compile(
    r"^\{\{ \$externalLabels\.govindex_docs \}\}/(?P<path>operating/alerts/[a-z0-9-]+)/$"
)
FENCE = re.compile(
    r'^```(?P<lang>\w+)(?: title="(?P<title>[^"]+)")?\n(?P<body>.*?)^```$', re.M | re.S
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module exactly as `make docs` builds it."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def page_text(site: Path, path: str) -> str:
    """The article of a built page as plain text."""
    raw = (site / path / "index.html").read_text()
    article = raw[raw.index("<article") : raw.index("</article>")]
    return html.unescape(re.sub(r"<[^>]+>", " ", article))


def blocks(path: Path, lang: str) -> Iterator[tuple[str | None, str]]:
    for found in FENCE.finditer(path.read_text()):
        if found["lang"] == lang:
            yield found["title"], found["body"]


def titled(path: Path, title: str) -> str:
    lang = {"py": "python"}.get(title.rpartition(".")[2], title.rpartition(".")[2])
    found = [body for name, body in blocks(path, lang) if name == title]
    assert len(found) == 1, f"{path} has {len(found)} blocks titled {title}"
    return found[0]


def command_paths() -> list[str]:
    """Every registered command, groups and their subcommands, e.g. `govindex source apply`.

    Typer vendors its own click: a group is told by having `commands`."""

    def walk(path: list[str], command: Any) -> Iterator[str]:
        if len(path) > 1:
            yield " ".join(path)
        for name, sub in (getattr(command, "commands", None) or {}).items():
            if not getattr(sub, "hidden", False):
                yield from walk([*path, name], sub)

    return list(walk(["govindex"], typer.main.get_command(app)))


# --- the build ---------------------------------------------------------------------------


def test_the_site_builds_with_strict_and_has_every_nav_page(site: Path) -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]

    def pages(items: Any) -> Iterator[str]:
        for item in items:
            if isinstance(item, str):
                yield item
            else:
                for value in item.values():
                    yield from pages(value) if isinstance(value, list) else [value]

    listed = list(pages(nav))
    for page in listed:
        assert (DOCS / page).exists(), page
        stem = page.removesuffix(".md")
        built = stem.removesuffix("index") if stem.endswith("index") else f"{stem}/"
        assert (site / built / "index.html").exists(), page
    every = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert every == set(listed), f"pages missing from the nav: {sorted(every - set(listed))}"


def test_the_cli_reference_names_every_registered_command(site: Path) -> None:
    raw = (site / "reference" / "cli" / "index.html").read_text()
    text = page_text(site, "reference/cli")
    commands = command_paths()
    assert "govindex source apply" in commands and "govindex query" in commands
    for command in commands:
        assert f'id="{command.replace(" ", "-")}"' in raw, f"no section for {command}"
        assert command in text, command


def test_the_settings_reference_names_every_setting(site: Path) -> None:
    text = page_text(site, "reference/settings")
    for name in Settings.model_fields:
        assert f"GOVINDEX_{name.upper()}" in text, name


# --- alerts and runbooks -----------------------------------------------------------------


def test_every_alert_links_to_a_runbook_page_that_exists(site: Path) -> None:
    rules = yaml.safe_load(ALERTS.read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    assert alerts
    for alert in alerts:
        annotations = alert["annotations"]
        assert "runbook" not in annotations, f"{alert['alert']} still has a README runbook"
        link = RUNBOOK_URL.match(annotations["runbook_url"])
        assert link, f"{alert['alert']}: runbook_url {annotations['runbook_url']!r}"
        source = DOCS / f"{link['path']}.md"
        assert source.exists(), f"{alert['alert']}: {source} does not exist"
        assert source.read_text().startswith(f"# {alert['alert']}\n"), source
        assert (site / link["path"] / "index.html").exists(), link["path"]
        index = (DOCS / "operating" / "alerts" / "index.md").read_text()
        assert f"`{alert['alert']}`" in index, f"{alert['alert']} is not listed on the alerts page"


# --- pages that must cover the code ------------------------------------------------------


def test_every_exported_metric_is_documented_on_the_metrics_page() -> None:
    page = (DOCS / "operating" / "metrics.md").read_text()
    families = [f for f in REGISTRY.collect() if f.name.startswith("govindex_")]
    assert families
    for family in families:
        shown = f"{family.name}_total" if family.type == "counter" else family.name
        assert f"`{shown}`" in page, f"{shown} is not documented in docs/operating/metrics.md"


def test_the_schemas_page_describes_every_schema_file() -> None:
    page = (DOCS / "reference" / "schemas.md").read_text()
    files = sorted(p.name for p in (ROOT / "schemas").glob("*.json"))
    assert files
    for name in files:
        assert f"| `{name}` |" in page, f"{name} is not described in docs/reference/schemas.md"


# --- examples the docs show --------------------------------------------------------------


def test_every_manifest_the_docs_show_is_one_source_apply_accepts(tmp_path: Path) -> None:
    shown = [
        (page, title, body)
        for page in sorted(DOCS.rglob("*.md"))
        for title, body in blocks(page, "yaml")
        if title and "source_id:" in body
    ]
    assert len(shown) >= 5
    for page, title, body in shown:
        path = tmp_path / f"{page.stem}-{title}"
        path.write_text(body)
        (manifest,) = load_manifests([path])
        assert manifest.source_id, (page, title)


def test_the_debezium_example_becomes_the_document_the_page_describes() -> None:
    page = DOCS / "sources" / "debezium.md"
    manifest_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"runbook-db-{os.getpid()}.yaml"
    manifest_file.write_text(titled(page, "runbook-db.yaml"))
    try:
        (manifest,) = load_manifests([manifest_file])
    finally:
        manifest_file.unlink()
    assert manifest.cdc is not None
    config = json.loads(titled(page, "ops-runbooks-connector.json"))["config"]
    assert f"{config['topic.prefix']}.{config['table.include.list']}" == manifest.cdc.topic
    assert config["value.converter"] == "org.apache.kafka.connect.json.JsonConverter"
    assert config["skipped.operations"] == "none"  # truncates reach govindex
    assert not any(k.startswith("transforms") for k in config)  # the full envelope
    event = titled(page, "change-event.json")
    change = translate(b'{"id": 7}', event.encode(), manifest.cdc)
    assert change is not None and change.op == "upsert"
    assert change.doc_id == "public.runbooks/7"
    assert change.sequence == json.loads(event)["source"]["lsn"]
    assert change.text == "# Database failover\n\nPromote the replica.\n"
    assert change.acl == ["group:sre"]
    text = page.read_text()
    for said in (change.doc_id, f"sequence `{change.sequence}`", f"`{change.source_version}`"):
        assert said in text, said


def test_the_producer_example_writes_an_event_the_indexer_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[dict[str, Any]] = []

    class Producer:
        def __init__(self, **config: Any) -> None:
            assert config.get("acks") == "all"
            self.started = False

        async def start(self) -> None:
            self.started = True

        async def send_and_wait(self, topic: str, **record: Any) -> None:
            assert self.started
            sent.append({"topic": topic, **record})

        async def stop(self) -> None:
            pass

    fake = types.ModuleType("aiokafka")
    fake.AIOKafkaProducer = Producer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aiokafka", fake)
    source = titled(DOCS / "sources" / "cloudevents.md", "producer.py")
    exec(compile(source, "producer.py", "exec"), {})  # our own docs' example, Kafka faked
    (record,) = sent
    assert record["topic"] == "govindex.documents"
    envelope = decode(record["key"], record["value"], record["headers"])
    payload = parse_payload(envelope)
    assert isinstance(payload, DocumentChanged)
    assert record["key"] == payload.key.encode()
    assert payload.content is not None
    digest = hashlib.sha256(payload.content.encode()).hexdigest()
    assert payload.content_hash == f"sha256:{digest}"


def test_every_python_example_compiles_and_imports_what_exists() -> None:
    sources = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    checked = 0
    for path in sources:
        for title, body in blocks(path, "python"):
            tree = compile(
                body,
                f"{path.name}:{title}",
                "exec",
                flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            )
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    module = importlib.import_module(node.module)
                    for alias in node.names:
                        assert hasattr(module, alias.name), (path, node.module, alias.name)
            checked += 1
    assert checked >= 4


# --- the README --------------------------------------------------------------------------


def test_the_readme_is_short_and_keeps_its_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "make demo    # builds .venv" in readme
    assert "make test    # builds .venv" in readme
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).exists(), link
