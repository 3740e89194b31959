"""The whole stack killed while a webhook push or a CDC batch is being taken in: after a
restart, with no operator action, the index equals the source."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from govindex.adapters.kafka import ensure_topics
from tests.support.builders import MANIFEST_YAML
from tests.support.cdc import DEBEZIUM_SHAPE, ship_rows
from tests.support.stack import UpProcess, converged, govindex, remove_stack_data
from tests.support.webhooks import Remote, github_push, post_github_push

pytestmark = pytest.mark.e2e

SECRET = "crash-test-secret"


def _kill_during(up: UpProcess, rng: random.Random, work: Any) -> str:
    """Run `work` in a thread and kill the whole stack at a random moment of it (or just
    after it finished); return what `work` saw."""
    seen: list[str] = []

    def run() -> None:
        try:
            seen.append(str(work()))
        except Exception as exc:  # the stack died under it: expected
            seen.append(f"failed: {type(exc).__name__}")

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(rng.uniform(0.05, 1.5))
    up.kill_all()
    thread.join(timeout=120)
    return seen[0] if seen else "no answer"


def test_a_webhook_push_survives_a_whole_stack_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRASH_HOOK_SECRET", SECRET)
    rng = random.Random(7)
    remote = Remote(tmp_path / "remote")
    first = remote.commit(
        "2025-01-01T00:00:00Z", {f"r{n}.md": f"# R{n}\nv1 {n}\n" for n in range(40)}
    )
    manifest = MANIFEST_YAML + (
        "source_id: hooks\nsource_type: git\ngit:\n  repository: acme/handbook\n"
        f"  remote_url: {remote.path}\n  branch: main\n  include: ['*.md']\n"
        "  webhook_secret_env: CRASH_HOOK_SECRET\n"
    )
    (tmp_path / "hooks.yaml").write_text(manifest)
    state_dir = tmp_path / "state"
    up = UpProcess(tmp_path, state_dir)
    outcomes = []
    try:
        stack = up.wait_ready()
        govindex(tmp_path, "source", "apply", "hooks.yaml", "--state-dir", str(state_dir))
        before = first
        for run in range(2):
            changes: dict[str, str | bytes | None] = {
                f"r{n}.md": f"# R{n}\nv{run + 2} {n}\n" for n in range(0, 40, 3)
            }
            changes.update({f"r{n}.md": None for n in range(1 + run, 40, 7)})
            changes.update({f"new{run}-{n}.md": f"# N{n}\nnew {n}\n" for n in range(10)})
            after = remote.commit(f"2025-0{run + 2}-01T00:00:00Z", changes)
            push = github_push("acme/handbook", before, after)
            url = stack["http_url"]
            seen = _kill_during(
                up, rng, lambda url=url, push=push: post_github_push(url, push, SECRET)
            )
            up = UpProcess(tmp_path, state_dir)  # reconciles the git source at start
            stack = up.wait_ready()
            converged(stack, "hooks", remote.tree())
            outcomes.append(f"push {run + 1}: the delivery got {seen}; converged after restart")
            before = after
    finally:
        print("\n".join(outcomes))
        up.stop()
        remove_stack_data(state_dir)


def _rows(dsn: str) -> dict[str, str]:
    from govindex.core.hashing import sha256_hex

    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id, title, body FROM runbooks ORDER BY id").fetchall()
    return {f"public.runbooks/{i}": sha256_hex(f"# {t}\n\n{b}\n") for i, t, b in rows}


def test_a_cdc_batch_survives_a_whole_stack_crash(tmp_path: Path) -> None:
    rng = random.Random(11)
    state_dir = tmp_path / "state"
    up = UpProcess(tmp_path, state_dir)
    outcomes = []
    try:
        stack = up.wait_ready()
        dsn, bootstrap = stack["pg_dsn"], stack["kafka_bootstrap"]
        topic = "dbserver1.public.runbooks"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(DEBEZIUM_SHAPE)
        manifest = MANIFEST_YAML + (
            "source_id: rows\nsource_type: cdc\nparser: markdown\ncdc:\n"
            f"  topic: {topic}\n  table: public.runbooks\n  id_columns: [id]\n"
            '  text_template: "# {title}\\n\\n{body}\\n"\n'
        )
        (tmp_path / "rows.yaml").write_text(manifest)
        ensure_topics(bootstrap, [topic], 2)
        govindex(tmp_path, "source", "apply", "rows.yaml", "--state-dir", str(state_dir))
        up.stop()  # the CDC worker subscribes to the sources registered when it starts
        up = UpProcess(tmp_path, state_dir)
        stack = up.wait_ready()
        for run in range(2):
            with psycopg.connect(stack["pg_dsn"], autocommit=True) as conn:
                base = run * 100
                for n in range(40):
                    conn.execute(
                        "INSERT INTO runbooks (id, title, body) VALUES (%s, %s, %s)",
                        (base + n, f"T{base + n}", f"body {base + n}"),
                    )
                conn.execute("UPDATE runbooks SET body = body || ' edited' WHERE id % 5 = 0")
                conn.execute("DELETE FROM runbooks WHERE id % 7 = 3")
            seen = _kill_during(
                up, rng, lambda s=stack: ship_rows(s["pg_dsn"], s["kafka_bootstrap"], topic)
            )
            up = UpProcess(tmp_path, state_dir)  # recreates the CDC topic at start
            stack = up.wait_ready()
            # Playing Debezium: its position was in the lost broker too, so it sends the
            # table's changes again; the connector's positions make that harmless.
            ship_rows(stack["pg_dsn"], stack["kafka_bootstrap"], topic)
            converged(stack, "rows", _rows(stack["pg_dsn"]))
            outcomes.append(f"batch {run + 1}: shipping got {seen}; converged after restart")
    finally:
        print("\n".join(outcomes))
        up.stop()
        remove_stack_data(state_dir)


def test_the_crash_helpers_see_a_real_difference(tmp_path: Path) -> None:
    """`converged` must fail when the index lacks a document (so the tests above can)."""
    state_dir = tmp_path / "state"
    up = UpProcess(tmp_path, state_dir)
    try:
        stack = up.wait_ready()
        with pytest.raises(AssertionError, match="not converged"):
            converged(stack, "nothing", {"a.md": "sha256:" + "0" * 64}, timeout=2)
        assert json.loads((state_dir / "stack.json").read_text())["pg_dsn"] == stack["pg_dsn"]
    finally:
        up.stop()
        remove_stack_data(state_dir)
