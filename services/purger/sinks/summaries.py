"""The stored-summaries sink: derived artifacts built from the document lose their text."""

from __future__ import annotations

from collections.abc import Sequence

from govindex.core.ports import Deletion, Lineage, Purged


class SummarySink:
    """Invalidated in both deletion modes; status and reason stay, and each artifact is
    returned for the receipt to announce."""

    name = "summaries"

    def __init__(self, lineage: Lineage) -> None:
        self._lineage = lineage

    async def purge(self, deletions: Sequence[Deletion]) -> list[Purged]:
        results = []
        for d in deletions:
            reason = f"{d.doc_key} deleted ({d.reason}) at sequence {d.sequence}"
            tenant = d.key.tenant_id
            invalidated = await self._lineage.invalidate(tenant, d.doc_key, d.chunk_ids, reason)
            left = await self._lineage.remaining(tenant, d.doc_key, d.chunk_ids)
            detail = "text removed, status and reason kept"
            results.append(Purged(len(invalidated), left, detail, tuple(invalidated)))
        return results
