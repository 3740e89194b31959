"""Invariants 1 and 2 as a property: any delivery order, with duplicates, converges.

Runs the indexer's handler against real Postgres and OpenSearch (no broker needed): the
order guard lives in the sinks, not in the transport.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from govindex.adapters.opensearch import OpenSearchIndex
from govindex.control.bootstrap import prepare
from govindex.core import events
from govindex.core.envelope import decode, encode
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from indexer.app import indexer_ports
from indexer.handlers import index_document
from tests.support.builders import manifest

pytestmark = pytest.mark.integration

TEXTS = ["# A\nalpha one\n", "# B\nbravo two\n## B2\nmore\n", "# C\ncharlie\n"]
counter = itertools.count()

histories = st.lists(
    st.tuples(st.sampled_from(["change", "change", "delete"]), st.integers(0, 2)),
    min_size=1,
    max_size=6,
)


def record(kind: str, seq: int, text_index: int, doc: str) -> Any:
    base = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=seq)
    if kind == "delete":
        payload: Any = DocumentDeleted(
            tenant_id="prop",
            source_id="prop",
            doc_id=doc,
            source_version=f"d{seq}",
            sequence=seq,
            deleted_at=base,
        )
        etype = events.DOCUMENT_DELETED
    else:
        text = TEXTS[text_index]
        payload = DocumentChanged(
            tenant_id="prop",
            source_id="prop",
            doc_id=doc,
            source_version=f"v{seq}",
            sequence=seq,
            observed_at=base,
            content_hash=sha256_hex(text),
            content=text,
        )
        etype = events.DOCUMENT_UPDATED
    rec = encode(
        event_type=etype,
        event_id=f"{doc}-{seq}",
        tenant_id="prop",
        source_id="prop",
        subject=doc,
        key=payload.key,
        payload=payload,
    )
    return decode(rec.key, rec.value, rec.headers)


@pytest.fixture
def runner(settings: Settings) -> Any:
    with asyncio.Runner() as r:
        yield r


def test_any_delivery_order_with_duplicates_ends_in_the_state_of_the_highest_sequence(
    settings: Settings,
    runner: asyncio.Runner,
) -> None:
    generation = runner.run(prepare(settings))
    rt = runner.run(Runtime(settings).__aenter__())
    pool, index = rt.pool, rt.index
    runner.run(rt.registry.register(manifest("prop", "prop")))
    ports = indexer_ports(rt, generation)

    @settings_(
        max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(history=histories, data=st.data())
    def check(history: list[tuple[str, int]], data: st.DataObject) -> None:
        doc = f"doc-{next(counter)}.md"
        envelopes = [record(kind, seq, ti, doc) for seq, (kind, ti) in enumerate(history, start=1)]
        deliveries = data.draw(
            st.permutations(envelopes + data.draw(st.lists(st.sampled_from(envelopes), max_size=3)))
        )
        for envelope in deliveries:
            runner.run(index_document(envelope, ports))
        last_kind, last_text = history[-1]
        current = runner.run(_current(pool, doc))
        if last_kind == "delete":
            assert current == []
        else:
            assert "".join(current) == TEXTS[last_text]
        runner.run(index.refresh())
        projected = runner.run(_projected(index, doc))
        assert sorted(projected) == sorted(current)

    try:
        check()
    finally:
        runner.run(rt.__aexit__(None, None, None))


settings_ = settings


async def _current(pool: Any, doc: str) -> list[str]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT text FROM chunks WHERE doc_id = %s AND superseded_at IS NULL ORDER BY ordinal",
            (doc,),
        )
        return [row[0] for row in await cur.fetchall()]


async def _projected(index: OpenSearchIndex, doc: str) -> list[str]:
    response = await index._client.search(  # the adapter's client: read-back only
        index=index.alias,
        body={
            "size": 100,
            "query": {
                "bool": {
                    "filter": [{"term": {"doc_id": doc}}],
                    "must_not": [{"exists": {"field": "superseded_at"}}],
                }
            },
        },
    )
    return [hit["_source"]["text"] for hit in response["hits"]["hits"]]
