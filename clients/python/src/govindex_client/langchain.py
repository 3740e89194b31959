"""LangChain retrievers over the read API (the `langchain` extra): `GovindexRetriever` for
gated search hits, `GovindexPackRetriever` for a pack's items, its manifest kept to verify.

    client = GovindexClient(url, token, tenant="acme", purpose="support",
                            principals=["group:eng"])
    docs = GovindexRetriever(client=client, limit=5).invoke("orders-db failover")
    docs[0].id, docs[0].metadata["anchor"]["locator"]

Every document's `id` is its chunk id and its metadata holds the citation anchor (a dict of
`Anchor`'s fields), the rank the hit had in each channel, its fused score and rank. Who asks
is the client's: its tenant, purpose and subject, or the per-call ones in `options`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, PrivateAttr

from govindex_client.client import AsyncGovindexClient, GovindexClient
from govindex_client.models import Hit, Manifest, Pack, PackItem, VerifyResponse, about


def hit_document(hit: Hit) -> Document:
    """A search hit as a Document: its text, id = chunk id, anchor, channel ranks, score."""
    return Document(
        id=hit.anchor.chunk_id,
        page_content=hit.text,
        metadata={
            "anchor": hit.anchor.model_dump(mode="json"),
            "channels": dict(hit.channels),
            "score": hit.score,
            "rank": hit.rank,
            "kind": hit.kind,
            "graph_path": list(hit.graph_path),
            **about(hit),
        },
    )


def item_document(item: PackItem, pack_hash: str, pack_id: str | None = None) -> Document:
    """A pack item as a Document: as a hit, plus its citation key, tokens, hydrated parent
    and neighbours, flags and the id and hash of the manifest that pins it."""
    return Document(
        id=item.anchor.chunk_id,
        page_content=item.text,
        metadata={
            "key": item.key,
            "anchor": item.anchor.model_dump(mode="json"),
            "channels": dict(item.channels),
            "score": item.score,
            "rank": item.rank,
            "kind": item.kind,
            "tokens": item.tokens,
            "hydrated": [h.model_dump(mode="json") for h in item.hydrated],
            "flags": [f.model_dump(mode="json") for f in item.flags],
            "pack_hash": pack_hash,
            "pack_id": pack_id,
            **about(item),
        },
    )


class _Governed(BaseRetriever):
    client: GovindexClient
    """Answers `invoke`; and `ainvoke` too, in a thread, when `async_client` is None."""
    async_client: AsyncGovindexClient | None = None
    """Answers `ainvoke` when given."""
    limit: int | None = None
    """Hits (or pack candidates) asked for; None: the read API's default."""
    options: Mapping[str, Any] = Field(default_factory=dict)
    """Keyword arguments of every call (`SearchOptions` or `PackOptions`): filters, as_of,
    channels, budget, and tenant, purpose or subject overriding the client's."""

    def _options(self) -> dict[str, Any]:
        given = dict(self.options)
        if self.limit is not None:
            given["limit"] = self.limit
        return given


class GovindexRetriever(_Governed):
    """Gated search hits (POST /v1/search) as Documents, best first."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        found = self.client.search(query, **self._options())
        return [hit_document(h) for h in found.hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.async_client is None:
            return await super()._aget_relevant_documents(query, run_manager=run_manager)
        found = await self.async_client.search(query, **self._options())
        return [hit_document(h) for h in found.hits]


class GovindexPackRetriever(_Governed):
    """A context pack's items (POST /v1/packs) as Documents, in the pack's order.

    The last pack built is kept (`last_pack`, `last_manifest`): `verify()` asks later whether
    what the documents hold is still valid. One retriever shared by concurrent callers keeps
    whichever pack came last; each document's `pack_hash` says which manifest pins it.
    """

    _last: Pack | None = PrivateAttr(default=None)

    @property
    def last_pack(self) -> Pack | None:
        return self._last

    @property
    def last_manifest(self) -> Manifest | None:
        return None if self._last is None else self._last.manifest

    def _documents(self, pack: Pack) -> list[Document]:
        self._last = pack
        manifest = pack.manifest
        return [item_document(i, manifest.pack_hash, manifest.pack_id) for i in pack.items]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._documents(self.client.pack(query, **self._options()))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.async_client is None:
            return await super()._aget_relevant_documents(query, run_manager=run_manager)
        return self._documents(await self.async_client.pack(query, **self._options()))

    def verify(self, manifest: Manifest | None = None) -> VerifyResponse:
        """Verify `manifest`, by default the last pack's (POST /v1/packs/verify)."""
        return self.client.verify(self._manifest(manifest))

    async def averify(self, manifest: Manifest | None = None) -> VerifyResponse:
        pinned = self._manifest(manifest)
        if self.async_client is None:
            return await asyncio.to_thread(self.client.verify, pinned)
        return await self.async_client.verify(pinned)

    def _manifest(self, manifest: Manifest | None) -> Manifest:
        pinned = manifest or self.last_manifest
        if pinned is None:
            raise ValueError("no pack built yet: invoke the retriever first, or give a manifest")
        return pinned


__all__ = ["GovindexPackRetriever", "GovindexRetriever", "hit_document", "item_document"]
