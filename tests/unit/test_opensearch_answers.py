"""OpenSearch's answers are read with orjson, as the standard library reads them."""

from __future__ import annotations

import json
import math

from opensearchpy import JSONSerializer

from govindex.adapters.opensearch.client import FastLoads, new_client

BULK_ANSWER = json.dumps(
    {
        "took": 3,
        "errors": True,
        "items": [
            {"index": {"_id": "c-1", "_version": 7, "status": 201, "result": "created"}},
            {
                "index": {
                    "_id": "c-\u00e9\u4e2d",
                    "status": 400,
                    "error": {"type": "mapper_parsing_exception", "reason": 'a "quote"'},
                }
            },
        ],
        "score": 1.5e-7,
        "none": None,
    }
)


def test_every_client_reads_answers_with_the_fast_serializer() -> None:
    client = new_client("http://localhost:9200")
    assert isinstance(client.transport.serializer, FastLoads)
    assert isinstance(client.transport.deserializer.serializers["application/json"], FastLoads)


def test_answers_read_as_the_standard_library_reads_them() -> None:
    assert FastLoads().loads(BULK_ANSWER) == JSONSerializer().loads(BULK_ANSWER)


def test_an_answer_orjson_refuses_is_read_by_the_standard_library() -> None:
    read = FastLoads().loads('{"score": NaN, "n": 1}')  # not JSON, but Python's reads it
    assert read["n"] == 1 and math.isnan(read["score"])


def test_every_integer_govindex_stores_is_read_exactly() -> None:
    # SimHash is a signed 64-bit integer; orjson reads past 64 bits as a float.
    for value in (-(2**63), 2**63 - 1, 2**64 - 1):
        assert FastLoads().loads(f'{{"simhash": {value}}}') == {"simhash": value}
