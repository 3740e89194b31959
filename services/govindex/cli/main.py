"""The `govindex` command line: run the stack, register sources, ingest, inspect, query."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from psycopg_pool import AsyncConnectionPool

from govindex import __version__
from govindex.core.errors import GovindexError
from govindex.core.logs import configure_logging
from govindex.core.settings import DEFAULT_STATE_DIR, Settings, read_stack_file

log = structlog.get_logger("govindex.cli.main.main")

EPILOG = textwrap.dedent(
    """\
    Typical session (two terminals, same directory):
      govindex up                                  # terminal 1: embedded stack + workers
      govindex source apply manifests/*.yaml       # terminal 2
      govindex ingest git ./handbook --source handbook
      govindex query "rollback" --tenant acme --principal group:sre
      govindex delete --source handbook --doc runbooks/old.md
      govindex documents --source handbook
      govindex status

    Against production servers set GOVINDEX_PG_DSN, GOVINDEX_KAFKA_BOOTSTRAP,
    GOVINDEX_OPENSEARCH_URL and GOVINDEX_REDIS_URL; without them commands use the stack
    that `govindex up` recorded in STATE_DIR/stack.json.
    """
)


class Failure(Exception):
    """A command failed in a way the user can fix; the message says how."""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(level=getattr(args, "log_level", "WARNING"))
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        result: int = args.run(args)
        return result
    except KeyboardInterrupt:
        return 130
    except (Failure, GovindexError) as exc:
        print(f"govindex: {exc}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="govindex",
        description="Governed ingestion and indexing for retrieval systems: every chunk is "
        "stamped with source version, content hash, valid time, ACL and parser version; "
        "deletions reach every copy.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"govindex {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("GOVINDEX_STATE_DIR", DEFAULT_STATE_DIR)),
        help="where `govindex up` keeps Postgres data, logs and stack.json (default: .govindex)",
    )
    common.add_argument("--log-level", default="WARNING", help="log level (default: WARNING)")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    def command(
        name: str,
        run: Callable[[argparse.Namespace], int],
        help_text: str,
        description: str | None = None,
        parent: Any = sub,
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parent.add_parser(
            name,
            parents=[common],
            help=help_text,
            description=description or help_text,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(run=run)
        return p

    up = command(
        "up",
        cmd_up,
        "start the embedded stack and the workers until Ctrl-C",
        "Start PostgreSQL, a Kafka-compatible broker, an OpenSearch-compatible server and "
        "Redis on loopback with free ports (or use the servers named by GOVINDEX_* settings),\n"
        "create topics, migrate the database, create the index template and alias, rebuild\n"
        "the OpenSearch projection from Postgres if it is empty, then run the indexer, the\n"
        "purger and the outbox relay until Ctrl-C. Addresses go to STATE_DIR/stack.json.",
    )
    up.add_argument(
        "--workers",
        default="indexer,purger,cdc",
        help="comma-separated workers to run (default: indexer,purger,cdc)",
    )

    source = sub.add_parser("source", help="register source manifests")
    source_sub = source.add_subparsers(title="source commands", metavar="COMMAND")
    apply = command(
        "apply",
        cmd_source_apply,
        "validate manifests and register them in Postgres",
        "Validate YAML source manifests and register (or update) them. Every problem is\n"
        "reported with its file and field; nothing is registered unless all files are valid.",
        parent=source_sub,
    )
    apply.add_argument("files", nargs="+", type=Path, metavar="FILE")
    apply.add_argument("--check", action="store_true", help="validate only; register nothing")

    for verb, meaning in (
        ("disable", "stop accepting its events"),
        ("delete", "retire it for good"),
    ):
        retire = command(
            verb,
            cmd_source_retire,
            f"{meaning} and purge every document of the source",
            f"Mark the source disabled ({meaning}) and emit a deletion for every document the\n"
            "index holds for it. The purger removes their content from every sink whatever\n"
            "the source's deletion_mode, and writes a receipt per document.",
            parent=source_sub,
        )
        retire.add_argument("source_id", metavar="ID")
        retire.set_defaults(reason=f"source_{verb}d")

    ingest = sub.add_parser("ingest", help="emit document events from a git repo or a folder")
    ingest_sub = ingest.add_subparsers(title="ingest commands", metavar="COMMAND")
    git = command(
        "git",
        cmd_ingest_git,
        "ingest a local git repository at a revision",
        "Emit created / updated / deleted events for what changed in REPO at REV since the\n"
        "state last ingested for the source (the whole tree on the first run).\n"
        "source_version is git:<sha> of REV; observed_at is its commit time.",
        parent=ingest_sub,
    )
    git.add_argument("repo", type=Path, metavar="REPO")
    git.add_argument("--source", required=True, metavar="ID", help="registered source id")
    git.add_argument("--rev", default="HEAD", help="revision to ingest (default: HEAD)")
    _filters(git)
    path = command(
        "path",
        cmd_ingest_path,
        "ingest a plain folder (version = content hash)",
        parent=ingest_sub,
    )
    path.add_argument("dir", type=Path, metavar="DIR")
    path.add_argument("--source", required=True, metavar="ID", help="registered source id")
    _filters(path)

    reconcile = command(
        "reconcile",
        cmd_reconcile,
        "make the index equal to a git source's branch head",
        "Fetch the source's mirror, compare the tree at the branch head with what the index\n"
        "holds, and emit the missing creates, updates and deletes. The backstop for a missed\n"
        "webhook: a file deleted in git never stays searchable. Needs the manifest's `git`\n"
        "section (remote_url, branch).",
    )
    reconcile.add_argument("--source", required=True, metavar="ID")

    delete = command(
        "delete",
        cmd_delete,
        "emit a tombstone for one document",
        "Emit document.deleted for DOC at its next sequence. The indexer records the\n"
        "tombstone (later or replayed updates with a lower sequence are dropped) and the\n"
        "purger removes the content according to the source's deletion_mode.",
    )
    delete.add_argument("--source", required=True, metavar="ID")
    delete.add_argument("--doc", required=True, metavar="DOC", help="document id (its path)")
    delete.add_argument("--reason", default="deleted_by_operator")

    verify = command(
        "verify-purge",
        cmd_verify_purge,
        "re-check every sink for a deleted document; exit 1 if anything is left",
        "Re-check Postgres, every OpenSearch generation, the Redis cache and stored\n"
        "summaries for the latest deletion of DOC. Exits 0 only when nothing of the deleted\n"
        "content is left (with deletion_mode tombstone: when nothing of it is current).",
    )
    verify.add_argument("--source", required=True, metavar="ID")
    verify.add_argument("--doc", required=True, metavar="DOC")

    command("purge-status", cmd_purge_status, "list pending and failed purges")

    retention = command(
        "retention",
        cmd_retention,
        "purge superseded versions older than each source's history_retention",
        "Remove the content of superseded versions whose supersession is older than the\n"
        "source's history_retention, from Postgres, every OpenSearch generation, the cache\n"
        "and stored summaries built from their chunks; current versions are never touched.\n"
        "Run it on a schedule (cron, a Kubernetes CronJob).",
    )
    retention.add_argument("--source", metavar="ID", help="only this source")

    documents = command("documents", cmd_documents, "list the documents held for a source")
    documents.add_argument("--source", required=True, metavar="ID")
    documents.add_argument("--json", action="store_true", help="print JSON lines")

    status = command(
        "status", cmd_status, "show servers, topics with consumer lag, dead letters, pending purges"
    )
    status.add_argument("--json", action="store_true")

    query = command(
        "query",
        cmd_query,
        "search the governed index",
        "Search for TEXT and return only chunks of TENANT whose ACL admits one of the\n"
        "principals, allowed for the purpose (if given) and valid at --as-of (default now).\n"
        "A superseded version is returned for a time when it was the valid one.",
    )
    query.add_argument("text", metavar="TEXT")
    query.add_argument("--tenant", required=True)
    query.add_argument(
        "--principal",
        action="append",
        required=True,
        metavar="P",
        help="a principal of the caller (repeat for several), e.g. group:sre",
    )
    query.add_argument("--purpose", help="why the caller asks, e.g. incident-response")
    query.add_argument(
        "--as-of",
        type=_aware_datetime,
        metavar="ISO",
        help="valid time to ask about, ISO 8601 with zone (default: now)",
    )
    query.add_argument("--limit", type=int, default=10)
    query.add_argument("--json", action="store_true", help="full chunk records as JSON lines")

    chunk = command(
        "chunk",
        cmd_chunk,
        "show how a file would be cut into chunks",
        "Parse FILE locally (no servers needed) and print each chunk's kind, locator, span,\n"
        "heading path, labels, token estimate and first line, or the full records as JSON\n"
        "lines. The parser comes from --parser or, by default, from the file type.\n\n"
        "  govindex chunk runbooks/db-failover.md\n"
        "  govindex chunk infra/main.tf --json",
    )
    chunk.add_argument("file", type=Path, metavar="FILE")
    chunk.add_argument(
        "--parser", default="auto", help="markdown, csv, python, yaml, json, hcl, text or auto"
    )
    chunk.add_argument("--json", action="store_true", help="full chunk records as JSON lines")

    reparse = command(
        "reparse",
        cmd_reparse,
        "re-chunk stored content whose parser version changed",
        "Re-chunk the stored raw content of current versions (no re-fetch from the source)\n"
        "whose parser or parser version differs from today's, and replace their chunks in\n"
        "Postgres and OpenSearch. Access, validity and sequences are kept. Documents already\n"
        "cut by today's parser are skipped.\n\n"
        "  govindex reparse --source handbook\n"
        "  govindex reparse --parser markdown",
    )
    reparse.add_argument("--source", metavar="ID", help="only this source")
    reparse.add_argument("--parser", metavar="NAME", help="only versions cut by this parser")

    reindex = command(
        "reindex",
        cmd_reindex,
        "rebuild the OpenSearch projection from Postgres into a new generation",
    )
    del reindex

    demo = command(
        "demo",
        cmd_demo,
        "run the bundled demo on a fresh embedded stack",
        "Start an embedded stack in a temporary state dir, register sample sources, ingest\n"
        "a bundled corpus in two commits, run governed queries, delete a document and\n"
        "print a short report. Leaves nothing running.",
    )
    del demo

    schemas = command("schemas", cmd_schemas, "write or check JSON Schemas in schemas/")
    schemas.add_argument("--write", action="store_true", help="rewrite the schema files")
    schemas.add_argument("--dir", type=Path, default=Path("schemas"))

    command(
        "bootstrap",
        cmd_bootstrap,
        "prepare configured servers, then exit",
        "Create topics, migrate the database, create the index template and alias, and\n"
        "rebuild the projection if the index is empty. Idempotent; run it once per deploy\n"
        "(a Kubernetes Job, a compose one-shot) before starting workers.",
    )

    worker = command(
        "worker",
        cmd_worker,
        "run workers against configured servers (production entry point)",
        "Run the indexer and/or the purger (each with an outbox relay) against the servers\n"
        "named by GOVINDEX_* settings until SIGTERM. Run `govindex bootstrap` first.\n"
        "Scale by running more replicas, up to the partition count of their topic.",
    )
    worker.add_argument(
        "names",
        nargs="*",
        default=["indexer", "purger"],
        help="any of indexer, purger, cdc, webhooks (default: indexer purger)",
    )
    worker.add_argument(
        "--webhook-host",
        default="0.0.0.0",  # noqa: S104 - a server's job
        help="address the webhook receiver listens on (default: 0.0.0.0)",
    )
    worker.add_argument(
        "--webhook-port",
        type=int,
        default=8080,
        help="port of the webhook receiver (default: 8080)",
    )
    return parser


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--include",
        action="append",
        metavar="GLOB",
        help="files to ingest (repeatable; default: *.md *.markdown *.txt)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="files to leave out (repeatable)",
    )


def _aware_datetime(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not ISO 8601; use e.g. 2025-03-01T00:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} has no time zone; add Z or +00:00")
    return parsed


def settings_for(args: argparse.Namespace, *, servers: bool = True) -> Settings:
    settings = Settings(state_dir=args.state_dir)
    return settings.require_servers() if servers else settings


@asynccontextmanager
async def pool_for(settings: Settings) -> AsyncIterator[AsyncConnectionPool]:
    from govindex.adapters.postgres.pool import open_pool

    assert settings.pg_dsn
    pool = open_pool(settings.pg_dsn, max_size=4)
    try:
        await pool.open(wait=True, timeout=15)
    except Exception as exc:
        raise Failure(
            f"cannot reach PostgreSQL at {settings.pg_dsn}: {exc}. Is `govindex up` running?"
        ) from exc
    try:
        yield pool
    finally:
        await pool.close()


# --- up / worker -----------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> int:
    configure_logging(level="INFO" if args.log_level == "WARNING" else args.log_level)
    from govindex.devstack.embedded import EmbeddedStack

    settings = Settings(state_dir=args.state_dir)
    workers = tuple(w.strip() for w in args.workers.split(",") if w.strip())
    stack: EmbeddedStack | None = None
    if not settings.servers_configured:
        existing = read_stack_file(args.state_dir)
        if existing and _alive(int(existing.get("pid", 0))):
            raise Failure(
                f"a stack is already running from {args.state_dir} (pid {existing['pid']}); "
                "stop it with Ctrl-C in its terminal, or use another --state-dir"
            )
        stack = EmbeddedStack(args.state_dir, namespace=settings.namespace)
        print(f"govindex: starting the embedded stack in {args.state_dir}/ ...", flush=True)
        addresses = stack.start()
        settings = settings.model_copy(update=addresses)
    try:
        return asyncio.run(_serve(settings, workers, stack))
    finally:
        if stack is not None:
            stack.stop()
            print("govindex: stack stopped", flush=True)


async def _serve(
    settings: Settings,
    workers: tuple[str, ...],
    stack: Any,
    *,
    bootstrap: bool = True,
    webhook_port: int | None = None,
    webhook_host: str = "127.0.0.1",
) -> int:
    from govindex.adapters.opensearch import OpenSearchIndex
    from govindex.runtime.bootstrap import prepare
    from govindex.runtime.workers import Workers

    if bootstrap:
        generation = await prepare(settings)
    else:
        assert settings.opensearch_url
        index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
        try:
            generation = await index.live_generation() or 0
        finally:
            await index.close()
    running = Workers(settings, run=workers)
    await running.start()
    webhooks = None
    if stack is not None or webhook_port is not None:
        from ingest.app import WebhookServer

        webhooks = WebhookServer(settings, host=webhook_host, port=webhook_port or 0)
        settings = settings.model_copy(update={"http_url": await webhooks.start()})
    if stack is not None:
        stack.write_stack_file({"generation": generation, "http_url": settings.http_url})
    print(
        "govindex: ready\n"
        f"  postgres    {settings.pg_dsn}\n"
        f"  kafka       {settings.kafka_bootstrap}\n"
        f"  opensearch  {settings.opensearch_url}  (alias {settings.index_alias}, "
        f"generation {generation})\n"
        f"  redis       {settings.redis_url}\n"
        f"  workers     {', '.join(workers)}\n"
        f"  webhooks    {settings.http_url or 'not served'}"
        f"{'/webhooks/github, /webhooks/gitlab' if settings.http_url else ''}\n"
        "Press Ctrl-C to stop.",
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("govindex: stopping ...", flush=True)
    if webhooks is not None:
        await webhooks.stop()
    await running.stop()
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    configure_logging(level="INFO" if args.log_level == "WARNING" else args.log_level)
    settings = settings_for(args)
    unknown = set(args.names) - {"indexer", "purger", "cdc", "webhooks"}
    if unknown:
        raise Failure(
            f"unknown worker(s) {', '.join(sorted(unknown))}; use indexer, purger, cdc, webhooks"
        )
    workers = tuple(n for n in args.names if n != "webhooks")
    port = args.webhook_port if "webhooks" in args.names else None
    return asyncio.run(
        _serve(
            settings,
            workers,
            None,
            bootstrap=False,
            webhook_port=port,
            webhook_host=args.webhook_host,
        )
    )


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from govindex.runtime.bootstrap import prepare

    settings = settings_for(args)
    generation = asyncio.run(prepare(settings))
    print(
        f"ready: topics {', '.join(settings.topics.all())}; database migrated; "
        f"alias {settings.index_alias} -> generation {generation}"
    )
    return 0


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- sources -----------------------------------------------------------------------------


def cmd_source_apply(args: argparse.Namespace) -> int:
    from govindex.core.manifests import load_manifests

    manifests = load_manifests(args.files)
    if args.check:
        for m in manifests:
            print(f"ok  {m.source_id}  (tenant {m.tenant}, {m.source_type.value})")
        return 0
    settings = settings_for(args)

    async def run() -> int:
        from govindex.adapters.postgres.pool import migrate
        from govindex.adapters.postgres.store import PostgresSourceRegistry

        assert settings.pg_dsn
        await migrate(settings.pg_dsn)
        async with pool_for(settings) as pool:
            registry = PostgresSourceRegistry(pool)
            for m in manifests:
                outcome = await registry.register(m)
                state = "enabled" if m.enabled else "DISABLED"
                print(
                    f"{outcome:8} {m.source_id}  (tenant {m.tenant}, {m.source_type.value}, "
                    f"{m.deletion_mode.value}, {state})"
                )
        return 0

    return asyncio.run(run())


async def _manifest(pool: AsyncConnectionPool, source_id: str, *, enabled: bool = True) -> Any:
    """The registered manifest of a source, or a Failure that says how to register it.

    With `enabled`, a disabled source is refused too (for commands that emit events).
    """
    from govindex.adapters.postgres.store import PostgresSourceRegistry

    manifest = await PostgresSourceRegistry(pool).find(source_id)
    if manifest is None:
        raise Failure(
            f"source {source_id!r} is not registered; run `govindex source apply MANIFEST.yaml`"
        )
    if enabled and not manifest.enabled:
        raise Failure(f"source {source_id!r} is disabled in its manifest")
    return manifest


# --- ingest / delete ---------------------------------------------------------------------


def cmd_source_retire(args: argparse.Namespace) -> int:
    from govindex.adapters.kafka import KafkaEventPublisher
    from govindex.adapters.postgres.ingest_state import PostgresIngestState
    from govindex.adapters.postgres.store import PostgresSourceRegistry
    from ingest.handlers import delete_source

    settings = settings_for(args)

    async def run() -> int:
        assert settings.kafka_bootstrap
        async with pool_for(settings) as pool:
            registry = PostgresSourceRegistry(pool)
            manifest = await registry.set_enabled(args.source_id, False)
            if manifest is None:
                raise Failure(f"source {args.source_id!r} is not registered")
            held = await registry.held_documents(args.source_id)
            with KafkaEventPublisher(settings.kafka_bootstrap) as publisher:
                deleted = await delete_source(
                    manifest,
                    held=held,
                    topics=settings.topics,
                    state=PostgresIngestState(pool),
                    publisher=publisher,
                    deleted_at=datetime.now(UTC),
                    reason=args.reason,
                )
        print(
            f"source {args.source_id} disabled; deletions emitted for {len(deleted)} "
            f"documents ({args.reason}). Follow with `govindex purge-status`."
        )
        return 0

    return asyncio.run(run())


def cmd_ingest_git(args: argparse.Namespace) -> int:
    from ingest.handlers import git_versions
    from ingest.sources import GitSnapshot

    snapshot = GitSnapshot(args.repo, args.rev)
    return _ingest(
        args,
        snapshot,
        versions=git_versions(snapshot),
        observed_at=snapshot.committed_at,
        deletion_version=snapshot.source_version,
        label=f"{args.repo} at {snapshot.sha[:12]}",
    )


def cmd_ingest_path(args: argparse.Namespace) -> int:
    from ingest.handlers import fingerprint_versions
    from ingest.sources import FolderSnapshot

    snapshot = FolderSnapshot(args.dir)
    return _ingest(
        args,
        snapshot,
        versions=fingerprint_versions(snapshot.observed_at),
        observed_at=snapshot.observed_at,
        deletion_version=f"folder:{snapshot.observed_at.isoformat()}",
        label=str(args.dir),
    )


def _ingest(
    args: argparse.Namespace,
    snapshot: Any,
    *,
    versions: Any,
    observed_at: datetime,
    deletion_version: str,
    label: str,
) -> int:
    from govindex.adapters.kafka import KafkaEventPublisher
    from govindex.adapters.postgres.ingest_state import PostgresIngestState
    from govindex.adapters.postgres.store import PostgresChunkStore
    from ingest.handlers import IngestContext, ingest_snapshot
    from ingest.sources import DEFAULT_INCLUDE

    settings = settings_for(args)

    async def run() -> int:
        assert settings.kafka_bootstrap
        async with pool_for(settings) as pool:
            manifest = await _manifest(pool, args.source)
            with KafkaEventPublisher(settings.kafka_bootstrap) as publisher:
                ctx = IngestContext(
                    manifest=manifest,
                    topics=settings.topics,
                    versions=versions,
                    observed_at=observed_at,
                    deletion_version=deletion_version,
                    inline_limit=settings.inline_content_limit,
                    include=tuple(args.include or DEFAULT_INCLUDE),
                    exclude=tuple(args.exclude),
                )
                report = await ingest_snapshot(
                    snapshot,
                    ctx,
                    state=PostgresIngestState(pool),
                    publisher=publisher,
                    blobs=PostgresChunkStore(pool),
                    progress=_progress,
                )
        print(
            f"\ringested {label} into source {args.source}: {len(report.created)} created, "
            f"{len(report.updated)} updated, {len(report.deleted)} deleted, "
            f"{report.unchanged} unchanged, {len(report.skipped)} skipped"
        )
        for skipped in report.skipped:
            print(f"  skipped {skipped.doc_id}: {skipped.reason}")
        return 0

    return asyncio.run(run())


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty() and total:
        print(f"\remitting events {done}/{total}", end="", file=sys.stderr, flush=True)


def cmd_reconcile(args: argparse.Namespace) -> int:
    from govindex.adapters.kafka import KafkaEventPublisher
    from ingest.receiver import ReceiverPorts, reconcile_source

    settings = settings_for(args)

    async def run() -> int:
        assert settings.kafka_bootstrap
        async with pool_for(settings) as pool:
            manifest = await _manifest(pool, args.source)
            if manifest.git is None:
                raise Failure(
                    f"source {args.source!r} has no `git` section (remote_url, branch) in its "
                    "manifest; add one, or use `govindex ingest git` for a local repository"
                )
            with KafkaEventPublisher(settings.kafka_bootstrap) as publisher:
                ports = ReceiverPorts(
                    pool=pool,
                    publisher=publisher,
                    topics=settings.topics,
                    mirrors=settings.state_dir / "mirrors",
                    inline_limit=settings.inline_content_limit,
                )
                drift, report = await reconcile_source(manifest, ports)
        print(
            f"reconciled {args.source} with {manifest.git.branch}: "
            f"{len(drift.missing_or_stale)} missing or stale in the index, "
            f"{len(drift.only_in_index)} only in the index; emitted {len(report.created)} "
            f"created, {len(report.updated)} updated, {len(report.deleted)} deleted"
        )
        for doc_id in drift.missing_or_stale + drift.only_in_index:
            print(f"  {doc_id}")
        return 0

    return asyncio.run(run())


def cmd_delete(args: argparse.Namespace) -> int:
    from govindex.adapters.kafka import KafkaEventPublisher
    from govindex.adapters.postgres.ingest_state import PostgresIngestState
    from ingest.handlers import delete_document

    settings = settings_for(args)

    async def run() -> int:
        assert settings.kafka_bootstrap
        async with pool_for(settings) as pool:
            manifest = await _manifest(pool, args.source)
            with KafkaEventPublisher(settings.kafka_bootstrap) as publisher:
                sequence = await delete_document(
                    manifest,
                    args.doc,
                    topics=settings.topics,
                    state=PostgresIngestState(pool),
                    publisher=publisher,
                    deleted_at=datetime.now(UTC),
                    reason=args.reason,
                )
        print(
            f"tombstone emitted for {args.source}/{args.doc} at sequence {sequence} "
            f"(deletion_mode {manifest.deletion_mode.value}); "
            f"check with `govindex documents --source {args.source}`"
        )
        return 0

    return asyncio.run(run())


# --- documents / status / query --------------------------------------------------------


def cmd_verify_purge(args: argparse.Namespace) -> int:
    from purger.verify import verify_purge

    settings = settings_for(args)

    async def run() -> int:
        async with pool_for(settings) as pool:
            manifest = await _manifest(pool, args.source, enabled=False)
            report = await verify_purge(settings, pool, manifest, args.doc)
        print(
            f"{args.source}/{args.doc}: deletion at sequence {report.sequence} "
            f"({report.mode}, purge {report.state})"
        )
        for sink, left, detail in report.sinks:
            print(f"  {'ok  ' if not left else 'LEFT'} {sink:<11} {left} remaining  {detail}")
        if report.clean:
            print("nothing of the deleted content is left")
            return 0
        print(
            "content is left: the purge is not complete (see `govindex purge-status`)",
            file=sys.stderr,
        )
        return 1

    return asyncio.run(run())


def cmd_retention(args: argparse.Namespace) -> int:
    from govindex.adapters.opensearch import OpenSearchIndex
    from govindex.adapters.postgres.lineage import PostgresLineage
    from govindex.adapters.postgres.store import PostgresPurgeStore
    from govindex.adapters.redis_cache import RedisTaggedCache
    from purger.retention import enforce_retention

    settings = settings_for(args)

    async def run() -> int:
        assert settings.opensearch_url
        index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
        cache = (
            RedisTaggedCache(settings.redis_url, settings.namespace) if settings.redis_url else None
        )
        try:
            async with pool_for(settings) as pool:
                manifests = await _all_manifests(pool, args.source)
                report = await enforce_retention(
                    manifests,
                    store=PostgresPurgeStore(pool),
                    index=index,
                    lineage=PostgresLineage(pool),
                    cache=cache,
                    now=datetime.now(UTC),
                )
        finally:
            await index.close()
            if cache is not None:
                await cache.close()
        print(
            f"retention: {len(report.versions)} versions purged ({report.chunks} chunks, "
            f"{report.cache_entries} cache entries, {report.summaries} summaries "
            "invalidated)"
        )
        for version in report.versions:
            print(f"  {version}")
        return 0

    return asyncio.run(run())


async def _all_manifests(pool: AsyncConnectionPool, source_id: str | None) -> list[Any]:
    from govindex.adapters.postgres.store import transaction
    from govindex.core.records import SourceManifest

    if source_id:
        return [await _manifest(pool, source_id, enabled=False)]
    async with transaction(pool) as conn:
        cur = await conn.execute("SELECT manifest FROM sources ORDER BY source_id")
        rows = await cur.fetchall()
    return [SourceManifest.model_validate(row[0]) for row in rows]


def cmd_purge_status(args: argparse.Namespace) -> int:
    from govindex.adapters.postgres.store import PostgresPurgeStore

    settings = settings_for(args)

    async def run() -> int:
        async with pool_for(settings) as pool:
            pending = await PostgresPurgeStore(pool).pending()
        if not pending:
            print("no pending or failed purges")
            return 0
        rows: list[tuple[str, ...]] = [
            ("DOC", "SEQ", "MODE", "SINCE", "STATE", "ATTEMPTS", "LAST ERROR")
        ]
        for t in pending:
            state = "failing" if t.purge_attempts else "pending"
            rows.append(
                (
                    f"{t.source_id}/{t.doc_id}",
                    str(t.sequence),
                    t.deletion_mode,
                    _time(t.recorded_at),
                    state,
                    str(t.purge_attempts),
                    (t.purge_error or "-")[:60],
                )
            )
        _print_table(rows)
        return 0

    return asyncio.run(run())


def cmd_documents(args: argparse.Namespace) -> int:
    from govindex.adapters.postgres.store import PostgresChunkStore

    settings = settings_for(args)

    async def run() -> int:
        async with pool_for(settings) as pool:
            await _manifest(pool, args.source, enabled=False)
            rows = await PostgresChunkStore(pool).documents(args.source)
        if args.json:
            for row in rows:
                print(json.dumps(row.__dict__, default=str))
            return 0
        if not rows:
            print(f"source {args.source} holds no documents yet")
            return 0
        header = (
            "DOC",
            "STATE",
            "SOURCE_VERSION",
            "SEQ",
            "CHUNKS",
            "VALID_FROM",
            "VALID_TO",
            "LAST_INDEXED",
        )
        table = [header] + [
            (
                r.doc_id,
                r.state,
                _short(r.source_version),
                str(r.last_sequence),
                str(r.chunk_count),
                _time(r.valid_from),
                _time(r.valid_to) or "-",
                _time(r.last_indexed_at),
            )
            for r in rows
        ]
        _print_table(table)
        return 0

    return asyncio.run(run())


def _short(version: str) -> str:
    if version.startswith("git:"):
        return version[:16]
    if version.startswith("sha256:"):
        return version[:19]
    return version[:40]


def _time(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else ""


def _print_table(rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


def cmd_status(args: argparse.Namespace) -> int:
    from govindex.runtime.status import collect_status, render_status

    settings = settings_for(args)
    report = asyncio.run(collect_status(settings))
    if args.json:
        print(json.dumps(report, default=str, indent=2))
    else:
        print(render_status(report))
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from govindex.adapters.opensearch import OpenSearchIndex
    from govindex.adapters.postgres.store import PostgresChunkStore
    from reader.search import Query, principals_of, search

    settings = settings_for(args)
    query = Query(
        text=args.text,
        tenant_id=args.tenant,
        principals=principals_of(args.principal),
        purpose=args.purpose,
        as_of=args.as_of or datetime.now(UTC),
        limit=args.limit,
    )

    async def run() -> int:
        assert settings.opensearch_url
        index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
        try:
            async with pool_for(settings) as pool:
                hits = await search(query, index=index, store=PostgresChunkStore(pool))
        finally:
            await index.close()
        if args.json:
            for hit in hits:
                print(json.dumps({"score": hit.score, **hit.chunk.model_dump(mode="json")}))
            return 0
        print(
            f"{len(hits)} result(s) for {query.text!r} as of {_time(query.as_of)} "
            f"(tenant {query.tenant_id}, principals {', '.join(query.principals)}"
            f"{', purpose ' + query.purpose if query.purpose else ''})"
        )
        for n, hit in enumerate(hits, start=1):
            c = hit.chunk
            print(f"\n{n}. {c.locator}  [{c.kind}]  score {hit.score:.3f}")
            print(f"   {' > '.join(c.heading_path)}" if c.heading_path else "   (preamble)")
            print(f"   {_first_body_line(c.text)[:100]}")
            print(
                f"   source_version {_short(c.source_version)}  version seq "
                f"{c.version_sequence}  "
                f"valid {_time(c.valid_from)} .. {_time(c.valid_to) or 'open'}"
            )
            print(
                f"   acl {', '.join(c.acl)}  {c.classification}  "
                f"parser {c.parser}@{c.parser_version}  hash {c.content_hash[:19]}"
            )
        return 0

    return asyncio.run(run())


def _first_body_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    body = [ln for ln in lines if not ln.startswith("#")]
    return (body or lines or [""])[0]


def cmd_chunk(args: argparse.Namespace) -> int:
    from govindex.core.errors import InvalidEvent
    from govindex.core.hashing import sha256_hex
    from indexer.parsers import parser_for
    from indexer.stamping import simhash64, token_estimate

    try:
        text = args.file.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise Failure(f"{args.file}: no such file") from None
    except UnicodeDecodeError as exc:
        raise Failure(f"{args.file} is not UTF-8 text ({exc.reason}); govindex skips it") from None
    parser = parser_for(args.parser, args.file.name)
    try:
        parsed = parser.parse(text)
    except InvalidEvent as exc:
        raise Failure(f"{args.file}: {exc}") from None
    where = args.file.as_posix()
    if args.json:
        for c in parsed.chunks:
            record = c.as_json()
            record.update(
                parser=parser.name,
                parser_version=parser.version,
                locator=_locator(where, c.anchor, c.span.line_start, c.span.line_end),
                content_hash=sha256_hex(c.text),
                token_estimate=token_estimate(c.text),
                simhash=simhash64(c.text),
            )
            print(json.dumps(record, ensure_ascii=False))
        return 0
    print(
        f"{where}: {len(parsed.chunks)} chunks by {parser.name}@{parser.version}"
        + (f", frontmatter {sorted(parsed.frontmatter)}" if parsed.frontmatter else "")
    )
    rows: list[tuple[str, ...]] = [
        ("#", "KIND", "LOCATOR", "LINES", "CHARS", "TOKENS", "PARENT", "LABELS", "FIRST LINE")
    ]
    for c in parsed.chunks:
        rows.append(
            (
                str(c.ordinal),
                c.kind.value,
                "#"
                + _locator(where, c.anchor, c.span.line_start, c.span.line_end).split("#", 1)[1],
                f"{c.span.line_start}-{c.span.line_end}",
                f"{c.span.char_start}-{c.span.char_end}",
                str(token_estimate(c.text)),
                "-" if c.parent_ordinal is None else str(c.parent_ordinal),
                ",".join(c.labels)[:32] or "-",
                _first_line(c.text)[:50],
            )
        )
    _print_table(rows)
    return 0


def _locator(where: str, anchor: str, first: int, last: int) -> str:
    return f"{where}#{anchor}" if anchor else f"{where}#L{first}-L{last}"


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def cmd_reparse(args: argparse.Namespace) -> int:
    from govindex.adapters.opensearch import OpenSearchIndex
    from govindex.adapters.postgres.store import PostgresChunkStore, PostgresSourceRegistry
    from indexer.reparse import reparse

    settings = settings_for(args)

    def progress(done: int, total: int, key: str) -> None:
        if sys.stderr.isatty():
            print(f"\rreparsing {done}/{total} {key[:60]:<60}", end="", file=sys.stderr, flush=True)

    async def run() -> int:
        assert settings.opensearch_url
        index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
        try:
            async with pool_for(settings) as pool:
                if args.source:
                    await _manifest(pool, args.source, enabled=False)
                report = await reparse(
                    store=PostgresChunkStore(pool),
                    registry=PostgresSourceRegistry(pool),
                    index=index,
                    source_id=args.source,
                    parser_name=args.parser,
                    generation=await index.live_generation() or 0,
                    progress=progress,
                )
        finally:
            await index.close()
        print(
            f"\rreparsed {len(report.reparsed)}, unchanged {report.unchanged}, changed "
            f"meanwhile {len(report.changed_meanwhile)}, failed {len(report.failed)}" + " " * 40
        )
        for key, reason in report.failed:
            print(f"  failed {key}: {reason}")
        return 1 if report.failed else 0

    return asyncio.run(run())


def cmd_reindex(args: argparse.Namespace) -> int:
    from govindex.adapters.opensearch import OpenSearchIndex
    from govindex.runtime.bootstrap import rebuild_projection

    settings = settings_for(args)

    async def run() -> int:
        assert settings.opensearch_url
        index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
        try:
            await index.ensure_template()
            async with pool_for(settings) as pool:
                generation = await rebuild_projection(settings, pool=pool, index=index)
            count = await index.count()
        finally:
            await index.close()
        print(
            f"rebuilt {settings.index_alias} as generation {generation}: {count} chunks. "
            "Running workers keep stamping the generation they started with until restarted."
        )
        return 0

    return asyncio.run(run())


def cmd_demo(args: argparse.Namespace) -> int:
    from govindex.devstack.demo.run import run_demo

    return run_demo()


def cmd_schemas(args: argparse.Namespace) -> int:
    from govindex.core.schemas import check_schemas, write_schemas

    if args.write:
        for path in write_schemas(args.dir):
            print(f"wrote {path}")
        return 0
    drift = check_schemas(args.dir)
    if drift:
        raise Failure(
            "schemas drifted from the models: "
            + ", ".join(drift)
            + "; run `govindex schemas --write` and commit the result"
        )
    print(f"schemas in {args.dir}/ match the models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
