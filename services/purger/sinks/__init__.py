"""The purge sinks, one module each, in the order a deletion reaches them."""

from __future__ import annotations

from govindex.core.ports import Lineage, PurgeIndex, PurgeSink, PurgeStore, TaggedCache
from purger.sinks.cache import CacheSink
from purger.sinks.content import ContentSink
from purger.sinks.index import IndexSink
from purger.sinks.summaries import SummarySink

__all__ = ["CacheSink", "ContentSink", "IndexSink", "SummarySink", "purge_sinks"]


def purge_sinks(
    *, store: PurgeStore, index: PurgeIndex, cache: TaggedCache | None, lineage: Lineage
) -> list[PurgeSink]:
    """Postgres first (it is the gate: nothing without a row there can be re-projected),
    then every index generation, then the copies built from the content: cached results
    and stored summaries."""
    return [ContentSink(store), IndexSink(index), CacheSink(cache), SummarySink(lineage)]
