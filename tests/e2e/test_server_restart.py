"""One server killed under load heals with no operator action (issue: self-healing).

For each embedded server: `govindex up` runs; a folder source holds runbooks (some for HR
only) and documents deleted before the fault. The server is SIGKILLed while an ingest of a
few hundred documents and a read loop (read API search and packs, and `govindex query`)
run. With no operator action: the supervisor restarts it on the same address, every
document converges (active in Postgres, held by OpenSearch's live generation, found by each
channel), a purge issued after the restart completes with its receipt, no read ever
returned HR-only or deleted text, and `govindex status` went not-ok and back to ok.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path

import pytest

from tests.support.restarts import (
    MANIFEST,
    ReadOracle,
    StatusWatch,
    heal_jobs,
    held_by_opensearch,
    ingest,
    kill_server,
    post,
    search_body,
    up,
    vectorless_chunks,
    wait_restarted,
    write_deleted,
    write_docs,
)
from tests.support.stack import converged, govindex, remove_stack_data

pytestmark = pytest.mark.e2e

BEFORE = range(0, 60)  # indexed before the fault
DURING = range(60, 360)  # the ingest the fault lands in


def _folder_state(folder: Path) -> dict[str, str]:
    return {
        p.name: "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.glob("*.md"))
    }


@pytest.mark.parametrize("server", ["kafka", "opensearch", "postgres", "redis"])
def test_a_server_killed_under_load_is_restarted_and_the_pipeline_heals_by_itself(
    tmp_path: Path, server: str
) -> None:
    folder, state_dir = tmp_path / "notes", tmp_path / "state"
    folder.mkdir()
    (tmp_path / "notes.yaml").write_text(MANIFEST.format(path=folder))
    process, stack = up(tmp_path, state_dir)
    stack_file = state_dir / "stack.json"
    report: list[str] = [f"server {server}"]
    try:
        govindex(tmp_path, "source", "apply", "notes.yaml", "--state-dir", str(state_dir))
        write_docs(folder, BEFORE)
        write_deleted(folder, range(5))
        assert ingest(tmp_path, state_dir, folder).wait(timeout=180) == 0
        converged(stack, "notes", _folder_state(folder))
        for gone in folder.glob("gone-*.md"):
            gone.unlink()
        assert ingest(tmp_path, state_dir, folder).wait(timeout=180) == 0
        converged(stack, "notes", _folder_state(folder))

        oracle = ReadOracle(tmp_path, state_dir, stack)
        watch = StatusWatch(state_dir, server)
        watch.start()
        oracle.start()
        time.sleep(1.0)  # the watch and the oracle have seen the healthy stack
        assert watch.samples and watch.samples[-1][1], f"{server} not ok before the fault"
        write_docs(folder, DURING)
        load = ingest(tmp_path, state_dir, folder)
        time.sleep(random.uniform(0.5, 2.0))
        killed_at = time.monotonic()
        old_pid = kill_server(stack_file, server)
        restarted_s = wait_restarted(stack_file, server, old_pid)
        out = load.communicate(timeout=300)[0]
        if load.returncode != 0:  # the ingest died with its server: run it again, as cron would
            report.append(f"ingest during the fault failed: {out.strip()[-200:]!r}; ran again")
            assert ingest(tmp_path, state_dir, folder).wait(timeout=300) == 0

        state = converged(stack, "notes", _folder_state(folder), timeout=300)
        active = set(state["active"])
        held_by_opensearch(stack, active)
        converged_s = time.monotonic() - killed_at

        # The lexical channels find a document written during the fault by its marker; the
        # dense channel has a vector of every current chunk.
        assert vectorless_chunks(stack) == 0
        for channel in ("bm25", "fulltext"):
            status, text = post(stack, "/v1/search", search_body("m0123x", channels=[channel]))
            assert status == 200, text
            docs = {hit["anchor"]["doc_id"] for hit in json.loads(text)["hits"]}
            assert "doc-0123.md" in docs, f"{channel} does not find doc-0123.md: {docs}"

        # A purge issued after the restart completes with its receipt.
        (folder / "doc-0101.md").unlink()
        assert ingest(tmp_path, state_dir, folder).wait(timeout=180) == 0
        converged(stack, "notes", _folder_state(folder), timeout=120)
        status, text = post(stack, "/v1/search", search_body("m0101x"))
        assert status == 200
        assert "doc-0101.md" not in text

        time.sleep(1.0)
        oracle.stop()
        watch.stop()
        assert not oracle.leaks, oracle.leaks[:3]
        assert oracle.answered > 0 and oracle.cli_runs > 0
        assert watch.went_down_and_up(killed_at), (
            f"status never said {server} was down, or not ok at the end: "
            f"{[ok for t, ok in watch.samples if t >= killed_at][:40]}"
        )
        shown = govindex(tmp_path, "status", "--state-dir", str(state_dir)).stdout
        assert "restarted 1x" in shown, shown
        # Losing the index is healed by a rebuild job of its own, recorded like any job.
        assert heal_jobs(stack) == (1 if server == "opensearch" else 0)
        report.append(
            f"restarted in {restarted_s:.1f}s, converged {converged_s:.1f}s after the kill "
            f"({heal_jobs(stack)} rebuild jobs); "
            f"{len(active)} active documents, all in BM25; reads: {oracle.answered} answered, "
            f"{oracle.refused} refused, {oracle.cli_runs} CLI queries, 0 leaks"
        )
    finally:
        print("\n".join(report))
        print(process.stop()[-3000:])
        remove_stack_data(state_dir)
