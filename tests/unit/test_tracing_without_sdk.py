"""Without an OpenTelemetry SDK no span is opened per event emitted, and the events carry
what they carried with one opened: a derived event its cause's trace context, a first
event a trace of its own.

In a process of its own: a tracer provider, once set, stays set for the process (the
other tracing tests set one).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json
    from opentelemetry import trace
    from govindex.core import tracing

    cause = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
             "tracestate": "vendor=opaque"}
    assert not tracing._recording(), type(trace.get_tracer_provider())
    fast = [tracing.trace_extensions(cause), tracing.trace_extensions(None)]
    tracing._recording = lambda: True  # the span opened as before, with no SDK to record it
    spanned = [tracing.trace_extensions(cause), tracing.trace_extensions(None)]
    print(json.dumps({"cause": cause, "fast": fast, "spanned": spanned}))
    """
)


def test_without_an_sdk_an_event_carries_what_a_span_would_have_given_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    (child, first), (spanned_child, spanned_first) = seen["fast"], seen["spanned"]
    assert child == spanned_child == seen["cause"]  # a child carries its parent's ids
    trace_id = first["traceparent"].split("-")[1]
    assert len(trace_id) == 32 and set(first) == set(spanned_first) == {"traceparent"}
    assert first["traceparent"] != spanned_first["traceparent"]  # each a new trace
