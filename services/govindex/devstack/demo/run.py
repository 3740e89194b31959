"""`govindex demo`: the whole pipeline on a fresh embedded stack, narrated."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from govindex.control.bootstrap import prepare
from govindex.control.workers import Workers
from govindex.core.logs import configure_logging
from govindex.core.manifests import load_manifests
from govindex.core.records import SourceManifest
from govindex.core.settings import Settings
from govindex.devstack.demo.common import (
    DEMO_USER,
    Commit,
    build_repo,
    caught_up,
    search,
    until,
)
from govindex.devstack.demo.incident import incident_case
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.composition import Runtime
from ingest.app import GitCheckout, delete_one, sync_source
from ingest.sources import GitSnapshot
from reader.app import read_service
from reader.models import Budget, Hit, PackRequest, Subject

COMMITS: tuple[Commit, ...] = (
    ("v1", "2025-01-10T09:00:00+00:00", "Initial handbook"),
    ("v2", "2025-05-01T09:00:00+00:00", "New failover tooling; 2025 access policy"),
)


def run_demo() -> int:
    # The report is the output: the pipeline's own logs would bury it (warnings still show).
    configure_logging(level="WARNING", json_output=False)
    root = Path(tempfile.mkdtemp(prefix="govindex-demo-"))
    stack = EmbeddedStack(root / "state", namespace="demo", durable=False)
    try:
        print(
            "1. Starting the embedded stack (PostgreSQL, Kafka-compatible broker, "
            "OpenSearch-compatible server, Redis) ..."
        )
        started = time.monotonic()
        addresses = stack.start()
        settings = Settings(state_dir=root / "state").model_copy(update=addresses)
        print(f"   up in {time.monotonic() - started:.1f}s")
        return asyncio.run(_walkthrough(settings, root))
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _walkthrough(settings: Settings, root: Path) -> int:
    generation = await prepare(settings)
    async with Runtime(settings) as rt:
        workers = Workers(rt)
        await workers.start()
        try:
            return await _steps(rt, root, generation)
        finally:
            await workers.stop()


async def _steps(rt: Runtime, root: Path, generation: int) -> int:
    print(f"2. Topics created, schema migrated, index generation {generation} live.")
    manifest_dir = resources.files("govindex.devstack.demo") / "manifests"
    with resources.as_file(manifest_dir / "handbook.yaml") as path:
        (manifest,) = load_manifests([path])
    await rt.registry.register(manifest)
    print(
        f"3. Registered source '{manifest.source_id}' (tenant {manifest.tenant}, default "
        f"ACL {', '.join(manifest.default_acl or [])}, {manifest.deletion_mode.value})."
    )
    await _ingest_commits(rt, manifest, root)
    await _queries(rt, manifest)
    await _delete(rt, manifest)
    print("\n7. Documents of source 'handbook':")
    for row in await rt.chunks.documents(manifest.source_id):
        print(
            f"   {row.doc_id:<28} {row.state:<8} seq {row.last_sequence}  "
            f"{row.chunk_count} chunks  {row.source_version[:14]}"
        )
    await incident_case(rt, root)
    print(
        "\nDemo complete: versions superseded with history kept, ACL enforced, "
        "deletion purged and verified; an incident read back as of the moment it began."
    )
    return 0


async def _ingest_commits(rt: Runtime, manifest: SourceManifest, root: Path) -> None:
    repo = root / "handbook"
    shas = build_repo(repo, COMMITS)
    for n, sha in enumerate(shas, start=1):
        report, _ = await sync_source(rt, manifest.source_id, GitCheckout(repo, sha))
        await until(lambda: caught_up(rt, manifest.source_id), "the indexer to catch up")
        print(
            f"4.{n} Ingested commit {sha[:10]} ({GitSnapshot(repo, sha).committed_at:%Y-%m-%d}):"
            f" {len(report.created)} created, {len(report.updated)} updated, "
            f"{len(report.deleted)} deleted — indexed."
        )


async def _queries(rt: Runtime, manifest: SourceManifest) -> None:
    await rt.index.refresh()
    print("\n5. Governed queries as user:dana (group:eng):")
    now = datetime.now(UTC)
    march = datetime(2025, 3, 1, tzinfo=UTC)
    for label, text, as_of in (
        ("failover steps, now", "promote replica failover", now),
        ("failover steps, as of 2025-03-01", "promote replica failover", march),
        ("access policy, now", "production access", now),
        ("access policy, as of 2025-03-01", "production access", march),
        ("salary bands (ACL: group:hr only)", "salary bands", now),
    ):
        hits = await _search(rt, manifest, text, DEMO_USER, as_of)
        print(f"   - {label}: {len(hits)} result(s)")
        for hit in hits[:2]:
            a = hit.anchor
            body = [ln.strip() for ln in hit.text.splitlines() if ln.strip()]
            line = next((ln for ln in body if not ln.startswith("#")), body[0] if body else "")
            found_by = "+".join(sorted(hit.channels))
            print(f"       {a.locator} @ {a.source_version[:14]} [{found_by}]: {line[:60]}")
    hr = await _search(rt, manifest, "salary bands", ("group:hr",), now)
    print(f"   - salary bands as group:hr: {len(hr)} result(s) (the ACL admits them)")


async def _delete(rt: Runtime, manifest: SourceManifest) -> None:
    service = read_service(rt)
    pack = await service.pack(
        PackRequest(
            tenant=manifest.tenant,
            subject=Subject(principals=list(DEMO_USER)),
            purpose="support",
            query="edge cache purge",
            budget=Budget(max_tokens=600),
            cache="bypass",
        )
    )
    verdict = await service.verify(pack.manifest)
    print(
        f"\n6. A context pack for 'edge cache purge': {len(pack.items)} item(s), "
        f"{pack.used_tokens}/{pack.max_tokens} tokens, pack_hash {pack.manifest.pack_hash[:12]}"
        f"; verify: {verdict.status}."
    )
    print("   Deleting runbooks/cache-flush.md ...")
    _, sequence = await delete_one(
        rt, manifest.source_id, "runbooks/cache-flush.md", "retired runbook"
    )
    receipt = await until(
        lambda: rt.purges.receipt(manifest.tenant, "runbooks/cache-flush.md", sequence),
        "the purge receipt",
    )
    for sink in receipt["sinks"]:
        print(
            f"   {sink['sink']:<10} removed {sink['removed']:>3}, remaining "
            f"{sink['remaining']}, verified {sink['verified']}"
        )
    hits = await _search(rt, manifest, "edge cache purge", DEMO_USER, datetime.now(UTC))
    print(f"   query 'edge cache purge' after the purge: {len(hits)} result(s)")
    verdict = await service.verify(pack.manifest)
    reasons = sorted({p.reason for p in verdict.pins if p.reason})
    print(f"   the earlier pack now verifies as: {verdict.status} ({', '.join(reasons)})")


async def _search(
    rt: Runtime, manifest: SourceManifest, text: str, who: tuple[str, ...], as_of: datetime
) -> list[Hit]:
    return await search(rt, manifest.tenant, text, who, as_of)
