"""Reads (CandidateIndex): lexical candidates for the read path, and digests for a reindex's
comparison with Postgres."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from opensearchpy import exceptions as os_exc

from govindex.adapters.opensearch.client import Connection, translate


def _visible(
    tenant_id: str, principals: Sequence[str], purpose: str | None, as_of: datetime
) -> list[dict[str, Any]]:
    """Tenant, ACL, purpose and valid-time filters: what a reader may see at `as_of`."""
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
    return filters


class CandidateSearch(Connection):
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
        filters = _visible(tenant_id, principals, purpose, as_of)
        body = {
            "size": size,
            "query": {"bool": {"must": [{"match": {"text": text}}], "filter": filters}},
        }
        try:
            response = await self._client.search(index=self.alias, body=body)
        except os_exc.NotFoundError:
            return []
        except Exception as exc:
            raise translate(exc, "search") from exc
        return [
            {"chunk_id": hit["_id"], "score": hit["_score"], **hit["_source"]}
            for hit in response["hits"]["hits"]
        ]

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
            raise translate(exc, "digest scan") from exc
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
            raise translate(exc, "digest lookup") from exc
        return {
            str(d["_id"]): (int(d["_source"]["sequence"]), str(d["_source"]["content_hash"]))
            for d in found["docs"]
            if d.get("found")
        }
