"""Commands that run things: `up`, `worker`, `bootstrap`, `demo`."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from typing import TYPE_CHECKING, Annotated, Protocol

import typer

from govindex.cli.common import (
    DEFAULT_DIR,
    GETTING_STARTED,
    OPERATIONS,
    Failure,
    LogLevel,
    StateDir,
    console,
    plain,
    setup,
)

if TYPE_CHECKING:  # imported where they run: `govindex --help` loads no driver
    from govindex.control.health import HealthServer
    from govindex.control.workers import Workers
    from govindex.core.settings import Settings
    from govindex.devstack.embedded import EmbeddedStack
    from govindex.runtime.composition import Runtime

app = typer.Typer()

LISTENERS = ("webhooks", "reader", "admin")


@app.command(rich_help_panel=GETTING_STARTED)
def up(
    workers: Annotated[
        str, typer.Option(metavar="NAMES", help="Comma-separated workers to run.")
    ] = "indexer,purger,cdc",
    reconcile: Annotated[
        bool,
        typer.Option(
            help="At start, compare every git and folder source with the index and emit the "
            "difference (anti-entropy after a crash)."
        ),
    ] = True,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "INFO",
) -> int:
    """Start the embedded stack and the workers until Ctrl-C.

    Starts PostgreSQL, a Kafka-compatible broker, an OpenSearch-compatible server and Redis
    on loopback with free ports (or uses the servers named by GOVINDEX_* settings), creates
    topics, migrates the database, creates the index template and alias, rebuilds the
    OpenSearch projection from Postgres if it is empty, then runs the indexer, the purger,
    the CDC connector, the outbox relay, the webhook receiver (public listener) and the read
    API (internal listener, bearer tokens) until Ctrl-C. Addresses go to STATE_DIR/stack.json,
    which every other command reads; without GOVINDEX_READ_TOKENS a token for every tenant
    is generated and written there too (the file is readable by its owner only).

        govindex up
        govindex up --workers indexer,purger --no-reconcile
    """
    from govindex.core.settings import read_stack_file
    from govindex.devstack.embedded import EmbeddedStack

    settings = setup(state_dir, log_level, servers=False)
    names = _names(workers.split(","))
    stack: EmbeddedStack | None = None
    if not settings.servers_configured:
        existing = read_stack_file(state_dir)
        if existing and _alive(int(existing.get("pid", 0))):
            raise Failure(
                f"a stack is already running from {state_dir} (pid {existing['pid']}); "
                "stop it with Ctrl-C in its terminal, or use another --state-dir"
            )
        stack = EmbeddedStack(state_dir, namespace=settings.namespace)
        console.print(f"govindex: starting the embedded stack in {state_dir}/ ...")
        settings = settings.model_copy(update=stack.start())
        stack.supervise()  # a server that dies is started again, same address and password
    try:
        return asyncio.run(_serve(settings, names, stack, reconcile=reconcile))
    finally:
        if stack is not None:
            stack.stop()
            console.print("govindex: stack stopped")


@app.command(rich_help_panel=OPERATIONS)
def worker(
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[WORKER]...",
            click_type=plain("WORKER"),
            help="Any of indexer, purger, cdc, webhooks, reader, admin, or one of the "
            "indexer's two lanes alone (documents, deletions); or `pause KIND` / "
            "`resume KIND` (indexer, purger, cdc) to stop or restart that kind's consumers "
            "in every running process.",
            show_default=False,
        ),
    ] = None,
    webhook_host: Annotated[
        str, typer.Option(metavar="HOST", help="Address the webhook receiver listens on.")
    ] = "0.0.0.0",  # noqa: S104 - a server's job
    webhook_port: Annotated[
        int, typer.Option(metavar="PORT", help="Port of the webhook receiver.")
    ] = 8080,
    reconcile: Annotated[
        bool,
        typer.Option(help="At start, reconcile every git and folder source with the index."),
    ] = False,
    state_dir: StateDir = DEFAULT_DIR,
    log_level: LogLevel = "INFO",
) -> int:
    """Run workers against configured servers (production entry point).

    Runs the named workers (default: indexer purger), each process with an outbox relay,
    against the servers named by GOVINDEX_* settings until SIGTERM. Run `govindex bootstrap`
    first. Scale by running more replicas, up to the partition count of their topic.
    `webhooks` is the public listener (signed webhooks only); `reader` is the read API on
    GOVINDEX_READ_HOST:GOVINDEX_READ_PORT, which refuses to start without
    GOVINDEX_READ_TOKENS. `admin` is the jobs API on GOVINDEX_ADMIN_HOST:GOVINDEX_ADMIN_PORT,
    behind GOVINDEX_ADMIN_TOKEN (it refuses to start without one). Keep both on an internal
    network.

    `indexer` runs the documents lanes and the deletion lane; `documents` or `deletions`
    runs one of them. Run `deletions` in a process of its own where updates keep the
    indexer busy: a tombstone then never waits for the documents lanes' turn on the
    interpreter, and deletions are hidden within half a second under load.

    `govindex worker pause indexer` sets a flag every worker process obeys within
    GOVINDEX_CONTROL_POLL_S: its indexer consumers finish their batches, commit and leave
    their groups (so `govindex offsets reset` may move them); it returns once every live
    process reports it. `govindex worker resume indexer` starts them again.

        govindex worker indexer purger
        govindex worker documents purger      # and, in another process:
        govindex worker deletions
        govindex worker webhooks reader admin
        govindex worker pause indexer
    """
    settings = setup(state_dir, log_level)
    if names and names[0] in ("pause", "resume"):
        from govindex.cli.offsets import pause_or_resume

        return pause_or_resume(names[0], names[1:], settings)
    chosen = _names(names or ["indexer", "purger"])
    port = webhook_port if "webhooks" in chosen else None
    consumers = tuple(n for n in chosen if n not in LISTENERS)
    if "reader" in chosen and not settings.read_tokens and not settings.read_jwks:
        raise Failure(
            "the read API needs credentials: set GOVINDEX_READ_TOKENS (bound service "
            'tokens, e.g. \'{"<long random token>": {"name": "rag-app", "tenants": ["acme"], '
            '"principals": ["user:*"], "purposes": ["support"]}}\') and/or GOVINDEX_READ_JWKS '
            "with GOVINDEX_READ_JWT_ISSUER and GOVINDEX_READ_JWT_AUDIENCE (verified JWTs)"
        )
    return asyncio.run(
        _serve(
            settings,
            consumers,
            None,
            bootstrap=False,
            webhook_port=port,
            webhook_host=webhook_host,
            reconcile=reconcile,
            read_api="reader" in chosen,
            admin_api="admin" in chosen,
        )
    )


@app.command(rich_help_panel=OPERATIONS)
def bootstrap(state_dir: StateDir = DEFAULT_DIR, log_level: LogLevel = "WARNING") -> int:
    """Prepare configured servers, then exit.

    Creates topics, migrates the database, creates the index template and alias, and
    rebuilds the projection if the index is empty. Idempotent; run it once per deploy
    (a Kubernetes Job, a compose one-shot) before starting workers.

        GOVINDEX_PG_DSN=postgresql://govindex@db/govindex govindex bootstrap
    """
    from govindex.control.bootstrap import prepare

    settings = setup(state_dir, log_level)
    generation = asyncio.run(prepare(settings))
    console.print(
        f"ready: topics {', '.join(settings.topics.all())}; database migrated; "
        f"alias {settings.index_alias} -> generation {generation}"
    )
    return 0


@app.command(rich_help_panel=GETTING_STARTED)
def demo() -> int:
    """Run the bundled demo on a fresh embedded stack.

    Starts an embedded stack in a temporary state dir and ingests a bundled handbook in
    two commits: governed queries, a pack, a deletion and its purge. Then an incident case
    (a service catalog, deployments and ownership tables, three runbook versions, an
    untrusted e-mail): the deployments before the incident, the owner then and now, the
    runbook valid then, and a pack with its evidence. Leaves nothing running.

        govindex demo
    """
    from govindex.devstack.demo.run import run_demo

    return run_demo()


def _names(values: list[str]) -> tuple[str, ...]:
    from govindex.control.workers import INDEXER_PARTS, WORKERS

    served = (*WORKERS, *INDEXER_PARTS, *LISTENERS)
    names = tuple(v.strip() for v in values if v.strip())
    unknown = set(names) - set(served)
    if unknown:
        raise Failure(f"unknown worker(s) {', '.join(sorted(unknown))}; use {', '.join(served)}")
    return names


class _Server(Protocol):
    async def stop(self) -> None: ...


async def _serve(
    settings: Settings,
    workers: tuple[str, ...],
    stack: EmbeddedStack | None,
    *,
    bootstrap: bool = True,
    webhook_port: int | None = None,
    webhook_host: str = "127.0.0.1",
    reconcile: bool = False,
    read_api: bool = False,
    admin_api: bool = False,
) -> int:
    """Run the workers and listeners until SIGINT/SIGTERM. With `stack` (a laptop) every
    listener runs on loopback with a free port and generated tokens, written to stack.json."""
    from govindex.control.bootstrap import prepare
    from govindex.control.workers import Workers
    from govindex.runtime.composition import Runtime
    from ingest.app import reconcile_sources

    if bootstrap:
        await prepare(settings)
    laptop = stack is not None
    async with Runtime(settings) as rt:
        running = Workers(
            rt, run=tuple(w for w in workers if w not in LISTENERS), metrics=True, heal=True
        )
        # The health port first: a port that is taken fails the process before any worker
        # runs. Past it, whatever fails stops the workers before the runtime closes, so a
        # process never lingers with its lanes running on a closed pool.
        health = await _serve_health(rt, running, settings, laptop)
        servers: list[_Server] = []
        try:
            generation = await running.start()
            metrics_url = health.url
            extra: dict[str, str] = {}
            if laptop or webhook_port is not None or "webhooks" in workers:
                from ingest.app import WebhookServer

                webhooks = WebhookServer(rt, host=webhook_host, port=webhook_port or 0)
                settings = settings.model_copy(update={"http_url": await webhooks.start()})
                servers.append(webhooks)
                extra["webhooks"] = f"{settings.http_url}/webhooks/github, /webhooks/gitlab"
            if laptop or read_api:
                servers.append(await _start_read_api(rt, settings, laptop, extra))
            if laptop or admin_api:
                servers.append(await _start_admin_api(rt, settings, laptop, extra))
            if stack is not None:
                stack.write_stack_file(
                    {"generation": generation, "http_url": settings.http_url}
                    | {"metrics_url": metrics_url}
                    | {k: v for k, v in extra.items() if k != "webhooks"}
                )
            console.print(
                _ready(settings, workers, generation, metrics_url, extra, stack), soft_wrap=True
            )
            if reconcile:
                for source_id, result in (await reconcile_sources(rt)).items():
                    console.print(f"govindex: reconciled {source_id}: {result}", soft_wrap=True)
            await _until_stopped()
            console.print("govindex: stopping ...")
        finally:
            for server in servers:
                await server.stop()
            await running.stop()
            await health.stop()
    return 0


async def _serve_health(
    rt: Runtime, running: Workers, settings: Settings, laptop: bool
) -> HealthServer:
    """/metrics, /livez and /readyz: a laptop's on loopback with any free port, else on
    the configured one."""
    from govindex.control.health import HealthServer

    host, port = ("127.0.0.1", 0) if laptop else (settings.metrics_host, settings.metrics_port)
    health = HealthServer(rt, running, host, port)
    try:
        health.url = await health.start()
    except OSError as exc:
        raise Failure(
            f"cannot serve /metrics on {host}:{port}: {exc}; set GOVINDEX_METRICS_PORT to a "
            "free port (0: any)"
        ) from None
    return health


async def _start_read_api(
    rt: Runtime, settings: Settings, laptop: bool, extra: dict[str, str]
) -> _Server:
    """The read API, with the service tokens of GOVINDEX_READ_TOKENS and the JWTs of
    GOVINDEX_READ_JWKS. A laptop with neither gets one token for every tenant that binds
    tenants only (any principal and purpose), in stack.json (owner-only), which says so."""
    from reader.app import ReadServer, jwt_config
    from reader.credentials import JwksUnavailable

    tokens: dict[str, object] = dict(settings.read_tokens)
    try:
        jwt = jwt_config(settings)
        if not tokens and jwt is None and laptop:
            token = secrets.token_urlsafe(24)
            tokens = {token: ["*"]}
            binds = (
                "tenants only: any principal and purpose (a laptop token; use bound tokens or "
                "JWTs in production)"
            )
            extra["read_token"], extra["read_token_binds"] = token, binds
        reads = ReadServer(
            rt, tokens, host=settings.read_host, port=0 if laptop else settings.read_port, jwt=jwt
        )
        extra["read_url"] = await reads.start()
    except (ValueError, JwksUnavailable) as exc:
        raise Failure(f"the read API cannot start: {exc}") from None
    except OSError as exc:
        raise Failure(
            f"cannot serve the read API on {settings.read_host}:{settings.read_port}: {exc}; "
            "set GOVINDEX_READ_PORT to a free port"
        ) from None
    return reads


async def _start_admin_api(
    rt: Runtime, settings: Settings, laptop: bool, extra: dict[str, str]
) -> _Server:
    """The admin API; a laptop without GOVINDEX_ADMIN_TOKEN gets its own, in stack.json."""
    from govindex.control.admin import AdminServer

    admin_token = settings.admin_token
    if not admin_token and laptop:
        admin_token = secrets.token_urlsafe(24)
        extra["admin_token"] = admin_token
    try:
        admin = AdminServer(
            rt, admin_token, settings.admin_host, 0 if laptop else settings.admin_port
        )
        extra["admin_url"] = await admin.start()
    except (ValueError, OSError) as exc:
        raise Failure(f"cannot serve the admin API: {exc}") from None
    return admin


def _ready(
    settings: Settings,
    workers: tuple[str, ...],
    generation: int,
    metrics_url: str,
    extra: dict[str, str],
    stack: EmbeddedStack | None,
) -> str:
    """What `govindex up` / `worker` prints once everything serves (passwords redacted)."""
    from govindex.core.settings import redact

    unauthenticated = (
        "  (the embedded broker and OpenSearch-compatible server take no credentials: "
        "any local user can reach them; PostgreSQL and Redis ask for the passwords in "
        f"{stack.state_dir}/stack.json)\n"
        if stack is not None
        else ""
    )
    return (
        "govindex: ready\n"
        f"  postgres    {redact(settings.pg_dsn or '')}\n"
        f"  kafka       {settings.kafka_bootstrap}\n"
        f"  opensearch  {redact(settings.opensearch_url or '')}  (alias "
        f"{settings.index_alias}, generation {generation})\n"
        f"  redis       {redact(settings.redis_url or '') or 'not configured'}\n"
        f"  workers     {', '.join(workers)}\n"
        f"  webhooks    {extra.get('webhooks') or 'not served'}\n"
        f"  read api    {extra.get('read_url') or 'not served'}\n"
        f"  admin api   {extra.get('admin_url') or 'not served'}\n"
        f"  metrics     {metrics_url}\n"
        f"{unauthenticated}"
        "Press Ctrl-C to stop."
    )


async def _until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


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
