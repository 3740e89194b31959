"""Any CloudEvents producer may send binary or structured mode; both must be indexed."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from govindex.adapters.kafka import KafkaEventPublisher
from govindex.core import events
from govindex.core.envelope import KafkaRecord
from govindex.core.hashing import sha256_hex
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.e2e


def _data(p: Pipeline, doc_id: str, text: str) -> dict[str, object]:
    return {
        "tenant_id": p.tenant,
        "source_id": p.source,
        "doc_id": doc_id,
        "source_version": "v1",
        "sequence": 1,
        "observed_at": datetime.now(UTC).isoformat(),
        "content_hash": sha256_hex(text),
        "content": text,
    }


async def test_binary_and_structured_mode_events_from_a_raw_producer_are_both_indexed(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    assert p.settings.kafka_bootstrap
    binary_text, structured_text = "# Binary\nsent as headers\n", "# Structured\nsent whole\n"
    binary = KafkaRecord(
        key=f"{p.tenant}/{p.source}/binary.md".encode(),
        value=json.dumps(_data(p, "binary.md", binary_text)).encode(),
        headers=[
            ("ce_specversion", b"1.0"),
            ("ce_id", b"raw-binary-1"),
            ("ce_type", events.DOCUMENT_CREATED.encode()),
            ("ce_source", b"/some/producer"),
            ("content-type", b"application/json"),
            ("ce_tenantid", p.tenant.encode()),
            ("ce_sequence", b"1"),
        ],
    )
    structured = KafkaRecord(
        key=f"{p.tenant}/{p.source}/structured.md".encode(),
        value=json.dumps(
            {
                "specversion": "1.0",
                "id": "raw-structured-1",
                "type": events.DOCUMENT_CREATED,
                "source": "/some/producer",
                "datacontenttype": "application/json",
                "tenantid": p.tenant,
                "data": _data(p, "structured.md", structured_text),
            }
        ).encode(),
        headers=[("content-type", b"application/cloudevents+json; charset=utf-8")],
    )
    # A plain producer of its own, not the pipeline's: what any CloudEvents producer is.
    with KafkaEventPublisher(p.settings.kafka_bootstrap) as producer:
        producer.publish(p.settings.topics.documents, binary)
        producer.publish(p.settings.topics.documents, structured)
        producer.flush()
    await p.wait_processed(["raw-binary-1", "raw-structured-1"])
    texts = {row["doc_id"]: row["text"] for row in await p.pg_chunks()}
    assert texts == {"binary.md": binary_text, "structured.md": structured_text}
    await p.assert_sinks_agree()
