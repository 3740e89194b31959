"""The relation vocabulary (pure): inverses read stored relations backwards, an unknown
name is refused with the vocabulary, and only single-valued relations contradict."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from govindex.core.ports import EdgeRow
from govindex_client._types import RELATION_NAMES, RELATIONS, stored_relation
from reader.models import RelationsRequest
from reader.relations import asked, contradictions

T = datetime(2025, 1, 1, tzinfo=UTC)


def _request(**fields: object) -> RelationsRequest:
    return RelationsRequest.model_validate(
        {"tenant": "acme", "purpose": "support", "entity": "team:a", **fields}
    )


def test_an_inverse_reads_its_relation_backwards() -> None:
    assert stored_relation("OWNS") == ("OWNED_BY", True)
    assert stored_relation("OWNED_BY") == ("OWNED_BY", False)
    assert asked(_request(relation="OWNS", direction="out")) == ("OWNED_BY", False, True)
    assert asked(_request(relation="OWNED_BY", direction="out")) == ("OWNED_BY", True, False)
    assert asked(_request(relation="OWNS")) == ("OWNED_BY", True, True)
    assert asked(_request(direction="in")) == (None, False, True)
    assert {"OWNS", "AFFECTED_BY", "GOVERNED_BY", "SUPERSEDED_BY"} <= RELATION_NAMES
    assert set(RELATIONS) <= RELATION_NAMES


def test_an_unknown_relation_is_refused_naming_the_vocabulary() -> None:
    with pytest.raises(ValidationError, match="unknown relation 'LIKES'; known: ABOUT"):
        _request(relation="LIKES")


def _edge(edge_id: str, subject: str, relation: str, obj: str) -> EdgeRow:
    return EdgeRow(edge_id, subject, relation, obj, T, None, T, "v1", "c" * 32)


def test_only_a_single_valued_relation_to_another_object_contradicts() -> None:
    rows = [
        _edge("e1", "service:a", "OWNED_BY", "team:x"),
        _edge("e2", "service:a", "OWNED_BY", "team:y"),
        _edge("e3", "service:a", "OWNED_BY", "team:x"),  # the same owner, another record
        _edge("e4", "service:a", "DEPENDS_ON", "service:b"),
        _edge("e5", "service:a", "DEPENDS_ON", "service:c"),  # many dependencies: fine
    ]
    assert contradictions(rows) == {"e1": ["e2"], "e2": ["e1", "e3"], "e3": ["e2"]}
