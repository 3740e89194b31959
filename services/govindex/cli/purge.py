"""`govindex verify-purge`, `purge-status`, `retention`: deletions and what they left."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from govindex.cli.common import (
    DEFAULT_DIR,
    LogLevel,
    SourceId,
    StateDir,
    console,
    err,
    print_table,
    setup,
    when,
    with_runtime,
)

if TYPE_CHECKING:
    from govindex.core.records import SourceManifest
    from govindex.runtime.composition import Runtime
    from purger.retention import RetentionReport
    from purger.verify import Verification


def verify_purge_command(
    source: SourceId,
    doc: Annotated[str, typer.Option("--doc", metavar="DOC", help="Document id.")],
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Re-check every sink for a deleted document; exit 1 if anything is left.

    Re-checks Postgres, every OpenSearch generation, the Redis cache and stored summaries
    for the latest deletion of DOC. Exits 0 only when nothing of the deleted content is
    left (with deletion_mode tombstone: when nothing of it is current). A purge takes a
    few seconds after `govindex delete`: until it is done this exits 1.

        govindex verify-purge --source handbook --doc runbooks/cache-flush.md
    """
    from ingest.app import registered
    from purger.app import verify_document_purge

    settings = setup(state_dir, log_level)

    async def verify(rt: Runtime) -> Verification:
        manifest = await registered(rt, source, enabled=False)
        return await verify_document_purge(rt, manifest, doc)

    report = with_runtime(settings, verify)
    console.print(
        f"{source}/{doc}: deletion at sequence {report.sequence} "
        f"({report.mode}, purge {report.state})"
    )
    for sink, left, detail in report.sinks:
        console.print(f"  {'ok  ' if not left else 'LEFT'} {sink:<11} {left} remaining  {detail}")
    if report.clean:
        console.print("nothing of the deleted content is left")
        return 0
    err.print("content is left: the purge is not complete (see `govindex purge-status`)")
    return 1


def purge_status_command(state_dir: StateDir = DEFAULT_DIR, log_level: LogLevel = "WARNING") -> int:
    """List pending and failing purges with attempts and the last error.

    A purge is pending from a deletion until every sink is read back empty; a failing one
    is retried, its last error shown here.

        govindex purge-status
    """
    settings = setup(state_dir, log_level)
    pending = with_runtime(settings, lambda rt: rt.purges.pending())
    if not pending:
        console.print("no pending or failed purges")
        return 0
    print_table(
        ("DOC", "SEQ", "MODE", "SINCE", "STATE", "ATTEMPTS", "LAST ERROR"),
        (
            (
                f"{t.source_id}/{t.doc_id}",
                str(t.sequence),
                t.deletion_mode,
                when(t.recorded_at),
                "failing" if t.purge_attempts else "pending",
                str(t.purge_attempts),
                (t.purge_error or "-")[:60],
            )
            for t in pending
        ),
    )
    return 0


def retention_command(
    source: Annotated[
        str | None, typer.Option("--source", metavar="SOURCE", help="Only this source.")
    ] = None,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "WARNING",
) -> int:
    """Purge superseded versions older than each source's history_retention.

    Removes the content of superseded versions whose supersession is older than the
    source's history_retention, from Postgres, every OpenSearch generation, the cache and
    stored summaries built from their chunks; current versions are never touched. Without
    --source, also deletes the read audit's records older than GOVINDEX_AUDIT_RETENTION_DAYS
    and kept packs past GOVINDEX_PACK_RETENTION_DAYS.
    Run it on a schedule (cron, a Kubernetes CronJob).

        govindex retention
        govindex retention --source handbook
    """
    from ingest.app import registered
    from purger.app import apply_retention

    settings = setup(state_dir, log_level)

    async def run(rt: Runtime) -> tuple[RetentionReport, int | None, int | None]:
        manifests: list[SourceManifest] = (
            [await registered(rt, source, enabled=False)] if source else await rt.registry.all()
        )
        report = await apply_retention(rt, manifests)
        # The audit belongs to no source: a run narrowed to one leaves it alone.
        pruned = None if source else await rt.audit.prune(settings.audit_retention_days)
        expired = None if source else await rt.packs.expire()
        return report, pruned, expired

    report, audit_pruned, packs_expired = with_runtime(settings, run)
    console.print(
        f"retention: {len(report.versions)} versions purged ({report.chunks} chunks, "
        f"{report.cache_entries} cache entries, {report.summaries} summaries invalidated)"
    )
    for version in report.versions:
        console.print(f"  {version}")
    if audit_pruned is not None:
        console.print(
            f"retention: {audit_pruned} audit records older than "
            f"{settings.audit_retention_days} days deleted"
        )
    if packs_expired is not None:
        console.print(
            f"retention: {packs_expired} kept packs past GOVINDEX_PACK_RETENTION_DAYS "
            f"({settings.pack_retention_days}) deleted, with their text"
        )
    return 0
