"""A LlamaIndex retriever over the read API (the `llamaindex` extra).

    client = GovindexClient(url, token, tenant="acme", purpose="support",
                            principals=["group:eng"])
    nodes = GovindexRetriever(client, limit=5).retrieve("orders-db failover")
    nodes[0].node.node_id, nodes[0].node.metadata["locator"], nodes[0].score

Each gated hit is a `NodeWithScore` of a `TextNode` whose id is the chunk id, whose metadata
holds the citation anchor (`Anchor`'s fields) and the hit's channel ranks, and whose source
relationship names the document (`tenant/source/doc`). Who asks is the client's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from govindex_client.client import AsyncGovindexClient, GovindexClient
from govindex_client.models import Hit, about

# What an LLM or an embedder is shown of a node's metadata besides its text: where it is,
# what it is called, and when it holds and how far it is trusted.
_SHOWN = frozenset(
    {"locator", "heading_path", "title", "valid_from", "valid_to", "trust_level", "source_url"}
)


def hit_node(hit: Hit) -> NodeWithScore:
    """A search hit as a scored TextNode: id = chunk id, the anchor as metadata."""
    anchor = hit.anchor
    metadata: dict[str, Any] = {
        **anchor.model_dump(mode="json"),
        "channels": dict(hit.channels),
        "rank": hit.rank,
        "kind": hit.kind,
        **about(hit),
    }
    hidden = [k for k in metadata if k not in _SHOWN]
    document = f"{anchor.tenant}/{anchor.source_id}/{anchor.doc_id}"
    node = TextNode(
        id_=anchor.chunk_id,
        text=hit.text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=document)},
    )
    return NodeWithScore(node=node, score=hit.score)


class GovindexRetriever(BaseRetriever):
    """Gated search hits (POST /v1/search) as `NodeWithScore`s, best first.

    `options` are the keyword arguments of every search (`SearchOptions`: limit, filters,
    as_of, or tenant, purpose and subject overriding the client's); `limit` is one of them.
    `aretrieve` uses `async_client` when given, else `client` in a thread.
    """

    def __init__(
        self,
        client: GovindexClient,
        *,
        async_client: AsyncGovindexClient | None = None,
        limit: int | None = None,
        options: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        self.client, self.async_client = client, async_client
        self.options: dict[str, Any] = dict(options or {})
        if limit is not None:
            self.options["limit"] = limit

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = self.client.search(query_bundle.query_str, **self.options)
        return [hit_node(h) for h in found.hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.async_client is None:
            return await asyncio.to_thread(self._retrieve, query_bundle)
        found = await self.async_client.search(query_bundle.query_str, **self.options)
        return [hit_node(h) for h in found.hits]


__all__ = ["GovindexRetriever", "hit_node"]
