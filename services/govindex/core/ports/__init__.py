"""Every port (a Protocol per capability) and the plain records that cross them, by
audience: `values` (records), `indexing`, `projection`, `purging`, `connectors`,
`messaging`, `reading`.

Handlers depend on these, never on an adapter; adapters implement them and are wired only
by the composition root (`govindex.runtime.composition`). Importing from this package
names every seam of the system in one place.
"""

from __future__ import annotations

from govindex.core.ports.connectors import (
    CdcLedger,
    ConnectorState,
    ConnectorTransaction,
    Deliveries,
    IngestState,
)
from govindex.core.ports.indexing import (
    BlobStore,
    ChunkStore,
    DocumentTransaction,
    SourceCatalog,
    SourceRegistry,
    VersionStore,
)
from govindex.core.ports.messaging import (
    DeadLetterLog,
    Emitter,
    EventPublisher,
    Outbox,
)
from govindex.core.ports.projection import (
    CandidateIndex,
    GenerationRegistry,
    PurgeIndex,
    PurgeTarget,
    SearchIndex,
)
from govindex.core.ports.purging import (
    Lineage,
    LineageRegistry,
    PurgeStore,
    RetentionStore,
    TaggedCache,
)
from govindex.core.ports.reading import (
    ChunkFacts,
    EdgeFact,
    Embedder,
    GraphReach,
    ReadAccess,
    ReadCache,
    ReadFilters,
    ReadSnapshot,
    ReadStore,
    VectorStore,
)
from govindex.core.ports.values import (
    ApplyResult,
    BulkResult,
    DocumentKey,
    DocumentRow,
    DocumentState,
    ExpiredVersion,
    GraphEdge,
    Invalidated,
    OutboxMessage,
    Outcome,
    StoredVersion,
    TombstonePlan,
    TombstoneRow,
    VersionPlan,
)

__all__ = [
    "ApplyResult",
    "BlobStore",
    "BulkResult",
    "CandidateIndex",
    "CdcLedger",
    "ChunkFacts",
    "ChunkStore",
    "ConnectorState",
    "ConnectorTransaction",
    "DeadLetterLog",
    "Deliveries",
    "DocumentKey",
    "DocumentRow",
    "DocumentState",
    "DocumentTransaction",
    "EdgeFact",
    "Embedder",
    "Emitter",
    "EventPublisher",
    "ExpiredVersion",
    "GenerationRegistry",
    "GraphEdge",
    "GraphReach",
    "IngestState",
    "Invalidated",
    "Lineage",
    "LineageRegistry",
    "Outbox",
    "OutboxMessage",
    "Outcome",
    "PurgeIndex",
    "PurgeStore",
    "PurgeTarget",
    "ReadAccess",
    "ReadCache",
    "ReadFilters",
    "ReadSnapshot",
    "ReadStore",
    "RetentionStore",
    "SearchIndex",
    "SourceCatalog",
    "SourceRegistry",
    "StoredVersion",
    "TaggedCache",
    "TombstonePlan",
    "TombstoneRow",
    "VectorStore",
    "VersionPlan",
    "VersionStore",
]
