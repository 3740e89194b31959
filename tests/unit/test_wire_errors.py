"""A malformed request is answered with every problem it has, in one 400."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from reader.models import MAX_FIELD_ERRORS, SearchRequest
from reader.wire import bad_request


def refusal_of(body: object) -> dict[str, object]:
    with pytest.raises(ValidationError) as caught:
        SearchRequest.model_validate(body, strict=True)
    return bad_request(caught.value).body.model_dump()


def test_every_wrong_field_is_reported_and_the_first_also_as_field_and_reason() -> None:
    answer = refusal_of(
        {"tenant": "a\x00b", "purpose": "support", "query": "x", "limit": "5", "trace": "yes"}
    )
    fields = [e["field"] for e in answer["errors"]]  # type: ignore[union-attr]
    assert {"tenant", "limit", "trace"} <= set(fields), fields
    assert answer["field"] == fields[0] and answer["reason"] == answer["errors"][0]["reason"]  # type: ignore[index]


def test_a_body_that_is_not_an_object_is_one_error_saying_so() -> None:
    answer = refusal_of([1, 2])
    assert answer["reason"] == "the body must be a JSON object"
    assert len(answer["errors"]) == 1  # type: ignore[arg-type]


def test_thousands_of_wrong_items_report_a_bounded_number_of_errors() -> None:
    body = {"tenant": "acme", "purpose": "support", "query": "x", "entities": [1] * 5000}
    answer = refusal_of(body)
    assert 1 <= len(answer["errors"]) <= MAX_FIELD_ERRORS  # type: ignore[arg-type]
