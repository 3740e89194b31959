"""Every port's contract suite, run against its real adapter on the embedded servers."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from govindex.adapters.kafka import ensure_topics
from govindex.control.bootstrap import prepare
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from tests.support.contracts import (
    BlobStoreContract,
    ChunkStoreContract,
    ConnectorStateContract,
    DeliveriesContract,
    EventPublisherContract,
    LineageContract,
    PurgeStoreContract,
    SearchIndexContract,
    SourceRegistryContract,
    TaggedCacheContract,
)
from tests.support.pipeline import read_topic

pytestmark = pytest.mark.integration


def bound(contract: type, fixture: str, make: Callable[[Runtime, Settings], Any]) -> type:
    """The contract run against what `make` builds from the test's Runtime."""

    @pytest.fixture(name=fixture)
    async def adapter(self: Any, runtime: Runtime, settings: Settings) -> Any:
        made = make(runtime, settings)
        return await made if inspect.isawaitable(made) else made

    return type(f"Bound{contract.__name__}", (contract,), {"adapter": adapter})


def _cache(rt: Runtime, _: Settings) -> Any:
    assert rt.cache is not None, "the embedded stack always runs Redis"
    return rt.cache


async def _publishing(rt: Runtime, settings: Settings) -> Any:
    topic = f"{settings.namespace}.contract"
    ensure_topics(rt.servers.kafka_bootstrap, [topic], partitions=1)
    return await rt.publisher(), topic, lambda: read_topic(rt.servers.kafka_bootstrap, topic)


async def _index(rt: Runtime, settings: Settings) -> Any:
    await prepare(settings)  # the template and a live generation behind the alias
    return rt.index


TestPostgresSourceRegistry = bound(SourceRegistryContract, "registry", lambda rt, _: rt.registry)
TestPostgresChunkStore = bound(ChunkStoreContract, "store", lambda rt, _: rt.chunks)
TestPostgresBlobStore = bound(BlobStoreContract, "blobs", lambda rt, _: (rt.ingest_state, rt.blobs))
TestPostgresPurgeStore = bound(PurgeStoreContract, "stores", lambda rt, _: (rt.chunks, rt.purges))
TestPostgresLineage = bound(LineageContract, "lineage", lambda rt, _: rt.lineage)
TestPostgresIngestState = bound(ConnectorStateContract, "state", lambda rt, _: rt.ingest_state)
TestPostgresDeliveries = bound(DeliveriesContract, "deliveries", lambda rt, _: rt.deliveries)
TestRedisTaggedCache = bound(TaggedCacheContract, "cache", _cache)
TestAsyncKafkaPublisher = bound(EventPublisherContract, "publishing", _publishing)
TestOpenSearchIndex = bound(SearchIndexContract, "index", _index)


@pytest.fixture
async def elsewhere(settings: Settings) -> AsyncIterator[Runtime]:
    """A Runtime whose sessions keep another time than the server's own (UTC): a managed
    server may be set to any TimeZone."""
    dsn = settings.pg_dsn or ""
    dsn += ("&" if "?" in dsn else "?") + "options=-c%20TimeZone%3DAsia%2FKolkata"
    async with Runtime(settings.model_copy(update={"pg_dsn": dsn}), pool_size=2) as rt:
        async with rt.pool.connection() as conn:
            cur = await conn.execute("SHOW TimeZone")
            assert await cur.fetchone() == ("Asia/Kolkata",), "the session keeps its own time"
        yield rt


class TestPostgresChunkStoreInAnotherTimeZone(ChunkStoreContract):
    """The chunk store's contract from sessions in +05:30: times read back in UTC, as the
    indexer stamps them (a first version is sent to OpenSearch as written)."""

    @pytest.fixture(name="store")
    def adapter(self, elsewhere: Runtime) -> Any:
        return elsewhere.chunks
