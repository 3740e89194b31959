"""The session's embedded stack (real servers from pip wheels) and per-test isolation.

Every test gets its own namespace (topics, index alias, consumer groups), database and
tenant, so tests share the servers but never each other's data. A server that cannot start
fails the run.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.pool import migrate
from govindex.control.bootstrap import prepare
from govindex.control.workers import Workers
from govindex.core.logs import configure_logging
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.composition import Runtime
from tests.support.pipeline import Pipeline

configure_logging(level="WARNING", json_output=False)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    embedded = EmbeddedStack(tmp_path_factory.mktemp("stack"), durable=False)  # fast mode
    addresses = embedded.start()
    yield addresses
    embedded.stop()


@pytest.fixture
def namespace() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def migrated(stack: dict[str, str], namespace: str) -> dict[str, str]:
    """A database of the test's own (one deployment's system of record), migrated."""
    async with await psycopg.AsyncConnection.connect(stack["pg_dsn"], autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {namespace}")
    dsn = stack["pg_dsn"].rsplit("/", 1)[0] + f"/{namespace}"
    await migrate(dsn)
    return {**stack, "pg_dsn": dsn}


@pytest.fixture
def settings(migrated: dict[str, str], namespace: str, tmp_path: Path) -> Settings:
    return Settings(
        pg_dsn=migrated["pg_dsn"],
        kafka_bootstrap=migrated["kafka_bootstrap"],
        opensearch_url=migrated["opensearch_url"],
        redis_url=migrated["redis_url"],
        namespace=namespace,
        state_dir=tmp_path,
        partitions=2,
    )


@pytest.fixture
async def runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """The composition root on the test's namespace: every port a test needs."""
    async with Runtime(settings, pool_size=6) as rt:
        yield rt


@pytest.fixture
def pool(runtime: Runtime) -> AsyncConnectionPool:
    return runtime.pool


@asynccontextmanager
async def _own_pipeline(
    settings: Settings, runtime: Runtime, *, workers: bool = True
) -> AsyncIterator[Pipeline]:
    await prepare(settings)
    p = Pipeline(runtime, tenant=f"tenant-{uuid.uuid4().hex[:8]}")
    await p.register()
    if workers:
        await p.start_workers()
    try:
        yield p
    finally:
        await p.stop_workers()
        p.close()


@pytest.fixture
async def pipeline(settings: Settings, runtime: Runtime) -> AsyncIterator[Pipeline]:
    """Prepared namespace, registered source, running workers."""
    async with _own_pipeline(settings, runtime) as p:
        yield p


@pytest.fixture
async def isolated_pipeline(settings: Settings, runtime: Runtime) -> AsyncIterator[Pipeline]:
    """The same, under a name a module that shares a pipeline (below) cannot shadow: for a
    test that stops or reconfigures its workers."""
    async with _own_pipeline(settings, runtime) as p:
        yield p


@pytest.fixture
async def idle_pipeline(settings: Settings, runtime: Runtime) -> AsyncIterator[Pipeline]:
    """Prepared namespace and registered source, no workers yet: for a test that loads the
    topics first, or runs workers of its own (a consumer group that a member just left is
    slow to rejoin on the embedded broker; a fresh one is not)."""
    async with _own_pipeline(settings, runtime, workers=False) as p:
        yield p


@pytest.fixture(scope="module")
async def module_runtime(
    stack: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Runtime, Workers]]:
    """One namespace, database, Runtime and set of running workers for a whole module whose
    tests keep apart by tenant (see `shared_pipeline`): the servers' set-up is paid once."""
    namespace = f"t{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(stack["pg_dsn"], autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {namespace}")
    dsn = stack["pg_dsn"].rsplit("/", 1)[0] + f"/{namespace}"
    await migrate(dsn)
    settings = Settings(
        pg_dsn=dsn,
        kafka_bootstrap=stack["kafka_bootstrap"],
        opensearch_url=stack["opensearch_url"],
        redis_url=stack["redis_url"],
        namespace=namespace,
        state_dir=tmp_path_factory.mktemp("module"),
        partitions=2,
    )
    await prepare(settings)
    async with Runtime(settings, pool_size=8) as rt:
        workers = Workers(rt)
        await workers.start()
        yield rt, workers
        await workers.stop()


@pytest.fixture
async def shared_pipeline(
    module_runtime: tuple[Runtime, Workers],
) -> AsyncIterator[Pipeline]:
    """A Pipeline of its own tenant and source on the module's running workers."""
    rt, workers = module_runtime
    p = Pipeline(rt, tenant=f"tenant-{uuid.uuid4().hex[:8]}")
    await p.register()
    p.workers = workers
    yield p
    p.workers = None  # the module's workers outlive the test
    p.close()
