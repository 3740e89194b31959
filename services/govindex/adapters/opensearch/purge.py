"""Purges (PurgeIndex): a batch of documents' chunks out of every generation, read back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opensearchpy import exceptions as os_exc

from govindex.adapters.opensearch.client import Connection, translate
from govindex.core.ports import PurgeTarget


def target_query(target: PurgeTarget, *, current_only: bool = False) -> dict[str, Any]:
    """The target's chunks of versions <= its sequence; `current_only`: those not superseded."""
    query: dict[str, Any] = {
        "bool": {
            "filter": [
                {"term": {"tenant_id": target.tenant_id}},
                {"term": {"source_id": target.source_id}},
                {"term": {"doc_id": target.doc_id}},
                {"range": {"version_sequence": {"lte": target.up_to_sequence}}},
            ]
        }
    }
    if current_only:
        query["bool"]["must_not"] = [{"exists": {"field": "superseded_at"}}]
    return query


class PurgeQueries(Connection):
    """Deletes by id with versions that outrank any pre-deletion write, sweeps by query and
    read-back counts; every call takes a batch of targets (a document alone is a batch of
    one)."""

    async def delete_documents(self, targets: Sequence[PurgeTarget]) -> list[int]:
        """Purge a batch of documents' known chunks from every generation: one bulk of
        versioned deletes per generation that returns once a refresh has made them
        visible (`wait_for`: the scheduled refresh, not a forced one per batch).
        Returns, per target, the entries removed. `sweep_documents` removes the rest,
        should the read-back find any.

        Known ids are deleted with external version up_to_sequence + 1, which is greater
        than any write a pre-deletion event can carry, so a projection write racing the
        purge is refused rather than resurrecting the chunk."""
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
                raise translate(exc, "purge") from exc
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
                "should": [target_query(t) for t in targets],
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
            raise translate(exc, "purge sweep") from exc
        return int(swept.get("deleted", 0))

    async def count_documents(
        self, targets: Sequence[PurgeTarget], *, current_only: bool = False, refresh: bool = False
    ) -> list[int]:
        """Read-back: what each target still has in any generation. One count for the
        batch; per target only if any is left. After a purge (which refreshed) no refresh
        is needed; `refresh` makes every write so far visible first (a read-back of its
        own, such as `verify-purge`). `current_only` counts only chunks not superseded
        (tombstone mode keeps the rest)."""
        if not targets:
            return []
        if refresh:
            await self.refresh()
        queries = [target_query(t, current_only=current_only) for t in targets]
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
            raise translate(exc, "read-back count") from exc
