"""OpenSearch adapter: the chunk projection, one index generation at a time behind an alias.

Writes use external versioning by sequence (DESIGN §5.1): an older write than the one the
index holds is a 409, which here means "already newer" and is not an error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from opensearchpy import AsyncOpenSearch
from opensearchpy import exceptions as os_exc

from govindex.core import metrics
from govindex.core.errors import PermanentError, TransientError
from govindex.core.ports import BulkResult, PurgeTarget
from govindex.core.records import Chunk

log = structlog.get_logger(__name__)

_KEYWORD = {"type": "keyword"}
_DATE = {"type": "date"}


def _stored(kind: str) -> dict[str, Any]:
    """A field kept in `_source` (every stamp travels with its chunk) but not indexed:
    nothing queries it in OpenSearch (readers hydrate from Postgres), and each indexed
    field costs every bulk write (on the embedded server, 2.5x the bulk rate)."""
    if kind == "text":
        return {"type": "text", "index": False}
    return {"type": kind, "index": False, "doc_values": False}


MAPPING: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        # Indexed: what reads, purges, sweeps and operators filter or match on.
        "chunk_id": _KEYWORD,
        "version_id": _KEYWORD,
        "tenant_id": _KEYWORD,
        "source_id": _KEYWORD,
        "doc_id": _KEYWORD,
        "sequence": {"type": "long"},
        "version_sequence": {"type": "long"},
        "content_hash": _KEYWORD,
        "text": {"type": "text"},
        "valid_from": _DATE,
        "valid_to": _DATE,
        "superseded_at": _DATE,
        "acl": _KEYWORD,
        "required_scopes": _KEYWORD,
        "allowed_purposes": _KEYWORD,
        "classification": _KEYWORD,
        "heading_path": {"type": "text", "fields": {"raw": _KEYWORD}},
        "labels": _KEYWORD,
        "kind": _KEYWORD,
        "trust_level": _KEYWORD,
        "index_generation": {"type": "integer"},
        # Stored only.
        "source_version": _stored("keyword"),
        "recorded_at": _stored("date"),
        "observed_at": _stored("date"),
        "indexed_at": _stored("date"),
        "parser": _stored("keyword"),
        "parser_version": _stored("keyword"),
        "locator": _stored("keyword"),
        "char_start": _stored("integer"),
        "char_end": _stored("integer"),
        "line_start": _stored("integer"),
        "line_end": _stored("integer"),
        "context": _stored("text"),
        "parent_id": _stored("keyword"),
        "prev_id": _stored("keyword"),
        "next_id": _stored("keyword"),
        "ordinal": _stored("integer"),
        "contains_instructions": _stored("boolean"),
        "token_estimate": _stored("integer"),
        "simhash": _stored("long"),
    },
}


def _translate(exc: Exception, what: str) -> Exception:
    if isinstance(exc, os_exc.ConnectionError | os_exc.ConnectionTimeout):
        return TransientError(f"OpenSearch is unreachable during {what}: {exc}")
    if isinstance(exc, os_exc.TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        if status == 429 or status >= 500:
            return TransientError(f"OpenSearch is busy during {what} ({status}): {exc}")
        return PermanentError(f"OpenSearch refused {what} ({status}): {exc}")
    return exc


def _in_generation(chunks: Sequence[Chunk], generation: int) -> list[Chunk]:
    """The chunks as a given generation holds them (the generation is stamped on each)."""
    return [c.model_copy(update={"index_generation": generation}) for c in chunks]


@dataclass(frozen=True)
class BulkPolicy:
    """How big one bulk request may be and how many a process keeps in flight.

    A batch of 500 documents is thousands of chunks: sent as one request to a server that
    takes a few hundred a second, it outlives any sane timeout and is sent again whole.
    Requests of at most `max_chunks` chunks / `max_bytes` bytes, at most `concurrency`
    at a time per process (every lane shares them), each with `timeout_s` to answer.
    While a purge holds `OpenSearchIndex.first()`, no new request starts.
    """

    max_chunks: int = 1000
    max_bytes: int = 8 * 1024 * 1024
    concurrency: int = 2
    timeout_s: float = 120.0


class OpenSearchIndex:
    """The search projection of Postgres chunks; rebuildable at any time."""

    def __init__(
        self,
        url: str,
        alias: str,
        *,
        refresh_interval: str = "1s",
        bulk: BulkPolicy | None = None,
    ) -> None:
        self._client = AsyncOpenSearch(hosts=[url], timeout=30, max_retries=0)
        self.alias = alias
        self._refresh_interval = refresh_interval
        self._bulk = bulk or BulkPolicy()
        self._bulk_slots = asyncio.Semaphore(self._bulk.concurrency)
        self._purging = 0
        self._no_purge = asyncio.Event()
        self._no_purge.set()

    @asynccontextmanager
    async def first(self) -> AsyncIterator[None]:
        """Deletions before updates: while any purge of this process holds this, bulk
        writes wait before starting (those in flight finish), so the purge's delete,
        refresh and read-back do not queue behind a backlog of bulks on the server."""
        self._purging += 1
        self._no_purge.clear()
        try:
            yield
        finally:
            self._purging -= 1
            if self._purging == 0:
                self._no_purge.set()

    @property
    def pattern(self) -> str:
        """Every generation of this alias, live or not: what a purge must sweep."""
        return f"{self.alias}-g*"

    async def close(self) -> None:
        await self._client.close()

    async def ensure_template(self) -> None:
        body = {
            "index_patterns": [self.pattern],
            "template": {
                "settings": {
                    "number_of_shards": 1,
                    "number_of_replicas": 0,
                    "refresh_interval": self._refresh_interval,
                },
                "mappings": MAPPING,
            },
        }
        try:
            await self._client.indices.put_index_template(name=self.alias, body=body)
            # Generations created under an older template learn the fields they lack; a
            # field they have keeps its old parameters (they cannot change in place; a
            # reindex builds a generation with the current ones).
            for name in await self.generations():
                held = await self._client.indices.get_mapping(index=name)
                known = held.get(name, {}).get("mappings", {}).get("properties", {})
                missing = {k: v for k, v in MAPPING["properties"].items() if k not in known}
                if missing:
                    await self._client.indices.put_mapping(index=name, body={"properties": missing})
        except Exception as exc:
            raise _translate(exc, "template creation") from exc

    async def generations(self) -> list[str]:
        """Every index of this alias's generations, live or retired."""
        try:
            found = await self._client.indices.get(index=self.pattern)
        except os_exc.NotFoundError:
            return []
        except Exception as exc:
            raise _translate(exc, "generation lookup") from exc
        return sorted(found)

    async def live_generation(self) -> int | None:
        try:
            if not await self._client.indices.exists_alias(name=self.alias):
                return None
            found = await self._client.indices.get_alias(name=self.alias)
        except Exception as exc:
            raise _translate(exc, "alias lookup") from exc
        names = sorted(found)
        return int(names[-1].rsplit("-g", 1)[1]) if names else None

    def index_name(self, generation: int) -> str:
        return f"{self.alias}-g{generation:04d}"

    async def create_generation(self, generation: int) -> str:
        name = self.index_name(generation)
        try:
            if not await self._client.indices.exists(index=name):
                await self._client.indices.create(index=name)
        except Exception as exc:
            raise _translate(exc, "index creation") from exc
        return name

    async def restore_alias(self, generation: int) -> None:
        """After the server lost its indexes: the live generation's index and the alias back.

        A write sent to the alias while it was missing made an index of the alias's own name
        (with guessed mappings), which stops the alias being created: it goes, as what it
        holds is a copy of Postgres that the rebuild writes again.
        """
        try:
            if not await self._client.indices.exists_alias(name=self.alias) and (
                await self._client.indices.exists(index=self.alias)
            ):
                await self._client.indices.delete(index=self.alias)
        except Exception as exc:
            raise _translate(exc, "stray index removal") from exc
        await self.create_generation(generation)
        await self.point_alias(generation)

    async def point_alias(self, generation: int) -> None:
        """Atomically make `generation` the one the alias serves."""
        name = self.index_name(generation)
        actions: list[dict[str, Any]] = [{"add": {"index": name, "alias": self.alias}}]
        try:
            if await self._client.indices.exists_alias(name=self.alias):
                current = await self._client.indices.get_alias(name=self.alias)
                actions = [
                    {"remove": {"index": old, "alias": self.alias}}
                    for old in current
                    if old != name
                ] + actions
            await self._client.indices.update_aliases(body={"actions": actions})
        except Exception as exc:
            raise _translate(exc, "alias switch") from exc

    async def write_generation(
        self, chunks: Sequence[Chunk], generation: int, *, repair: bool = False
    ) -> int:
        """Index chunks into one generation (stamped with it), external version = sequence:
        a rebuild's copy. Returns how many it took (409: it held something as new). A
        `repair` also overwrites the same version (a chunk deleted by mistake leaves its
        version behind; one altered in place kept its version): never a newer one."""
        stamped = _in_generation(chunks, generation)
        return await self.upsert(stamped, index=self.index_name(generation), same_version=repair)

    async def drop_generation(self, generation: int) -> None:
        """Delete a generation's index (an abandoned build; never the live one)."""
        try:
            await self._client.indices.delete(index=self.index_name(generation))
        except os_exc.NotFoundError:
            return
        except Exception as exc:
            raise _translate(exc, "index deletion") from exc

    async def digests(self, index: str, after: str, size: int) -> list[tuple[str, int, str]]:
        """(chunk_id, sequence, content_hash) of the index's chunks after `after`, in chunk
        id order: one page of a full comparison with Postgres."""
        body: dict[str, Any] = {
            "size": size,
            "sort": [{"chunk_id": "asc"}],
            "_source": ["sequence", "content_hash"],
            "query": {"match_all": {}},
        }
        if after:
            body["search_after"] = [after]
        try:
            found = await self._client.search(index=index, body=body)
        except Exception as exc:
            raise _translate(exc, "digest scan") from exc
        return [
            (str(h["_id"]), int(h["_source"]["sequence"]), str(h["_source"]["content_hash"]))
            for h in found["hits"]["hits"]
        ]

    async def digests_of(self, index: str, chunk_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """chunk_id -> (sequence, content_hash) of those of the ids the index holds."""
        if not chunk_ids:
            return {}
        try:
            found = await self._client.mget(
                index=index,
                body={"ids": list(chunk_ids)},
                params={"_source_includes": "sequence,content_hash"},
            )
        except Exception as exc:
            raise _translate(exc, "digest lookup") from exc
        return {
            str(d["_id"]): (int(d["_source"]["sequence"]), str(d["_source"]["content_hash"]))
            for d in found["docs"]
            if d.get("found")
        }

    async def remove(
        self, index: str, chunk_ids: Sequence[str], versions: Mapping[str, int] | None = None
    ) -> int:
        """Delete chunks by id from one index; how many it held. With `versions` (chunk id ->
        the sequence it was seen at), a delete leaves its version at that sequence and is a
        no-op (409) when the chunk was written anew meanwhile: a repair can put it back."""
        if not chunk_ids:
            return 0
        lines: list[dict[str, Any]] = []
        for cid in chunk_ids:
            action: dict[str, Any] = {"_index": index, "_id": cid}
            if versions is not None and cid in versions:
                action |= {"version": versions[cid], "version_type": "external_gte"}
            lines.append({"delete": action})
        try:
            response = await self._client.bulk(body=lines)
        except Exception as exc:
            raise _translate(exc, "chunk delete") from exc
        items = response.get("items", [])
        return sum(1 for item in items if item.get("delete", {}).get("result") == "deleted")

    async def count(self) -> int:
        try:
            result = await self._client.count(index=self.alias)
        except os_exc.NotFoundError:
            return 0
        except Exception as exc:
            raise _translate(exc, "count") from exc
        return int(result["count"])

    async def upsert(
        self, chunks: Sequence[Chunk], *, index: str | None = None, same_version: bool = False
    ) -> int:
        """Index chunks with external version = their sequence; older writes are no-ops.

        Returns how many the index took (409s mean it already held something newer); a
        chunk the index refuses for good raises PermanentError.
        """
        result = await self._bulk_index(chunks, index or self.alias, same_version)
        if result.rejected:
            chunk_id, reason = next(iter(result.rejected.items()))
            raise PermanentError(f"OpenSearch refused chunk {chunk_id}: {reason}")
        return result.taken

    async def project(
        self, chunks: Sequence[Chunk], *, building: Sequence[tuple[int, str]] = ()
    ) -> BulkResult:
        """A batch's bulk, to the live generation and to every generation being built
        (stamped with that generation), so a rebuild misses no change made while it runs.
        Chunks refused for good (a mapping rejection) are returned with the reason instead
        of failing their neighbours; 429 and 5xx raise TransientError, and the caller
        rebuilds the payload from Postgres before retrying."""
        result = await self._bulk_index(chunks, self.alias)
        rejected = dict(result.rejected)
        for generation, name in building:
            stamped = _in_generation(chunks, generation)
            rejected.update((await self._bulk_index(stamped, name)).rejected)
        return BulkResult(result.taken, rejected)

    async def _bulk_index(
        self, chunks: Sequence[Chunk], target: str, same_version: bool = False
    ) -> BulkResult:
        """The chunks in bounded requests, one after another. A request that fails
        transiently fails the call; whatever earlier requests wrote is re-sent with the
        same external versions on the retry, where it is a 409, a no-op."""
        taken, rejected = 0, dict[str, str]()
        for body in self._bulk_bodies(chunks, target, same_version):
            async with self._bulk_slots:
                await self._no_purge.wait()
                try:
                    with metrics.BULK_SECONDS.time():
                        response = await self._client.bulk(
                            body=body, request_timeout=self._bulk.timeout_s
                        )
                except Exception as exc:
                    raise _translate(exc, "bulk index") from exc
            for item in response.get("items", []):
                result = item.get("index", {})
                status = int(result.get("status", 500))
                if status in (200, 201):
                    metrics.BULK_ITEMS.labels("created").inc()
                    taken += 1
                elif status == 409:
                    metrics.BULK_ITEMS.labels("conflict").inc()
                    continue
                elif status == 429 or status >= 500:
                    metrics.BULK_ITEMS.labels("retryable").inc()
                    raise TransientError(f"OpenSearch rejected a chunk write ({status}): {result}")
                else:
                    metrics.BULK_ITEMS.labels("rejected").inc()
                    error = result.get("error")
                    reason = error.get("reason") if isinstance(error, dict) else error
                    rejected[str(result.get("_id"))] = f"{status}: {reason or result}"
        return BulkResult(taken, rejected)

    def _bulk_bodies(
        self, chunks: Sequence[Chunk], target: str, same_version: bool = False
    ) -> Iterator[bytes]:
        """NDJSON bodies of at most max_chunks chunks and max_bytes bytes each (a single
        chunk larger than max_bytes goes alone)."""
        lines: list[bytes] = []
        size = count = 0
        for chunk in chunks:
            action = json.dumps(
                {
                    "index": {
                        "_index": target,
                        "_id": chunk.chunk_id,
                        "version": chunk.sequence,
                        "version_type": "external_gte" if same_version else "external",
                    }
                }
            ).encode()
            source = chunk.model_dump_json().encode()
            grows = len(action) + len(source) + 2
            if count and (count >= self._bulk.max_chunks or size + grows > self._bulk.max_bytes):
                yield b"\n".join(lines) + b"\n"
                lines, size, count = [], 0, 0
            lines += (action, source)
            size += grows
            count += 1
        if lines:
            yield b"\n".join(lines) + b"\n"

    async def delete_document(
        self,
        tenant_id: str,
        source_id: str,
        doc_id: str,
        up_to_sequence: int,
        chunk_ids: Sequence[str],
    ) -> int:
        """Remove a document's chunks of versions <= up_to_sequence from every generation.

        Known ids are deleted with external version up_to_sequence + 1, which is greater than
        any write a pre-deletion event can carry, so a projection write racing the purge is
        refused rather than resurrecting the chunk; a delete-by-query sweeps the rest.
        """
        removed = 0
        for index in await self.generations():
            lines: list[dict[str, Any]] = [
                {
                    "delete": {
                        "_index": index,
                        "_id": cid,
                        "version": up_to_sequence + 1,
                        "version_type": "external",
                    }
                }
                for cid in chunk_ids
            ]
            try:
                if lines:
                    response = await self._client.bulk(body=lines)
                    removed += sum(
                        1
                        for item in response.get("items", [])
                        if item.get("delete", {}).get("result") == "deleted"
                    )
                swept = await self._client.delete_by_query(
                    index=index,
                    body={"query": self._doc_query(tenant_id, source_id, doc_id, up_to_sequence)},
                    params={"refresh": "true", "conflicts": "proceed"},
                )
                removed += int(swept.get("deleted", 0))
            except Exception as exc:
                raise _translate(exc, "purge") from exc
        return removed

    async def delete_documents(self, targets: Sequence[PurgeTarget]) -> list[int]:
        """Purge a batch of documents' known chunks from every generation: one bulk of
        versioned deletes per generation that returns once a refresh has made them
        visible (`wait_for`: the scheduled refresh, not a forced one per batch).
        Returns, per target, the entries removed. `sweep_documents` removes the rest,
        should the read-back find any."""
        removed = [0] * len(targets)
        owners = [n for n, t in enumerate(targets) for _ in t.chunk_ids]
        if not owners:
            return removed
        for index in await self.generations():
            lines: list[dict[str, Any]] = [
                {
                    "delete": {
                        "_index": index,
                        "_id": cid,
                        "version": t.up_to_sequence + 1,
                        "version_type": "external",
                    }
                }
                for t in targets
                for cid in t.chunk_ids
            ]
            try:
                response = await self._client.bulk(body=lines, params={"refresh": "wait_for"})
            except Exception as exc:
                raise _translate(exc, "purge") from exc
            for owner, item in zip(owners, response.get("items", []), strict=False):
                if item.get("delete", {}).get("result") == "deleted":
                    removed[owner] += 1
        return removed

    async def sweep_documents(self, targets: Sequence[PurgeTarget]) -> int:
        """Delete-by-query whatever any generation still holds of the targets."""
        if not targets:
            return 0
        sweep = {
            "bool": {
                "should": [
                    self._doc_query(t.tenant_id, t.source_id, t.doc_id, t.up_to_sequence)
                    for t in targets
                ],
                "minimum_should_match": 1,
            }
        }
        try:
            swept = await self._client.delete_by_query(
                index=self.pattern,
                body={"query": sweep},
                params={"refresh": "true", "conflicts": "proceed"},
            )
        except os_exc.NotFoundError:
            return 0
        except Exception as exc:
            raise _translate(exc, "purge sweep") from exc
        return int(swept.get("deleted", 0))

    async def count_documents(self, targets: Sequence[PurgeTarget]) -> list[int]:
        """Read-back after a purge (which refreshed): what each target still has in any
        generation. One count for the batch; per target only if any is left."""
        if not targets:
            return []
        queries = [
            self._doc_query(t.tenant_id, t.source_id, t.doc_id, t.up_to_sequence) for t in targets
        ]
        try:
            total = await self._client.count(
                index=self.pattern,
                body={"query": {"bool": {"should": queries, "minimum_should_match": 1}}},
            )
            if int(total["count"]) == 0:
                return [0] * len(targets)
            counts = []
            for query in queries:
                found = await self._client.count(index=self.pattern, body={"query": query})
                counts.append(int(found["count"]))
            return counts
        except os_exc.NotFoundError:
            return [0] * len(targets)
        except Exception as exc:
            raise _translate(exc, "read-back count") from exc

    async def delete_chunks(self, chunk_ids: Sequence[str]) -> int:
        """Remove chunks by id from every generation (a reparse's replaced chunks)."""
        return sum([await self.remove(index, chunk_ids) for index in await self.generations()])

    async def count_document(
        self, tenant_id: str, source_id: str, doc_id: str, up_to_sequence: int | None = None
    ) -> int:
        """Read-back: how many chunks of the document any generation still holds."""
        try:
            await self._client.indices.refresh(index=self.pattern)
            result = await self._client.count(
                index=self.pattern,
                body={"query": self._doc_query(tenant_id, source_id, doc_id, up_to_sequence)},
            )
        except os_exc.NotFoundError:
            return 0
        except Exception as exc:
            raise _translate(exc, "read-back count") from exc
        return int(result["count"])

    async def count_current(self, tenant_id: str, source_id: str, doc_id: str) -> int:
        """Chunks of the document that any generation still holds as current."""
        query = self._doc_query(tenant_id, source_id, doc_id, None)
        query["bool"]["must_not"] = [{"exists": {"field": "superseded_at"}}]
        try:
            await self._client.indices.refresh(index=self.pattern)
            result = await self._client.count(index=self.pattern, body={"query": query})
        except os_exc.NotFoundError:
            return 0
        except Exception as exc:
            raise _translate(exc, "read-back count") from exc
        return int(result["count"])

    @staticmethod
    def _doc_query(
        tenant_id: str, source_id: str, doc_id: str, up_to_sequence: int | None
    ) -> dict[str, Any]:
        filters: list[dict[str, Any]] = [
            {"term": {"tenant_id": tenant_id}},
            {"term": {"source_id": source_id}},
            {"term": {"doc_id": doc_id}},
        ]
        if up_to_sequence is not None:
            filters.append({"range": {"version_sequence": {"lte": up_to_sequence}}})
        return {"bool": {"filter": filters}}

    async def refresh(self) -> None:
        try:
            await self._client.indices.refresh(index=self.pattern)
        except os_exc.NotFoundError:
            return
        except Exception as exc:
            raise _translate(exc, "refresh") from exc

    async def search(
        self,
        *,
        text: str,
        tenant_id: str,
        principals: Sequence[str],
        purpose: str | None,
        as_of: datetime,
        size: int,
    ) -> list[dict[str, Any]]:
        """BM25 search with tenant, ACL, purpose and valid-time filters applied in the query."""
        filters: list[dict[str, Any]] = [
            {"term": {"tenant_id": tenant_id}},
            {"terms": {"acl": list(principals)}},
            {"range": {"valid_from": {"lte": as_of.isoformat()}}},
            {
                "bool": {
                    "should": [
                        {"bool": {"must_not": {"exists": {"field": "valid_to"}}}},
                        {"range": {"valid_to": {"gt": as_of.isoformat()}}},
                    ],
                    "minimum_should_match": 1,
                }
            },
        ]
        if purpose is not None:
            filters.append({"term": {"allowed_purposes": purpose}})
        body = {
            "size": size,
            "query": {"bool": {"must": [{"match": {"text": text}}], "filter": filters}},
        }
        try:
            response = await self._client.search(index=self.alias, body=body)
        except os_exc.NotFoundError:
            return []
        except Exception as exc:
            raise _translate(exc, "search") from exc
        return [
            {"chunk_id": hit["_id"], "score": hit["_score"], **hit["_source"]}
            for hit in response["hits"]["hits"]
        ]


async def rebuild(
    index: OpenSearchIndex, batches: AsyncIterator[list[Chunk]], generation: int
) -> int:
    """Build `generation` from Postgres chunks, then point the alias at it. Returns the count."""
    name = await index.create_generation(generation)
    total = 0
    async for batch in batches:
        stamped = _in_generation(batch, generation)
        total += await index.upsert(stamped, index=name)
        log.info("projection.rebuild.progress", generation=generation, chunks=total)
    await index.point_alias(generation)
    return total
