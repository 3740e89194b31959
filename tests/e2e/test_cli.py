"""The operator's commands against a running `govindex up`, as from a second terminal."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from reader.client import ReadApiError, SyncReadClient
from reader.models import Pack, SearchRequest, Subject
from tests.support.builders import MANIFEST_YAML
from tests.support.pipeline import git
from tests.support.stack import govindex

pytestmark = pytest.mark.e2e

MANIFEST = "source_id: handbook\nsource_type: git\n" + MANIFEST_YAML


def wait_for(check: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError("condition not met in time")


# Long: one operator session against one running stack, command after command.
def test_operator_commands_work_against_a_running_stack(running: Path) -> None:
    cwd = running
    stack = json.loads((cwd / ".govindex" / "stack.json").read_text())
    with urllib.request.urlopen(f"{stack['http_url']}/healthz", timeout=10) as health:
        assert json.loads(health.read()) == {"ok": True}  # the webhook receiver is served
    (cwd / "handbook.yaml").write_text(MANIFEST)
    applied = govindex(cwd, "source", "apply", "handbook.yaml")
    assert "created  handbook" in applied.stdout

    repo = cwd / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "deploy.md").write_text("# Deploy\nShip with the blue pipeline.\n")
    (repo / "old.md").write_text("# Old\nA retired page about turnips.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    first = govindex(cwd, "ingest", "git", "repo", "--source", "handbook")
    assert "2 created" in first.stdout

    (repo / "deploy.md").write_text("# Deploy\nShip with the green pipeline.\n")
    git(repo, "commit", "-q", "-am", "two")
    second = govindex(cwd, "ingest", "git", "repo", "--source", "handbook")
    assert "1 updated" in second.stdout and "1 unchanged" in second.stdout

    def documents() -> list[dict[str, object]]:
        out = govindex(cwd, "documents", "--source", "handbook", "--json").stdout
        return [json.loads(line) for line in out.splitlines()]

    wait_for(
        lambda: (
            {(d["doc_id"], d["last_sequence"]) for d in documents()}
            == {("deploy.md", 2), ("old.md", 1)}
        )
    )

    def query(text: str, *extra: str) -> list[dict[str, object]]:
        out = govindex(
            cwd,
            "query",
            text,
            "--tenant",
            "acme",
            "--principal",
            "group:eng",
            "--purpose",
            "support",
            "--json",
            *extra,
        ).stdout
        return [json.loads(line) for line in out.splitlines()]

    wait_for(lambda: [h["doc_id"] for h in query("pipeline")] == ["deploy.md"])
    (hit,) = query("pipeline")
    assert "green" in str(hit["text"]) and hit["sequence"] == 2
    assert str(hit["source_version"]).startswith("git:")
    outsider = govindex(
        cwd,
        "query",
        "pipeline",
        "--tenant",
        "acme",
        "--principal",
        "user:nobody",
        "--purpose",
        "support",
        "--json",
    )
    assert outsider.stdout == ""

    no_git = govindex(cwd, "reconcile", "--source", "handbook", check=False)
    assert no_git.returncode == 1 and "no `git` section" in no_git.stderr

    deleted = govindex(cwd, "delete", "--source", "handbook", "--doc", "old.md")
    assert "sequence 2" in deleted.stdout
    wait_for(lambda: query("turnips") == [])
    wait_for(lambda: any(d["doc_id"] == "old.md" and d["state"] == "deleted" for d in documents()))
    table = govindex(cwd, "documents", "--source", "handbook").stdout
    assert "old.md" in table and "deleted" in table

    # A plain folder as a second source: version = content hash.
    (cwd / "notes.yaml").write_text(
        MANIFEST.replace("handbook", "notes").replace("source_type: git", "source_type: folder")
    )
    govindex(cwd, "source", "apply", "notes.yaml")
    folder = cwd / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\nalpha\n")
    (folder / "b.md").write_text("# B\nbravo\n")
    assert "2 created" in govindex(cwd, "ingest", "path", "notes", "--source", "notes").stdout
    (folder / "a.md").write_text("# A\nalpha again\n")
    (folder / "b.md").unlink()
    again = govindex(cwd, "ingest", "path", "notes", "--source", "notes").stdout
    assert "0 created, 1 updated, 1 deleted" in again

    def notes() -> dict[str, tuple[object, object]]:
        out = govindex(cwd, "documents", "--source", "notes", "--json").stdout
        rows = [json.loads(line) for line in out.splitlines()]
        return {str(r["doc_id"]): (r["state"], r["source_version"]) for r in rows}

    wait_for(lambda: notes().get("b.md", ("",))[0] == "deleted")
    assert str(notes()["a.md"][1]).startswith("sha256:")

    # Packs: built by the CLI, re-checked by verify-pack (exit 0 valid, 1 invalid, 2 stale).
    who = ["--tenant", "acme", "--principal", "group:eng", "--purpose", "support"]
    govindex(cwd, "pack", "pipeline", *who, "--max-tokens", "500", "-o", "deploy.json")
    pack = json.loads((cwd / "deploy.json").read_text())
    assert [i["anchor"]["doc_id"] for i in pack["items"]] == ["deploy.md"]
    assert pack["used_tokens"] <= 500 and pack["manifest"]["pack_hash"]
    assert govindex(cwd, "verify-pack", "deploy.json").stdout.startswith("valid")
    forged = {**pack, "manifest": {**pack["manifest"], "purpose": "marketing"}}
    (cwd / "forged.json").write_text(json.dumps(forged))
    tampered = govindex(cwd, "verify-pack", "forged.json", check=False)
    assert tampered.returncode == 1 and tampered.stdout.startswith("tampered")
    (repo / "deploy.md").write_text("# Deploy\nShip with the purple pipeline.\n")
    git(repo, "commit", "-q", "-am", "three")
    govindex(cwd, "ingest", "git", "repo", "--source", "handbook")
    wait_for(lambda: govindex(cwd, "verify-pack", "deploy.json", check=False).returncode == 2)
    govindex(cwd, "pack", "alpha", *who, "-o", "alpha.json")
    assert govindex(cwd, "verify-pack", "alpha.json").returncode == 0
    govindex(cwd, "delete", "--source", "notes", "--doc", "a.md")
    wait_for(lambda: govindex(cwd, "verify-pack", "alpha.json", check=False).returncode == 1)
    invalid = govindex(cwd, "verify-pack", "alpha.json", "--json", check=False)
    assert json.loads(invalid.stdout)["status"] == "invalid" and "alpha" not in invalid.stdout

    # The read API on its internal listener, with the token `up` wrote to stack.json.
    stack = json.loads((cwd / ".govindex" / "stack.json").read_text())
    assert stack["read_url"] != stack["http_url"] and stack["read_token"]
    assert (cwd / ".govindex" / "stack.json").stat().st_mode & 0o077 == 0
    with SyncReadClient(stack["read_url"], stack["read_token"]) as client:
        found = client.search(
            SearchRequest(
                tenant="acme",
                subject=Subject(principals=["group:eng"]),
                purpose="support",
                query="purple pipeline",
            )
        )
        assert [h.anchor.doc_id for h in found.hits] == ["deploy.md"]
        assert client.verify(Pack.model_validate(pack).manifest).status == "stale"
    with (
        pytest.raises(ReadApiError) as refused,
        SyncReadClient(stack["read_url"], "not-the-token") as client,
    ):
        client.search(
            SearchRequest(tenant="acme", subject=Subject(principals=["g"]), purpose="x", query="y")
        )
    assert refused.value.status == 401

    status = govindex(cwd, "status", "--json")
    report = json.loads(status.stdout)
    assert all(s["ok"] for s in report["servers"].values()), report["servers"]
    wait_for(lambda: json.loads(govindex(cwd, "status", "--json").stdout)["pending_purges"] == [])
    readable = govindex(cwd, "status").stdout
    assert "dead letters" in readable and "lag" in readable


def test_invalid_manifests_are_refused_naming_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        MANIFEST.replace("trust_level: authoritative\n", "").replace(
            "deletion_mode: tombstone_and_purge", "deletion_mode: shred"
        )
    )
    done = govindex(tmp_path, "source", "apply", "--check", str(bad), check=False)
    assert done.returncode == 1
    assert f"{bad}: field 'trust_level': Field required" in done.stderr
    assert f"{bad}: field 'deletion_mode'" in done.stderr and "'shred'" in done.stderr


def test_commands_without_a_stack_say_how_to_start_one(tmp_path: Path) -> None:
    done = govindex(tmp_path, "documents", "--source", "x", check=False)
    assert done.returncode == 1
    assert "govindex up" in done.stderr and "GOVINDEX_PG_DSN" in done.stderr


def test_chunk_shows_how_a_file_is_cut_without_any_server(tmp_path: Path) -> None:
    doc = tmp_path / "run.md"
    doc.write_text("# Failover\n\nIntro.\n\n## Steps\n\n1. Freeze.\n2. Promote.\n")
    table = govindex(tmp_path, "chunk", str(doc)).stdout
    assert "4 chunks by markdown@3.0.0" in table
    assert "#steps" in table and "step:2" in table
    records = [
        json.loads(line)
        for line in govindex(tmp_path, "chunk", str(doc), "--json").stdout.splitlines()
    ]
    assert [r["kind"] for r in records] == ["section", "section", "step", "step"]
    text = doc.read_text()
    assert all(text[r["span"]["char_start"] : r["span"]["char_end"]] == r["text"] for r in records)
    assert records[3]["parent_ordinal"] == 1 and records[3]["locator"].endswith("#L8-L8")
    missing = govindex(tmp_path, "chunk", "nope.md", check=False)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_chunk_locates_a_pdf_by_page_and_on_the_page_as_the_indexer_does(
    tmp_path: Path,
) -> None:
    pdf = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
    pdf /= "pdf-libreoffice-structure.pdf"
    records = [
        json.loads(line)
        for line in govindex(tmp_path, "chunk", str(pdf), "--json").stdout.splitlines()
    ]
    assert records and all(r["locator"].endswith("#page=1") for r in records)
    for record in records:
        page, bbox = record["labels"][-2:]
        assert page == "page:1" and bbox.startswith("bbox:")
        left, top, right, bottom = (float(v) for v in bbox.removeprefix("bbox:").split(","))
        assert 0 <= left < right <= 612 and 0 <= top < bottom <= 842
