"""govindex: governed ingestion and indexing for retrieval systems (shared kernel)."""

__version__ = "0.1.0"
