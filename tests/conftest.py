"""Session-wide embedded stack (real servers from pip wheels) and per-test isolation.

Every test gets its own namespace (topics, index alias, consumer groups) and tenant, so tests
share the servers but never each other's data. A server that cannot start fails the run.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kafka import KafkaConsumer, TopicPartition
from opensearchpy import OpenSearch
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.kafka import KafkaEventPublisher
from govindex.adapters.postgres.ingest_state import PostgresIngestState
from govindex.adapters.postgres.pool import migrate, open_pool
from govindex.adapters.postgres.store import PostgresPurgeStore, PostgresSourceRegistry
from govindex.core import events
from govindex.core.envelope import KafkaRecord, encode
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.logs import configure_logging
from govindex.core.records import SourceManifest
from govindex.core.settings import Settings
from govindex.devstack.embedded import EmbeddedStack
from govindex.runtime.bootstrap import prepare
from govindex.runtime.workers import Workers

configure_logging(level="WARNING", json_output=False)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    embedded = EmbeddedStack(tmp_path_factory.mktemp("stack"))
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
async def pool(settings: Settings) -> AsyncIterator[AsyncConnectionPool]:
    assert settings.pg_dsn
    p = open_pool(settings.pg_dsn, max_size=4)
    await p.open(wait=True)
    yield p
    await p.close()


def manifest(source_id: str, tenant: str, **overrides: Any) -> SourceManifest:
    fields: dict[str, Any] = {
        "source_id": source_id,
        "tenant": tenant,
        "source_type": "git",
        "owner_team": "platform",
        "classification": "internal",
        "default_acl": ["group:eng"],
        "allowed_purposes": ["support"],
        "trust_level": "authoritative",
    }
    fields.update(overrides)
    return SourceManifest.model_validate(fields)


class Pipeline:
    """Drives the real pipeline from a test: publish events, wait, read every sink."""

    def __init__(self, settings: Settings, pool: AsyncConnectionPool, tenant: str) -> None:
        self.settings = settings
        self.pool = pool
        self.tenant = tenant
        self.source = f"src-{tenant}"
        assert settings.kafka_bootstrap and settings.opensearch_url
        self.producer = KafkaEventPublisher(settings.kafka_bootstrap)
        self.search = OpenSearch(hosts=[settings.opensearch_url])
        self.workers: Workers | None = None
        self.sent: list[KafkaRecord] = []

    async def register(self, **overrides: Any) -> SourceManifest:
        m = manifest(overrides.pop("source_id", self.source), self.tenant, **overrides)
        await PostgresSourceRegistry(self.pool).register(m)
        return m

    async def start_workers(self) -> None:
        self.workers = Workers(self.settings)
        await self.workers.start()

    async def stop_workers(self) -> None:
        if self.workers is not None:
            await self.workers.stop()
            self.workers = None

    # --- events -------------------------------------------------------------------------

    def change(
        self,
        doc_id: str,
        sequence: int,
        text: str,
        *,
        source: str | None = None,
        observed_at: datetime | None = None,
        version: str | None = None,
        **payload: Any,
    ) -> KafkaRecord:
        body = DocumentChanged(
            tenant_id=self.tenant,
            source_id=source or self.source,
            doc_id=doc_id,
            source_version=version or f"v{sequence}",
            sequence=sequence,
            observed_at=observed_at or datetime.now(UTC),
            content_hash=sha256_hex(text),
            content=text,
            path=doc_id,
            **payload,
        )
        kind = events.DOCUMENT_CREATED if sequence == 1 else events.DOCUMENT_UPDATED
        return encode(
            event_type=kind,
            event_id=events.event_id(
                self.tenant, body.source_id, doc_id, body.source_version, f"{kind}:{sequence}"
            ),
            tenant_id=self.tenant,
            source_id=body.source_id,
            subject=doc_id,
            key=body.key,
            payload=body,
            extensions={"sequence": sequence},
        )

    def deletion(
        self, doc_id: str, sequence: int, *, deleted_at: datetime | None = None
    ) -> KafkaRecord:
        body = DocumentDeleted(
            tenant_id=self.tenant,
            source_id=self.source,
            doc_id=doc_id,
            source_version=f"del{sequence}",
            sequence=sequence,
            deleted_at=deleted_at or datetime.now(UTC),
        )
        return encode(
            event_type=events.DOCUMENT_DELETED,
            event_id=events.event_id(
                self.tenant, self.source, doc_id, body.source_version, "deleted"
            ),
            tenant_id=self.tenant,
            source_id=self.source,
            subject=doc_id,
            key=body.key,
            payload=body,
            extensions={"sequence": sequence},
        )

    def publish(self, *records: KafkaRecord) -> list[str]:
        for record in records:
            self.producer.publish(self.settings.topics.documents, record)
            self.sent.append(record)
        self.producer.flush()
        return [event_id_of(r) for r in records if "ce_id" in dict(r.headers)]

    # --- waiting ------------------------------------------------------------------------

    async def wait_processed(
        self, event_ids: list[str], consumer: str = "indexer", timeout: float = 60.0
    ) -> None:
        await until(
            lambda: self._count_processed(event_ids, consumer),
            lambda n: n == len(set(event_ids)),
            timeout,
            f"{consumer} to process {len(set(event_ids))} events",
        )

    async def _count_processed(self, event_ids: list[str], consumer: str) -> int:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM processed_events WHERE consumer = %s AND event_id = ANY(%s)",
                (consumer, list(set(event_ids))),
            )
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def wait_purged(
        self, doc_id: str, sequence: int, timeout: float = 60.0
    ) -> dict[str, Any]:
        purges = PostgresPurgeStore(self.pool)
        found = await until(
            lambda: purges.receipt(self.tenant, doc_id, sequence),
            lambda r: r is not None,
            timeout,
            f"purge of {doc_id}",
        )
        assert found is not None
        return found

    async def wait_caught_up(self, source_id: str, timeout: float = 60.0) -> None:
        """Until the indexer has applied every sequence the connector emitted for a source."""
        state = PostgresIngestState(self.pool)
        await until(
            lambda: state.behind(source_id),
            lambda n: n == 0,
            timeout,
            f"indexer to catch up with {source_id}",
        )

    async def active_documents(self, source_id: str) -> dict[str, str]:
        """doc_id -> content_hash of what the index holds as current for a source."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT doc_id, content_hash FROM documents WHERE source_id = %s "
                "AND state = 'active' ORDER BY doc_id",
                (source_id,),
            )
            return {row[0]: row[1] for row in await cur.fetchall()}

    # --- sinks --------------------------------------------------------------------------

    async def pg_chunks(self, doc_id: str | None = None) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT chunk_id, doc_id, sequence, version_sequence, text, acl, valid_from, "
                "valid_to, superseded_at, source_version FROM chunks WHERE tenant_id = %s "
                "AND (%s::text IS NULL OR doc_id = %s) ORDER BY chunk_id",
                (self.tenant, doc_id, doc_id),
            )
            names = [d.name for d in cur.description or []]
            return [dict(zip(names, row, strict=True)) for row in await cur.fetchall()]

    def os_chunks(self, doc_id: str | None = None) -> list[dict[str, Any]]:
        self.search.indices.refresh(index=f"{self.settings.index_alias}-g*")
        filters: list[dict[str, Any]] = [{"term": {"tenant_id": self.tenant}}]
        if doc_id:
            filters.append({"term": {"doc_id": doc_id}})
        result = self.search.search(
            index=f"{self.settings.index_alias}-g*",
            body={"size": 1000, "version": True, "query": {"bool": {"filter": filters}}},
        )
        return sorted(
            ({"_version": h["_version"], **h["_source"]} for h in result["hits"]["hits"]),
            key=lambda d: d["chunk_id"],
        )

    async def assert_sinks_agree(self, doc_id: str | None = None) -> None:
        """OpenSearch holds exactly Postgres's chunks, at the same sequence and stamps."""
        pg = await self.pg_chunks(doc_id)
        os_docs = self.os_chunks(doc_id)
        assert [c["chunk_id"] for c in pg] == [d["chunk_id"] for d in os_docs]
        for row, doc in zip(pg, os_docs, strict=True):
            assert doc["_version"] == row["sequence"] == doc["sequence"]
            assert doc["text"] == row["text"]
            assert doc["acl"] == list(row["acl"])
            assert _ts(doc["valid_to"]) == row["valid_to"]
            assert _ts(doc["superseded_at"]) == row["superseded_at"]

    def dead_letters(self) -> list[Any]:
        assert self.settings.kafka_bootstrap
        return read_topic(self.settings.kafka_bootstrap, self.settings.topics.dead_letters)

    def close(self) -> None:
        self.producer.close()
        self.search.close()


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def event_id_of(record: KafkaRecord) -> str:
    return dict(record.headers)["ce_id"].decode()


def read_topic(bootstrap: str, topic: str, timeout_ms: int = 3000) -> list[Any]:
    """Every record of a topic, read with manual assignment (no group join)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in parts]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records: list[Any] = []
        deadline = time.monotonic() + timeout_ms / 1000
        while time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=300)
            if not batch and records:
                break
            for recs in batch.values():
                records.extend(recs)
        return records
    finally:
        consumer.close()


def git(repo: Path, *args: str, when: str | None = None) -> str:
    """Run git in `repo` with a fixed identity (and commit time, when given)."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    if when:
        env |= {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


async def until(probe: Any, done: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = await probe()
        if done(value):
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")


@pytest.fixture
async def pipeline(settings: Settings, pool: AsyncConnectionPool) -> AsyncIterator[Pipeline]:
    """Prepared namespace, registered source, running workers."""
    await prepare(settings)
    p = Pipeline(settings, pool, tenant=f"tenant-{uuid.uuid4().hex[:8]}")
    await p.register()
    await p.start_workers()
    yield p
    await p.stop_workers()
    p.close()
