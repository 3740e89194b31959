"""The purge's read-back and sweep queries stay a few clauses for a group of any size.

OpenSearch refuses a query of more than `indices.query.bool.max_clause_count` clauses
(1,024 by default); a group of purges can be a thousand documents.
"""

from __future__ import annotations

from govindex.adapters.opensearch.purge import SWEEP_GROUPS, covering_queries, exact_queries
from govindex.core.ports import PurgeTarget


def _clauses(query: object) -> int:
    """Every query clause, nested ones included (what OpenSearch's clause limit counts)."""
    if isinstance(query, list):
        return sum(_clauses(q) for q in query)
    if not isinstance(query, dict):
        return 0
    own = sum(1 for k in query if k in ("term", "terms", "range", "exists"))
    return own + sum(
        _clauses(v) for k, v in query.items() if k in ("bool", "filter", "should", "must_not")
    )


def test_a_thousand_targets_make_a_few_clauses_whatever_their_sequences() -> None:
    many = [PurgeTarget("t", "s", f"d{n}.md", 1 + n % 7, ()) for n in range(1000)]
    covering = covering_queries(many)
    assert len(covering) == 1 and _clauses(covering) == 4
    assert covering[0]["bool"]["filter"][3] == {"range": {"version_sequence": {"lte": 7}}}
    exact = exact_queries(many)
    assert len(exact) == 7 and _clauses(exact) == 28  # one per source and sequence
    assert sorted(d for q in exact for d in q["bool"]["filter"][2]["terms"]["doc_id"]) == sorted(
        t.doc_id for t in many
    )
    spread = [PurgeTarget("t", "s", f"d{n}.md", n, ()) for n in range(1, 1001)]
    assert len(exact_queries(spread)) == 1000  # swept SWEEP_GROUPS at a time
    assert _clauses(exact_queries(spread)[:SWEEP_GROUPS]) == 4 * SWEEP_GROUPS <= 1024
