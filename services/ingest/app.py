"""The connectors' wiring: ports from a Runtime, the webhook server, CDC subscriptions, and the
ingest verbs that the CLI, the webhook receiver and the demo all call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from govindex.core.errors import GovindexError
from govindex.core.records import SourceManifest
from govindex.runtime.composition import Runtime
from govindex.runtime.subscription import Subscription, subscription
from ingest.cdc_worker import CONSUMER as CDC
from ingest.cdc_worker import CdcPorts, apply_change
from ingest.handlers import (
    IngestContext,
    IngestReport,
    delete_document,
    delete_source,
    fingerprint_versions,
    git_versions,
    ingest_snapshot,
)
from ingest.receiver import Drift, ReceiverPorts, build_app, reconcile_source
from ingest.sources import DEFAULT_INCLUDE, FolderSnapshot, GitSnapshot

log = structlog.get_logger(__name__)

Progress = Callable[[int, int], None]


class SourceRefused(GovindexError):
    """A command named a source that is not registered, or cannot take this command."""


async def registered(rt: Runtime, source_id: str, *, enabled: bool = True) -> SourceManifest:
    """The registered manifest of a source, or an error that says how to register it.

    With `enabled`, a disabled source is refused too (for commands that emit events).
    """
    manifest = await rt.registry.find(source_id)
    if manifest is None:
        raise SourceRefused(
            f"source {source_id!r} is not registered; run `govindex source apply MANIFEST.yaml`"
        )
    if enabled and not manifest.enabled:
        raise SourceRefused(f"source {source_id!r} is disabled in its manifest")
    return manifest


async def receiver_ports(rt: Runtime) -> ReceiverPorts:
    return ReceiverPorts(
        sources=rt.registry,
        state=rt.ingest_state,
        blobs=rt.blobs,
        deliveries=rt.deliveries,
        lineage=rt.lineage,
        publisher=await rt.publisher(),
        topics=rt.settings.topics,
        mirrors=rt.settings.state_dir / "mirrors",
        inline_limit=rt.settings.inline_content_limit,
    )


# --- ingest verbs -------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()


async def ingest_git(
    rt: Runtime,
    source_id: str,
    repo: Path,
    rev: str = "HEAD",
    filters: Filters = Filters(),
    progress: Progress | None = None,
) -> tuple[IngestReport, str]:
    """Emit the difference between a local repository at `rev` and what was last emitted."""
    snapshot = GitSnapshot(repo, rev)
    report = await _ingest(
        rt,
        source_id,
        snapshot,
        versions=git_versions(snapshot),
        observed_at=snapshot.committed_at,
        deletion_version=snapshot.source_version,
        filters=filters,
        progress=progress,
    )
    return report, snapshot.sha


async def ingest_folder(
    rt: Runtime,
    source_id: str,
    folder: Path,
    filters: Filters = Filters(),
    progress: Progress | None = None,
) -> IngestReport:
    """The same for a plain folder; a file's version is the hash of its bytes."""
    snapshot = FolderSnapshot(folder)
    return await _ingest(
        rt,
        source_id,
        snapshot,
        versions=fingerprint_versions(snapshot.observed_at),
        observed_at=snapshot.observed_at,
        deletion_version=f"folder:{snapshot.observed_at.isoformat()}",
        filters=filters,
        progress=progress,
    )


async def _ingest(
    rt: Runtime,
    source_id: str,
    snapshot: Any,
    *,
    versions: Any,
    observed_at: datetime,
    deletion_version: str,
    filters: Filters,
    progress: Progress | None,
) -> IngestReport:
    manifest = await registered(rt, source_id)
    ctx = IngestContext(
        manifest=manifest,
        topics=rt.settings.topics,
        versions=versions,
        observed_at=observed_at,
        deletion_version=deletion_version,
        inline_limit=rt.settings.inline_content_limit,
        include=tuple(filters.include or DEFAULT_INCLUDE),
        exclude=tuple(filters.exclude),
    )
    return await ingest_snapshot(
        snapshot,
        ctx,
        state=rt.ingest_state,
        publisher=await rt.publisher(),
        blobs=rt.blobs,
        progress=progress,
    )


async def delete_one(
    rt: Runtime, source_id: str, doc_id: str, reason: str
) -> tuple[SourceManifest, int]:
    """Emit a tombstone for one document at its next sequence."""
    manifest = await registered(rt, source_id)
    sequence = await delete_document(
        manifest,
        doc_id,
        topics=rt.settings.topics,
        state=rt.ingest_state,
        publisher=await rt.publisher(),
        deleted_at=datetime.now(UTC),
        reason=reason,
    )
    return manifest, sequence


async def retire_source(rt: Runtime, source_id: str, reason: str) -> list[str]:
    """Disable a source and emit a deletion for every document the index holds of it."""
    manifest = await rt.registry.set_enabled(source_id, False)
    if manifest is None:
        raise SourceRefused(f"source {source_id!r} is not registered")
    return await delete_source(
        manifest,
        held=await rt.registry.held_documents(source_id),
        topics=rt.settings.topics,
        state=rt.ingest_state,
        publisher=await rt.publisher(),
        deleted_at=datetime.now(UTC),
        reason=reason,
    )


async def reconcile(rt: Runtime, source_id: str) -> tuple[SourceManifest, Drift, IngestReport]:
    """Make the index equal to a git source's branch head."""
    manifest = await registered(rt, source_id)
    if manifest.git is None:
        raise SourceRefused(
            f"source {source_id!r} has no `git` section (remote_url, branch) in its "
            "manifest; add one, or use `govindex ingest git` for a local repository"
        )
    drift, report = await reconcile_source(manifest, await receiver_ports(rt))
    return manifest, drift, report


# --- long-running connectors --------------------------------------------------------------


async def cdc_subscriptions(rt: Runtime) -> list[Subscription]:
    """One subscription per Debezium topic named by a registered source's `cdc` section.

    Sources registered later are picked up at the next start.
    """
    manifests = await rt.registry.cdc_sources()
    if not manifests:
        log.info("cdc.no_sources")
        return []
    ports = CdcPorts(
        registry=rt.registry,
        ledger=rt.ingest_state,
        blobs=rt.blobs,
        publisher=await rt.publisher(),
        topics=rt.settings.topics,
        inline_limit=rt.settings.inline_content_limit,
    )
    found = []
    for manifest in manifests:
        assert manifest.cdc is not None
        handle = partial(apply_change, source_id=manifest.source_id, ports=ports)
        consumer = f"{CDC}:{manifest.source_id}"
        found.append(subscription(rt.settings, consumer, manifest.cdc.topic, handle, raw=True))
        log.info("cdc.subscribed", source=manifest.source_id, topic=manifest.cdc.topic)
    return found


@dataclass
class WebhookServer:
    """The HTTP receiver on `host:port` (port 0: any free port, reported in `url`)."""

    rt: Runtime
    host: str = "127.0.0.1"
    port: int = 0
    _runner: web.AppRunner | None = None
    url: str | None = None

    async def start(self) -> str:
        self._runner = web.AppRunner(build_app(await receiver_ports(self.rt)), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server: Any = site._server  # aiohttp reports the bound port only through the server
        port = server.sockets[0].getsockname()[1] if server is not None else self.port
        self.url = f"http://{self.host}:{port}"
        log.info("webhooks.listening", url=self.url)
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
