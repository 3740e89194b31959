"""The read path's wiring: governed queries over a Runtime's index and store."""

from __future__ import annotations

from govindex.runtime.composition import Runtime
from reader.search import Hit, Query, search


async def governed_query(rt: Runtime, query: Query) -> list[Hit]:
    return await search(query, index=rt.index, store=rt.chunks)
