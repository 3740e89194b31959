"""Drive the real pipeline from a test: publish events, wait on real state, read every sink."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from govindex.adapters.kafka import KafkaEventPublisher, OffsetReader, TopicScanner
from govindex.control.workers import Workers
from govindex.core import events
from govindex.core.envelope import KafkaRecord, TopicRecord, encode_document_event
from govindex.core.errors import TransientError
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.records import SourceManifest
from govindex.runtime.composition import Runtime
from reader.app import read_service
from reader.models import SearchRequest, Subject
from tests.support.builders import manifest

V1 = "# Runbook\nRestart the api with the blue lever.\n## Rollback\nPull the red lever.\n"
V2 = "# Runbook\nRestart the api with the green switch.\n## Rollback\nFlip it back.\n"


class Pipeline:
    """Drives the real pipeline from a test: publish events, wait, read every sink."""

    def __init__(self, rt: Runtime, tenant: str) -> None:
        self.rt = rt
        self.settings = rt.settings
        self.pool = rt.pool  # tests read Postgres directly to check what the sinks hold
        self.tenant = tenant
        self.source = f"src-{tenant}"
        # The test plays an outside producer: a plain synchronous client is what one uses.
        self.producer = KafkaEventPublisher(rt.servers.kafka_bootstrap)
        self.search = OpenSearch(hosts=[rt.servers.opensearch_url])
        self.workers: Workers | None = None
        self.sent: list[KafkaRecord] = []

    async def register(self, **overrides: Any) -> SourceManifest:
        m = manifest(overrides.pop("source_id", self.source), self.tenant, **overrides)
        await self.rt.registry.register(m)
        return m

    async def start_workers(self) -> None:
        self.workers = Workers(self.rt)
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
        return encode_document_event(kind, body, op=f"{kind}:{sequence}")

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
        return encode_document_event(events.DOCUMENT_DELETED, body, op="deleted")

    def publish(self, *records: KafkaRecord, topic: str | None = None) -> list[str]:
        """On the documents topic, unless told (the deletion lane's topic, say)."""
        for record in records:
            self.producer.publish(topic or self.settings.topics.documents, record)
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
        if consumer == "indexer" and self.workers is not None:
            await self.wait_committed(timeout)

    async def wait_committed(self, timeout: float = 60.0) -> None:
        """Postgres commits before a batch is projected; a lane commits its offsets after
        OpenSearch holds the batch: once both lanes are at the end, both sinks can be read."""
        await until(self._indexer_lag, lambda n: n == 0, timeout, "indexer offsets")

    async def _indexer_lag(self) -> int:
        topics = self.settings.topics
        reader = OffsetReader(self.rt.servers.kafka_bootstrap)
        try:
            lag = reader.lag(topics.documents, self.settings.group("indexer"))
            lag += reader.lag(topics.deletions, self.settings.group("indexer-deletions"))
        finally:
            reader.close()
        return sum(max(p.lag, 0) for p in lag)

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
        found = await until(
            lambda: self.rt.purges.receipt(self.tenant, doc_id, sequence),
            lambda r: r is not None,
            timeout,
            f"purge of {doc_id}",
        )
        assert found is not None
        return found

    async def wait_caught_up(self, source_id: str, timeout: float = 60.0) -> None:
        """Until the indexer has applied every sequence the connector emitted for a source."""
        await until(
            lambda: self.rt.ingest_state.behind(source_id),
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
                "SELECT chunk_id, doc_id, sequence, version_sequence, version_id, text, acl, "
                "valid_from, valid_to, superseded_at, source_version FROM chunks WHERE "
                "tenant_id = %s "
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

    def dead_letters(self) -> list[TopicRecord]:
        assert self.settings.kafka_bootstrap
        return read_topic(self.settings.kafka_bootstrap, self.settings.topics.dead_letters)

    def close(self) -> None:
        self.producer.close()
        self.search.close()


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def event_id_of(record: KafkaRecord) -> str:
    return dict(record.headers)["ce_id"].decode()


def read_topic(bootstrap: str, topic: str) -> list[TopicRecord]:
    """Every record of a topic (none: the topic does not exist), partition after partition,
    read with manual assignment (no group join) up to the end the broker holds now."""
    with TopicScanner(bootstrap) as scanner:
        try:
            first, end = scanner.bounds(topic)
        except TransientError as exc:
            if "does not exist" in str(exc):
                return []
            raise
        return list(scanner.read(topic, first, end))


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


async def query(
    p: Pipeline,
    text: str,
    principals: tuple[str, ...] = ("group:eng",),
    as_of: datetime | None = None,
    purpose: str | None = None,
) -> list[str]:
    """The governed read path's answer, as chunk texts (after a refresh). Every test
    manifest allows the `support` purpose, the default here."""
    await p.rt.index.refresh()
    request = SearchRequest(
        tenant=p.tenant,
        subject=Subject(principals=list(principals)),
        purpose=purpose or "support",
        as_of=as_of or datetime.now(UTC),
        query=text,
        limit=20,
        cache="bypass",
    )
    response = await read_service(p.rt).search(request)
    return [h.text for h in response.hits]
