"""With an OpenTelemetry SDK installed, the spans govindex opens nest as the events do: an
event derived from another is emitted in a child span of its cause, and a batch consumer's
span links every event it handled."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from govindex.core import events, tracing
from govindex.core.envelope import Envelope, decode, encode_document_event
from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex

EXPORTED = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def sdk() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTED))
    trace.set_tracer_provider(provider)


@pytest.fixture(autouse=True)
def clean() -> None:
    EXPORTED.clear()


def change(doc: str, cause: dict[str, Any] | None = None) -> Envelope:
    body = DocumentChanged(
        tenant_id="acme",
        source_id="hb",
        doc_id=doc,
        source_version="v1",
        sequence=1,
        observed_at=datetime.now(UTC),
        content_hash=sha256_hex("x"),
        content="x",
        path=doc,
    )
    record = encode_document_event(events.DOCUMENT_CREATED, body, op="created", cause=cause)
    return decode(record.key, record.value, record.headers)


def ids(envelope: Envelope) -> tuple[str, str]:
    _, trace_id, span_id, _ = envelope.extensions["traceparent"].split("-")
    return trace_id, span_id


def test_a_derived_event_is_emitted_in_a_child_span_of_its_cause() -> None:
    first = change("a.md")
    root_trace, root_span = ids(first)
    derived = change("a.md", cause=first.extensions)
    trace_id, span_id = ids(derived)
    assert trace_id == root_trace and span_id != root_span
    emitted = {format(s.context.span_id, "016x"): s for s in EXPORTED.get_finished_spans()}
    child = emitted[span_id]
    assert child.parent is not None and format(child.parent.span_id, "016x") == root_span
    assert tracing.trace_id(derived.extensions) == root_trace


def test_a_batch_span_links_every_event_and_a_single_one_is_its_child() -> None:
    a, b = change("a.md"), change("b.md")
    with tracing.consuming("indexer", [a.extensions, b.extensions]):
        pass
    with tracing.consuming("purger", [a.extensions]):
        pass
    spans = {s.name: s for s in EXPORTED.get_finished_spans()}
    batch, single = spans["indexer process"], spans["purger process"]
    linked = {format(link.context.trace_id, "032x") for link in batch.links}
    assert linked == {ids(a)[0], ids(b)[0]}
    assert single.parent is not None and format(single.parent.span_id, "016x") == ids(a)[1]


def test_without_a_cause_or_a_span_an_event_starts_a_trace() -> None:
    one, two = change("a.md"), change("b.md")
    assert ids(one)[0] != ids(two)[0]
    assert tracing.trace_id({}) is None
