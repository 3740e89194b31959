"""Chunk writes: bounded bulk requests with external versions, and the purge gate."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from govindex.adapters.opensearch.client import (
    NO_SECURITY,
    Connection,
    OpenSearchSecurity,
    translate,
)
from govindex.core import metrics
from govindex.core.errors import PermanentError, TransientError
from govindex.core.ports import BulkResult
from govindex.core.records import Chunk


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


def in_generation(chunks: Sequence[Chunk], generation: int) -> list[Chunk]:
    """The chunks as a given generation holds them (the generation is stamped on each)."""
    return [c.model_copy(update={"index_generation": generation}) for c in chunks]


class BulkWriter(Connection):
    """The projection's writes (SearchIndex), held back while a purge goes first."""

    def __init__(
        self,
        url: str,
        alias: str,
        *,
        bulk: BulkPolicy | None = None,
        security: OpenSearchSecurity = NO_SECURITY,
    ) -> None:
        super().__init__(url, alias, security=security)
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
            stamped = in_generation(chunks, generation)
            rejected.update((await self._bulk_index(stamped, name)).rejected)
        return BulkResult(result.taken, rejected)

    async def delete_chunks(self, chunk_ids: Sequence[str]) -> int:
        """Remove chunks by id from every generation (a reparse's replaced chunks)."""
        return sum([await self.remove(index, chunk_ids) for index in await self.generations()])

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
            raise translate(exc, "chunk delete") from exc
        items = response.get("items", [])
        return sum(1 for item in items if item.get("delete", {}).get("result") == "deleted")

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
                    raise translate(exc, "bulk index") from exc
            taken += _tally(response.get("items", []), rejected)
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


def _tally(items: Sequence[dict[str, Any]], rejected: dict[str, str]) -> int:
    """How many of a bulk response's items the index took; those it refused for good go
    into `rejected` (id -> reason). 409 means it held something as new: not an error."""
    taken = 0
    for item in items:
        result = item.get("index", {})
        status = int(result.get("status", 500))
        if status in (200, 201):
            metrics.BULK_ITEMS.labels("created").inc()
            taken += 1
        elif status == 409:
            metrics.BULK_ITEMS.labels("conflict").inc()
        elif status == 429 or status >= 500:
            metrics.BULK_ITEMS.labels("retryable").inc()
            raise TransientError(f"OpenSearch rejected a chunk write ({status}): {result}")
        else:
            metrics.BULK_ITEMS.labels("rejected").inc()
            error = result.get("error")
            reason = error.get("reason") if isinstance(error, dict) else error
            rejected[str(result.get("_id"))] = f"{status}: {reason or result}"
    return taken
