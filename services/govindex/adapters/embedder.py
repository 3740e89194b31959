"""The dense channel's default model, where it was before `embedders/` (kept for imports)."""

from __future__ import annotations

from govindex.adapters.embedders.wordllama import MODEL, WordLlamaEmbedder

__all__ = ["MODEL", "WordLlamaEmbedder"]
