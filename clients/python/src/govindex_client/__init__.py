"""A thin client of govindex's governed read API: its wire models, sync and async clients,
and typed errors; LangChain, LlamaIndex and MCP adapters in the extras' modules."""

from __future__ import annotations

from importlib.metadata import version

from govindex_client.client import (
    Asking,
    AsyncGovindexClient,
    Credential,
    GovindexClient,
    LineageFields,
    PackOptions,
    RelationOptions,
    SearchOptions,
)
from govindex_client.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    GovindexError,
    NotFound,
    TooLarge,
    Unauthorized,
    Unavailable,
    Unreachable,
)

__version__ = version("govindex-client")

__all__ = [
    "Asking",
    "AsyncGovindexClient",
    "BadRequest",
    "Conflict",
    "Credential",
    "Forbidden",
    "Gone",
    "GovindexClient",
    "GovindexError",
    "LineageFields",
    "NotFound",
    "PackOptions",
    "RelationOptions",
    "SearchOptions",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "Unreachable",
    "__version__",
]
