"""OpenSearch adapter: the chunk projection, one index generation at a time behind an alias.

Writes use external versioning by sequence (docs/design/guarantees.md#order-guard): an older write
than the one the
index holds is a 409, which here means "already newer" and is not an error. One module per
part: `client` (the connection, error translation), `mapping`, `bulk` (writes and the purge
gate), `purge` (deletes, sweeps, read-backs), `search` (reads) and `index` (template,
generations, alias, and the assembled `OpenSearchIndex`).
"""

from __future__ import annotations

from govindex.adapters.opensearch.bulk import BulkPolicy
from govindex.adapters.opensearch.client import OpenSearchSecurity
from govindex.adapters.opensearch.index import OpenSearchIndex, rebuild
from govindex.adapters.opensearch.mapping import MAPPING

__all__ = ["MAPPING", "BulkPolicy", "OpenSearchIndex", "OpenSearchSecurity", "rebuild"]
