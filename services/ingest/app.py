"""The connectors' wiring: ports from a Runtime, the webhook server, CDC subscriptions, and the
source-level verbs (sync, reconcile, backfill, delete) that the CLI, `govindex up` and the
demo call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import structlog

from govindex.core.errors import GovindexError, TransientError
from govindex.core.formats import DEFAULT_INCLUDE
from govindex.core.jobs import Job, JobState, Pacer
from govindex.core.paths import selected
from govindex.core.records import SourceManifest
from govindex.runtime.composition import Runtime
from govindex.runtime.listener import Listener
from govindex.runtime.subscription import Subscription, subscription
from ingest.cdc_worker import CONSUMER as CDC
from ingest.cdc_worker import CdcPorts, apply_change
from ingest.handlers import (
    IngestContext,
    IngestReport,
    SourceView,
    Versions,
    backfill_documents,
    delete_document,
    delete_source,
    fingerprint_versions,
    git_versions,
    sync_snapshot,
)
from ingest.receiver import ReceiverPorts, build_app, git_view
from ingest.reconcile import Drift, reconcile_snapshot
from ingest.sources import FolderSnapshot, GitSnapshot

log = structlog.get_logger(__name__)
PUBLISH_NOW_S = 10.0  # an operator's deletion published by the command, at most this long

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


def receiver_ports(rt: Runtime) -> ReceiverPorts:
    return ReceiverPorts(
        sources=rt.registry,
        state=rt.ingest_state,
        deliveries=rt.deliveries,
        topics=rt.settings.topics,
        mirrors=rt.settings.state_dir / "mirrors",
    )


# --- sync and reconcile ------------------------------------------------------------------
# sync: emit what changed in a source since what was last emitted for it (the connector
# state's fingerprints). reconcile: compare a source with what the index holds, and emit
# the difference (anti-entropy).


@dataclass(frozen=True)
class Filters:
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()


@dataclass(frozen=True)
class GitCheckout:
    """A local git repository at a revision."""

    repo: Path
    rev: str = "HEAD"


FOLDER = "path:"  # a folder source's checkpoint: where it was last read

Reader = Callable[[], Awaitable[SourceView]]


def _context(
    rt: Runtime,
    manifest: SourceManifest,
    versions: Versions,
    observed_at: datetime,
    deletion_version: str,
    filters: Filters,
) -> IngestContext:
    return IngestContext(
        manifest=manifest,
        topics=rt.settings.topics,
        versions=versions,
        observed_at=observed_at,
        deletion_version=deletion_version,
        include=tuple(filters.include or _settings(manifest, "include") or DEFAULT_INCLUDE),
        exclude=tuple(filters.exclude or _settings(manifest, "exclude")),
    )


def _settings(manifest: SourceManifest, name: str) -> list[str]:
    """The manifest's own include or exclude (of its git or folder section), if it has one:
    what the command line does not narrow, the manifest does."""
    section = manifest.git or manifest.folder
    return list(getattr(section, name)) if section is not None else []


def folder_view(
    rt: Runtime, manifest: SourceManifest, folder: Path, filters: Filters = Filters()
) -> SourceView:
    """A folder as read now; its checkpoint remembers where it was read."""
    snapshot = FolderSnapshot(folder)
    observed_at = snapshot.observed_at
    deletion_version = f"folder:{observed_at.isoformat()}"
    versions = fingerprint_versions(observed_at)
    ctx = _context(rt, manifest, versions, observed_at, deletion_version, filters)
    return SourceView(snapshot, ctx, checkpoint=f"{FOLDER}{folder.resolve()}")


async def sync_source(
    rt: Runtime,
    source_id: str,
    origin: Path | GitCheckout,
    filters: Filters = Filters(),
    progress: Progress | None = None,
) -> tuple[IngestReport, str]:
    """Sync a source from a local origin (`govindex ingest git|path`): emit what differs
    between it and what was last emitted for the source (see `sync_snapshot`).

    `origin` is a folder (a file's version is the hash of its bytes) or a git repository at
    a revision (`git:<sha>` of the commit that last changed the file). A folder is recorded
    as the source's checkpoint, so `reconcile_source` (and `govindex up`) can compare it
    with the index later; a checkout is not. Returns the report and the snapshot's own
    version (`git:<sha>` of the checkout, `folder:<time read>`).
    """
    if isinstance(origin, GitCheckout):
        snapshot = GitSnapshot(origin.repo, origin.rev)  # a bad repository is told first
        manifest = await registered(rt, source_id)
        versions, version = git_versions(snapshot), snapshot.source_version
        ctx = _context(rt, manifest, versions, snapshot.committed_at, version, filters)
        view = SourceView(snapshot, ctx, checkpoint=None)
    else:
        view = folder_view(rt, await registered(rt, source_id), origin, filters)
    report = await sync_snapshot(view, state=rt.ingest_state, progress=progress)
    return report, view.ctx.deletion_version


async def reconcile_source(
    rt: Runtime, source_id: str
) -> tuple[SourceManifest, Drift, IngestReport]:
    """Make the index equal to a source (see `reconcile_snapshot`): a git source's branch
    head (its mirror fetched now), or a folder source's folder (the manifest's
    `folder.path`, else where `govindex ingest path` last read it).

    The backstop for a missed webhook, a lost event or a dead-lettered one.
    """
    manifest = await registered(rt, source_id)
    read = await _reader(rt, manifest)
    if read is None:
        raise SourceRefused(
            f"source {source_id!r} has no `git` section (remote_url, branch) and no `folder` "
            "section (path) in its manifest, and was never ingested with `govindex ingest "
            "path`: there is nothing to compare the index with. Add one of the sections"
        )
    view = await read()
    drift, report = await reconcile_snapshot(view, catalog=rt.registry, state=rt.ingest_state)
    return manifest, drift, report


async def reconcile_sources(rt: Runtime) -> dict[str, str]:
    """Reconcile every enabled git and folder source (anti-entropy at start); CDC sources
    replay from their own log. Returns a line per source; a failing source is reported,
    never fatal."""
    results: dict[str, str] = {}
    for manifest in await rt.registry.all():
        if not manifest.enabled or manifest.cdc is not None:
            continue
        if manifest.git is None and await _folder_of(rt, manifest) is None:
            continue
        try:
            _, drift, report = await reconcile_source(rt, manifest.source_id)
        except GovindexError as exc:
            results[manifest.source_id] = f"not reconciled: {exc}"
            log.warning("reconcile.failed", source=manifest.source_id, error=str(exc))
            continue
        results[manifest.source_id] = (
            f"{len(drift.missing_or_stale)} missing or stale, {len(drift.only_in_index)} only "
            f"in the index; emitted {len(report.created)} created, {len(report.updated)} "
            f"updated, {len(report.deleted)} deleted"
        )
        log.info("reconcile.done", source=manifest.source_id, result=results[manifest.source_id])
    return results


async def _reader(rt: Runtime, manifest: SourceManifest) -> Reader | None:
    """How to read a registered source now: a git source's branch head (its mirror
    fetched), a folder source's folder; None when the source names neither."""
    if manifest.git is not None:

        async def git() -> SourceView:
            return await git_view(manifest, receiver_ports(rt))

        return git
    folder = await _folder_of(rt, manifest)
    if folder is None:
        return None
    filters = (
        Filters(manifest.folder.include, manifest.folder.exclude) if manifest.folder else Filters()
    )

    async def local() -> SourceView:
        return folder_view(rt, manifest, folder, filters)

    return local


async def _folder_of(rt: Runtime, manifest: SourceManifest) -> Path | None:
    if manifest.folder is not None:
        return Path(manifest.folder.path)
    position = await rt.ingest_state.checkpoint(manifest.tenant, manifest.source_id)
    return Path(position.removeprefix(FOLDER)) if position and position.startswith(FOLDER) else None


# --- deletions ------------------------------------------------------------------------------


async def delete_one(
    rt: Runtime, source_id: str, doc_id: str, reason: str
) -> tuple[SourceManifest, int]:
    """Emit a tombstone for one document at its next sequence, above what the index holds,
    and publish it at once: a worker's relay would publish it behind every row it has
    queued. Should the broker be away, the relay publishes it later (it is in the outbox)."""
    manifest = await registered(rt, source_id)
    sequence, event_id = await delete_document(
        manifest,
        doc_id,
        topics=rt.settings.topics,
        state=rt.ingest_state,
        deleted_at=datetime.now(UTC),
        reason=reason,
        applied=await rt.registry.document_sequence(manifest.tenant, source_id, doc_id),
    )
    try:
        publisher = await rt.publisher()
        await asyncio.wait_for(
            rt.outbox.relay(publisher.publish_many, event_ids=[event_id]), PUBLISH_NOW_S
        )
    except (TransientError, TimeoutError) as exc:
        log.warning("delete.published_by_relay", event_id=event_id, error=str(exc))
    return manifest, sequence


async def retire_source(rt: Runtime, source_id: str, reason: str) -> list[str]:
    """Disable a source and emit a deletion for every document the index holds of it."""
    manifest = await rt.registry.set_enabled(source_id, False)
    if manifest is None:
        raise SourceRefused(f"source {source_id!r} is not registered")
    if rt.cache is not None:  # reads refuse it from now on; cached answers go too
        await rt.cache.evict_source(manifest.tenant, source_id)
    return await delete_source(
        manifest,
        held=await rt.registry.held_documents(source_id),
        topics=rt.settings.topics,
        state=rt.ingest_state,
        deleted_at=datetime.now(UTC),
        reason=reason,
    )


# --- backfill -------------------------------------------------------------------------------

BACKFILL = "backfill"
BACKFILL_STEP = 100  # documents per step at most (fewer at a low rate)


async def run_backfill(rt: Runtime, job: Job, progress: Callable[[int, int | None], None]) -> Job:
    """Run (or continue) a backfill job: documents in id order, the last one done as
    checkpoint; a step repeated after a crash emits the same event ids (duplicates).

    The scope is what the source has now and what was emitted before (a document the source
    lost gets its deletion), matching `docs` when given, after the checkpoint.
    """
    manifest = await registered(rt, job.args["source"])
    docs = tuple(job.args.get("docs") or ())
    after = str(job.checkpoint.get("after", ""))
    read = await _reader(rt, manifest)
    if read is None:
        raise SourceRefused(
            f"source {manifest.source_id!r} has no `git` section and no `folder` section in "
            "its manifest, and was never ingested with `govindex ingest path`: there is no "
            "source to read again (a CDC source is backfilled by a Debezium snapshot)"
        )
    view = await read()
    present = {f.doc_id for f in view.snapshot.files(view.ctx.include, view.ctx.exclude)}
    known = set(await rt.ingest_state.known(manifest.tenant, manifest.source_id))
    wanted = (d for d in sorted(present | known) if not docs or selected(d, docs, ()))
    scope = [d for d in wanted if d > after]
    if job.total is None:
        await rt.jobs.start(job.id, len(scope), {"after": ""})
        job = job.model_copy(update={"total": len(scope)})
    counts, done = dict(job.counts), job.done
    pacer = Pacer(None if job.dry_run else job.rate)
    progress(done, job.total)
    while True:
        size = pacer.batch(BACKFILL_STEP)
        step, scope = scope[:size], scope[size:]
        if job.dry_run:
            for doc_id in step:
                gone = doc_id not in present
                _bump(counts, "deleted" if gone else "updated" if doc_id in known else "created")
        else:
            report = await backfill_documents(
                manifest, step, read, state=rt.ingest_state, op=f"backfill:{job.id}"
            )
            for key, found in (
                ("created", report.created),
                ("updated", report.updated),
                ("deleted", report.deleted),
            ):
                if found:
                    _bump(counts, key, len(found))
            if report.skipped:
                _bump(counts, "skipped", len(report.skipped))
        done += len(step)
        after = step[-1] if step else after
        outcome = await rt.jobs.record(
            job.id, done=done, counts=counts, checkpoint={"after": after}, finished=not scope
        )
        progress(done, job.total)
        if not scope or outcome.state != JobState.RUNNING:
            break
        pacer.retune(None if job.dry_run else outcome.rate)
        await pacer.pace(len(step))
    final = await rt.jobs.get(job.id)
    assert final is not None
    return final


def _bump(counts: dict[str, int], key: str, by: int = 1) -> None:
    counts[key] = counts.get(key, 0) + by


# --- long-running connectors --------------------------------------------------------------


async def cdc_subscriptions(rt: Runtime, known: Collection[str] = ()) -> list[Subscription]:
    """One subscription per Debezium topic named by a registered source's `cdc` section,
    leaving out the consumers in `known` (already subscribed): the CDC worker asks again
    every `cdc_rescan_s` and subscribes the sources registered since."""
    manifests = [m for m in await rt.registry.cdc_sources() if f"{CDC}:{m.source_id}" not in known]
    if not manifests:
        if not known:
            log.info("cdc.no_sources")
        return []
    ports = CdcPorts(registry=rt.registry, ledger=rt.ingest_state, topics=rt.settings.topics)
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
    url: str | None = None
    _listener: Listener | None = None

    async def start(self) -> str:
        self._listener = Listener("webhooks", self.host, self.port)
        self.url = await self._listener.start(build_app(receiver_ports(self.rt)))
        return self.url

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
