"""CloudEvents 1.0 over Kafka, through the cloudevents SDK: the only module that touches it.

We produce binary content mode (`ce_*` headers, JSON body) and accept binary and structured
mode, since any CloudEvents producer may send either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast, overload

from cloudevents.core.bindings import kafka as ce_kafka
from cloudevents.core.v1.event import CloudEvent
from pydantic import BaseModel, ValidationError

from govindex.core import events
from govindex.core.errors import InvalidEvent
from govindex.core.tracing import TRACEPARENT, trace_extensions

SOURCE_URI_PREFIX = "/govindex/sources"


@dataclass(frozen=True)
class Envelope:
    """A decoded CloudEvent: its attributes and its JSON data."""

    id: str
    type: str
    source: str
    subject: str | None
    time: datetime | None
    extensions: dict[str, Any]
    data: dict[str, Any]


@dataclass(frozen=True)
class KafkaRecord:
    """What goes onto (or comes off) a Kafka topic."""

    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclass(frozen=True)
class Delivery:
    """A record as it came off a topic, with where it came from."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]

    @property
    def origin(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"


@dataclass(frozen=True)
class TopicRecord:
    """A record read back from a topic by an operator tool (no consumer group)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def encode(
    *,
    event_type: str,
    event_id: str,
    tenant_id: str,
    source_id: str,
    subject: str,
    key: str,
    payload: BaseModel,
    time: datetime | None = None,
    extensions: dict[str, str | int] | None = None,
    cause: Mapping[str, Any] | None = None,
) -> KafkaRecord:
    """Build a binary-mode CloudEvent for `payload`, keyed by `key` (docs/design/events.md).

    It carries W3C trace context (core.tracing): a child of `cause`, the attributes of the
    event that caused it, else of the current span, else a new trace."""
    attributes: dict[str, Any] = {
        "id": event_id,
        "type": event_type,
        "source": f"{SOURCE_URI_PREFIX}/{tenant_id}/{source_id}",
        "subject": subject,
        "time": time or datetime.now(UTC),
        "datacontenttype": "application/json",
        "tenantid": tenant_id,
        "partitionkey": key,
    }
    for name, value in (extensions or {}).items():
        attributes[name] = str(value)
    if TRACEPARENT not in attributes:
        attributes.update(trace_extensions(cause))
    event = CloudEvent(attributes=attributes, data=payload.model_dump(mode="json"))
    message = ce_kafka.to_binary_event(event)
    return KafkaRecord(
        key=key.encode(),
        value=message.value,
        headers=[(name, value) for name, value in message.headers.items()],
    )


def decode(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> Envelope:
    """Decode a binary- or structured-mode CloudEvent; raise InvalidEvent saying why not."""
    if value is None:
        raise InvalidEvent(
            "the record has no value (a bare Kafka tombstone); send document.deleted.v1 instead"
        )
    header_map = {name.lower(): header for name, header in headers}
    message = ce_kafka.KafkaMessage(headers=header_map, key=key, value=value)
    try:
        event = ce_kafka.from_kafka_event(message)
    except Exception as exc:  # the SDK raises many kinds; all mean "not a CloudEvent"
        raise InvalidEvent(f"not a valid CloudEvent: {exc}") from exc
    data = event.get_data()
    if isinstance(data, bytes | str):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested thousands deep
            raise InvalidEvent(f"event data is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidEvent("event data must be a JSON object")
    attributes = event.get_attributes()
    standard = {
        "id",
        "type",
        "source",
        "subject",
        "time",
        "specversion",
        "datacontenttype",
        "dataschema",
        "data",
    }
    return Envelope(
        id=event.get_id(),
        type=event.get_type(),
        source=event.get_source(),
        subject=event.get_subject(),
        time=event.get_time(),
        extensions={k: v for k, v in attributes.items() if k not in standard},
        data=data,
    )


class DocumentIdentity(Protocol):
    tenant_id: str
    source_id: str
    doc_id: str
    source_version: str
    sequence: int

    @property
    def key(self) -> str: ...


def encode_document_event(
    event_type: str,
    payload: BaseModel,
    *,
    op: str,
    time: datetime | None = None,
    event_id: str | None = None,
    extensions: dict[str, str | int] | None = None,
    cause: Mapping[str, Any] | None = None,
) -> KafkaRecord:
    """Encode an event about one document, keyed and identified by the document.

    The id defaults to the deterministic id of (document, source_version, op); extensions
    always carry the sequence and source version.
    """
    doc = cast(DocumentIdentity, payload)
    return encode(
        event_type=event_type,
        event_id=event_id
        or events.event_id(doc.tenant_id, doc.source_id, doc.doc_id, doc.source_version, op),
        tenant_id=doc.tenant_id,
        source_id=doc.source_id,
        subject=doc.doc_id,
        key=doc.key,
        payload=payload,
        time=time,
        extensions={
            "sequence": doc.sequence,
            "sourceversion": doc.source_version,
            **(extensions or {}),
        },
        cause=cause,
    )


P = TypeVar("P", bound=BaseModel)


def validate_data(model: type[P], envelope: Envelope) -> P:
    """The event's data as `model`; InvalidEvent names every field that is wrong."""
    try:
        return model.model_validate(envelope.data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'data'}: {err['msg']}"
            for err in exc.errors()
        )
        raise InvalidEvent(f"{envelope.type} payload is invalid: {problems}") from exc


@overload
def parse_payload(envelope: Envelope) -> events.DocumentChanged | events.DocumentDeleted: ...


@overload
def parse_payload(envelope: Envelope, accept: frozenset[str]) -> BaseModel: ...


def parse_payload(
    envelope: Envelope, accept: frozenset[str] = events.DOCUMENT_EVENT_TYPES
) -> BaseModel:
    """Validate an event's type (one of `accept`, the document events by default) and data.

    For events about a document, the `tenantid` and `sequence` extensions must agree with
    the data: a router or filter that reads only headers must see the truth.
    """
    if envelope.type not in accept:
        raise InvalidEvent(
            f"unknown event type {envelope.type!r}; expected one of {', '.join(sorted(accept))}"
        )
    payload = validate_data(events.EVENT_MODELS[envelope.type], envelope)
    if isinstance(payload, events.DocumentPayload):
        tenant = envelope.extensions.get("tenantid")
        if tenant is not None and str(tenant) != payload.tenant_id:
            raise InvalidEvent(
                f"tenantid extension {tenant!r} does not match payload tenant_id "
                f"{payload.tenant_id!r}"
            )
        sequence = envelope.extensions.get("sequence")
        if sequence is not None and str(sequence) != str(payload.sequence):
            raise InvalidEvent(
                f"sequence extension {sequence!r} does not match payload sequence "
                f"{payload.sequence}"
            )
    return payload
