"""W3C trace context carried in the CloudEvents distributed-tracing extension.

Every event govindex emits carries `traceparent` (and `tracestate` when there is one), a
binary-mode `ce_traceparent` header on Kafka. A connector's event starts a trace, or joins
the caller's current span; every event derived from another (an indexed receipt, the
tombstone forwarded to the purger, a purge receipt, a revocation) is a child of the event
that caused it; consumers open their spans under it. So one change is one trace from the
connector through the indexer, the outbox and the purger.

Only the OpenTelemetry API is used: without an SDK, spans record nothing and the context
still travels (a child carries its parent's ids); with one (configured by the deployment,
e.g. `opentelemetry-instrument` and an OTLP exporter), the spans are exported.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_propagator = TraceContextTextMapPropagator()
_tracer = trace.get_tracer("govindex")
_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)  # what the API installs


def context_of(extensions: Mapping[str, Any]) -> otel_context.Context:
    """The trace context an event carries (an empty one when it carries none)."""
    carrier = {k: str(extensions[k]) for k in (TRACEPARENT, TRACESTATE) if extensions.get(k)}
    return _propagator.extract(carrier)


def trace_id(extensions: Mapping[str, Any]) -> str | None:
    """The event's trace id (32 hex digits), for logs; None when it carries none."""
    found = trace.get_current_span(context_of(extensions)).get_span_context()
    return trace.format_trace_id(found.trace_id) if found.is_valid else None


def _inject(ctx: otel_context.Context | None) -> dict[str, str]:
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=ctx)
    return carrier


def trace_extensions(
    cause: Mapping[str, Any] | None = None, name: str = "govindex emit"
) -> dict[str, str]:
    """The trace attributes an event carries: a child of `cause` (the attributes of the
    event that caused it), else of the current span, else a new trace."""
    parent = context_of(cause) if cause is not None else otel_context.get_current()
    if _recording():
        with _tracer.start_as_current_span(name, context=parent, kind=SpanKind.PRODUCER) as s:
            if s.get_span_context().is_valid:
                return _inject(None)
    if trace.get_current_span(parent).get_span_context().is_valid:
        return _inject(parent)  # a parent to carry on, but no SDK to make a child
    # Nothing to join and nothing recording: a new trace, so the change is still one trace.
    return {TRACEPARENT: f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"}


def _recording() -> bool:
    """Whether an SDK is installed. Without one a span is the parent's context again (a
    non-recording span carries its parent's ids), so the parent is injected as it is: the
    same attributes, without opening and closing a span for every event emitted (4 of the
    10 µs an event's trace attributes took)."""
    return not isinstance(trace.get_tracer_provider(), _NO_SDK)


@contextmanager
def consuming(consumer: str, extensions: Sequence[Mapping[str, Any]]) -> Iterator[trace.Span]:
    """The span of a consumer handling events: the child of one event's context, or, for a
    batch, a span linked to every event's context (OpenTelemetry's batch-consumer shape)."""
    contexts = [context_of(x) for x in extensions]
    if len(contexts) == 1:
        with _tracer.start_as_current_span(
            f"{consumer} process", context=contexts[0], kind=SpanKind.CONSUMER
        ) as span:
            yield span
        return
    links = [
        Link(found)
        for ctx in contexts
        if (found := trace.get_current_span(ctx).get_span_context()).is_valid
    ]
    with _tracer.start_as_current_span(
        f"{consumer} process",
        kind=SpanKind.CONSUMER,
        links=links,
        attributes={"messaging.batch.message_count": len(contexts)},
    ) as span:
        yield span
