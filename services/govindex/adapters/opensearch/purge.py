"""Purges (PurgeIndex): a batch of documents' chunks out of every generation, read back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opensearchpy import exceptions as os_exc

from govindex.adapters.opensearch.client import Connection, translate
from govindex.core.ports import PurgeTarget

# Clauses of one sweep request at most: OpenSearch refuses a query of more than
# `indices.query.bool.max_clause_count` (1,024 by default), and a group of purges can be
# a thousand documents.
SWEEP_GROUPS = 200


def target_query(target: PurgeTarget, *, current_only: bool = False) -> dict[str, Any]:
    """The target's chunks of versions <= its sequence; `current_only`: those not superseded."""
    return _documents_query(
        target.tenant_id,
        target.source_id,
        [target.doc_id],
        target.up_to_sequence,
        current_only=current_only,
    )


def _documents_query(
    tenant: str, source: str, doc_ids: list[str], up_to: int, *, current_only: bool = False
) -> dict[str, Any]:
    """Chunks of these documents of one source, of versions <= `up_to`: four clauses
    however many documents (one `terms`), a lookup per term on the server rather than a
    clause per document, each evaluated over the whole index."""
    query: dict[str, Any] = {
        "bool": {
            "filter": [
                {"term": {"tenant_id": tenant}},
                {"term": {"source_id": source}},
                {"terms": {"doc_id": doc_ids}},
                {"range": {"version_sequence": {"lte": up_to}}},
            ]
        }
    }
    if current_only:
        query["bool"]["must_not"] = [{"exists": {"field": "superseded_at"}}]
    return query


def covering_queries(
    targets: Sequence[PurgeTarget], *, current_only: bool = False
) -> list[dict[str, Any]]:
    """One query per tenant and source that matches every chunk any of `targets` matches:
    their documents' chunks up to the highest sequence among them (a superset). Nothing
    found by these is nothing left for any target."""
    groups: dict[tuple[str, str], list[PurgeTarget]] = {}
    for t in targets:
        groups.setdefault((t.tenant_id, t.source_id), []).append(t)
    return [
        _documents_query(
            tenant,
            source,
            sorted({t.doc_id for t in group}),
            max(t.up_to_sequence for t in group),
            current_only=current_only,
        )
        for (tenant, source), group in groups.items()
    ]


def exact_queries(targets: Sequence[PurgeTarget]) -> list[dict[str, Any]]:
    """Queries that match exactly the targets' chunks, one per tenant, source and sequence
    (what a sweep may delete: never a re-created document's later versions)."""
    groups: dict[tuple[str, str, int], list[str]] = {}
    for t in targets:
        groups.setdefault((t.tenant_id, t.source_id, t.up_to_sequence), []).append(t.doc_id)
    return [
        _documents_query(tenant, source, sorted(set(doc_ids)), up_to)
        for (tenant, source, up_to), doc_ids in groups.items()
    ]


def _any_of(queries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"bool": {"should": queries, "minimum_should_match": 1}}


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
        """Delete-by-query whatever any generation still holds of the targets, in requests
        of SWEEP_GROUPS queries at most."""
        queries = exact_queries(targets)
        swept = 0
        for start in range(0, len(queries), SWEEP_GROUPS):
            try:
                answer = await self._client.delete_by_query(
                    index=self.pattern,
                    body={"query": _any_of(queries[start : start + SWEEP_GROUPS])},
                    params={"refresh": "true", "conflicts": "proceed"},
                )
            except os_exc.NotFoundError:
                return swept
            except Exception as exc:
                raise translate(exc, "purge sweep") from exc
            swept += int(answer.get("deleted", 0))
        return swept

    async def count_documents(
        self, targets: Sequence[PurgeTarget], *, current_only: bool = False, refresh: bool = False
    ) -> list[int]:
        """Read-back: what each target still has in any generation. One count for the
        batch (a few clauses: `covering_queries`); per target only if any is left. After a
        purge (which refreshed) no refresh is needed; `refresh` makes every write so far
        visible first (a read-back of its own, such as `verify-purge`). `current_only`
        counts only chunks not superseded (tombstone mode keeps the rest)."""
        if not targets:
            return []
        if refresh:
            await self.refresh()
        try:
            if await self._none_named(targets):
                return [0] * len(targets)
            total = await self._client.count(
                index=self.pattern,
                body={"query": _any_of(covering_queries(targets, current_only=current_only))},
            )
            if int(total["count"]) == 0:
                return [0] * len(targets)
            counts = []
            for t in targets:
                query = target_query(t, current_only=current_only)
                found = await self._client.count(index=self.pattern, body={"query": query})
                counts.append(int(found["count"]))
            return counts
        except os_exc.NotFoundError:
            return [0] * len(targets)
        except Exception as exc:
            raise translate(exc, "read-back count") from exc

    async def _none_named(self, targets: Sequence[PurgeTarget]) -> bool:
        """Whether no generation holds a chunk of any document named like a target, in any
        tenant or source: a superset of what the read-back counts, so none is none left.
        One `terms` clause, which a server answers by looking up each name; the embedded
        server evaluates every clause of a query over every document the clause matches,
        so the read-back's tenant and source clauses alone cost it time proportional to
        the corpus (200 documents read back among 200,000: 6 ms for this count, 375 ms
        for the read-back; docs/benchmarks/growth.md)."""
        names = sorted({t.doc_id for t in targets})
        found = await self._client.count(
            index=self.pattern, body={"query": {"terms": {"doc_id": names}}}
        )
        return int(found["count"]) == 0
