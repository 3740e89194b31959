"""Reciprocal rank fusion with a stable tie-break (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from govindex.core.records import Chunk

RRF_K = 60
_TRUST = {"authoritative": 0, "reviewed": 1, "untrusted": 2}


def fuse(
    ranked: Mapping[str, Sequence[str]], chunks: Mapping[str, Chunk], k: int = RRF_K
) -> list[tuple[str, float, dict[str, int]]]:
    """(chunk id, fused score, rank per channel), best first.

    score = Σ 1 / (k + rank) over the channels that ranked the chunk (ranks from 1). Ties
    break on trust (authoritative first), newer valid_from, then source, doc, span start
    and chunk id, so the same inputs always give the same order.
    """
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for channel, ids in ranked.items():
        for position, chunk_id in enumerate(ids, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + position)
            ranks.setdefault(chunk_id, {})[channel] = position

    def order(chunk_id: str) -> tuple[float, int, float, str, str, int, str]:
        c = chunks[chunk_id]
        return (
            -round(scores[chunk_id], 12),
            _TRUST.get(c.trust_level, 3),
            -c.valid_from.timestamp(),
            c.source_id,
            c.doc_id,
            c.char_start,
            chunk_id,
        )

    return [(c, scores[c], ranks[c]) for c in sorted(scores, key=order)]
