"""An index generation created by an older release learns new fields at start-up."""

from __future__ import annotations

from typing import Any

import pytest
from opensearchpy import OpenSearch

from govindex.adapters.opensearch import MAPPING, OpenSearchIndex
from govindex.core.settings import Settings

pytestmark = pytest.mark.integration


async def test_an_older_generation_gets_the_new_fields_without_a_rebuild(
    settings: Settings,
) -> None:
    assert settings.opensearch_url
    index = OpenSearchIndex(settings.opensearch_url, settings.index_alias)
    # The older release indexed every field and had neither labels nor context.
    old: dict[str, Any] = {
        **MAPPING,
        "properties": {
            k: {p: x for p, x in v.items() if p not in ("index", "doc_values")}
            for k, v in MAPPING["properties"].items()
            if k not in ("labels", "context")
        },
    }
    client = OpenSearch(hosts=[settings.opensearch_url])
    client.indices.create(index=index.index_name(1), body={"mappings": old})
    await index.point_alias(1)
    try:
        await index.ensure_template()
        fields = client.indices.get_mapping(index=index.index_name(1))
        props = fields[index.index_name(1)]["mappings"]["properties"]
        assert props["labels"] == {"type": "keyword"}
        assert props["context"] == {"type": "text", "index": False}
        assert props["locator"] == {"type": "keyword"}  # unchanged in place
        client.index(index=settings.index_alias, id="x", body={"labels": ["step:1"]})
    finally:
        client.close()
        await index.close()
