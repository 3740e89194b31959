"""Contract suites: what every adapter of a port must do, written once per port.

A concrete test class in `tests/integration` inherits a suite and provides the adapter
through the suite's fixture, against its real server (eventsourcing's recorder test cases
are the model). A second adapter of a port passes the same suite or is not done.
"""

from tests.support.contracts.connectors import (
    ConnectorStateContract,
    DeliveriesContract,
    EventPublisherContract,
)
from tests.support.contracts.indexing import (
    BlobStoreContract,
    ChunkStoreContract,
    LineageContract,
    PurgeStoreContract,
    SourceRegistryContract,
)
from tests.support.contracts.projections import SearchIndexContract, TaggedCacheContract

__all__ = [
    "BlobStoreContract",
    "ChunkStoreContract",
    "ConnectorStateContract",
    "DeliveriesContract",
    "EventPublisherContract",
    "LineageContract",
    "PurgeStoreContract",
    "SearchIndexContract",
    "SourceRegistryContract",
    "TaggedCacheContract",
]
