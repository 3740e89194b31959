"""The session's embedded stack (real servers from pip wheels) and per-test isolation.

Every test gets its own namespace (topics, index alias, consumer groups), database and
tenant, so tests share the servers but never each other's data. A server that cannot start
fails the run.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.pool import migrate
from govindex.core.logs import configure_logging
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.bootstrap import prepare
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


@pytest.fixture
async def pipeline(settings: Settings, runtime: Runtime) -> AsyncIterator[Pipeline]:
    """Prepared namespace, registered source, running workers."""
    await prepare(settings)
    p = Pipeline(runtime, tenant=f"tenant-{uuid.uuid4().hex[:8]}")
    await p.register()
    await p.start_workers()
    yield p
    await p.stop_workers()
    p.close()
