"""The search projection (OpenSearch): indexing, generations, purges and candidates."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from govindex.core.ports.values import BulkResult
from govindex.core.records import Chunk


class SearchIndex(Protocol):
    """The OpenSearch projection: written by sequence (external versioning)."""

    async def upsert(self, chunks: Sequence[Chunk], *, index: str | None = None) -> int: ...

    async def project(
        self, chunks: Sequence[Chunk], *, building: Sequence[tuple[int, str]] = ()
    ) -> BulkResult:
        """Write to the live generation and to every (generation, index) being built."""
        ...

    async def delete_chunks(self, chunk_ids: Sequence[str]) -> int: ...


class GenerationRegistry(Protocol):
    """Which index generations a rebuild is filling: writers must reach them too."""

    async def building(self) -> list[tuple[int, str]]: ...


@dataclass(frozen=True)
class PurgeTarget:
    """One document's content to remove from the index: versions up to a sequence."""

    tenant_id: str
    source_id: str
    doc_id: str
    up_to_sequence: int
    chunk_ids: Sequence[str]


class PurgeIndex(Protocol):
    """Purges by batch: every call takes a batch of targets (a document alone is a batch
    of one); deletes and counts answer per target, in order."""

    def first(self) -> AbstractAsyncContextManager[None]:
        """While held, this process sends no new bulk write: a purge's requests go ahead of
        the documents lanes' traffic instead of queueing behind it."""
        ...

    async def delete_documents(self, targets: Sequence[PurgeTarget]) -> list[int]:
        """Delete the targets' known chunks from every generation, with versions no
        pre-deletion write can beat; per target, the entries removed."""
        ...

    async def sweep_documents(self, targets: Sequence[PurgeTarget]) -> int:
        """Delete by query whatever any generation still holds of the targets."""
        ...

    async def count_documents(
        self, targets: Sequence[PurgeTarget], *, current_only: bool = False, refresh: bool = False
    ) -> list[int]:
        """Read-back: per target, the chunks any generation still holds (`current_only`:
        those not superseded). `refresh` first makes every earlier write visible."""
        ...


class CandidateIndex(Protocol):
    """Lexical candidates for the read path, filtered inside the query."""

    async def search(
        self,
        *,
        text: str,
        tenant_id: str,
        principals: Sequence[str],
        purpose: str | None,
        as_of: datetime,
        size: int,
    ) -> list[dict[str, Any]]: ...
