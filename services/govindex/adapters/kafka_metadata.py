"""Topic metadata with topic ids (Metadata v10), which aiokafka's own request (v5) lacks:
how a broker that lost its log is told from one that kept it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

import structlog
from aiokafka import TopicPartition
from aiokafka.errors import TopicAlreadyExistsError, for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.metadata import MetadataRequest_v5
from aiokafka.protocol.types import (
    AbstractType,
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from govindex.core.errors import TransientError

log = structlog.get_logger(__name__)

# --- topic metadata with topic ids ------------------------------------------------------


class _Uuid(AbstractType):  # type: ignore[misc]  # untyped base
    """Kafka's UUID: 16 raw bytes (KIP-516 topic ids); aiokafka has no type for it."""

    @classmethod
    def encode(cls, value: bytes) -> bytes:
        return value

    @classmethod
    def decode(cls, data: Any) -> bytes:
        raw: bytes = data.read(16)
        return raw


_TAGS: Final = ("tags", TaggedFields)


class _MetadataResponseV10(Response):  # type: ignore[misc]  # untyped base
    API_KEY = 3
    API_VERSION = 10
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "brokers",
            CompactArray(
                ("node_id", Int32),
                ("host", CompactString("utf-8")),
                ("port", Int32),
                ("rack", CompactString("utf-8")),
                _TAGS,
            ),
        ),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        (
            "topics",
            CompactArray(
                ("error_code", Int16),
                ("topic", CompactString("utf-8")),
                ("topic_id", _Uuid),
                ("is_internal", Boolean),
                (
                    "partitions",
                    CompactArray(
                        ("error_code", Int16),
                        ("partition", Int32),
                        ("leader", Int32),
                        ("leader_epoch", Int32),
                        ("replicas", CompactArray(Int32)),
                        ("isr", CompactArray(Int32)),
                        ("offline_replicas", CompactArray(Int32)),
                        _TAGS,
                    ),
                ),
                ("topic_authorized_operations", Int32),
                _TAGS,
            ),
        ),
        ("cluster_authorized_operations", Int32),
        _TAGS,
    )


class _MetadataRequestV10(RequestStruct):  # type: ignore[misc]  # untyped base
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 10
    RESPONSE_TYPE = _MetadataResponseV10
    SCHEMA = Schema(
        ("topics", CompactArray(("topic_id", _Uuid), ("name", CompactString("utf-8")), _TAGS)),
        ("allow_auto_topic_creation", Boolean),
        ("include_cluster_authorized_operations", Boolean),
        ("include_topic_authorized_operations", Boolean),
        _TAGS,
    )


class _TopicMetadata(Request[MetadataRequest_v5 | _MetadataRequestV10]):  # type: ignore[misc]
    """Metadata of named topics, never creating one (a lookup must not auto-create what
    it looks for), with topic ids where the broker has them.

    aiokafka's own MetadataRequest stops at v5, before topic ids (v10, KIP-516); v10 is
    spelled here in aiokafka's protocol types and preferred when the broker speaks it."""

    API_KEY = 3

    def __init__(self, topics: list[str]) -> None:
        self._topics = topics

    def build(self, request_struct_class: type[Any]) -> Any:
        if request_struct_class.API_VERSION >= 10:
            return request_struct_class(
                [(bytes(16), name, {}) for name in self._topics], False, False, False, {}
            )
        return request_struct_class(self._topics, False)


@dataclass(frozen=True)
class Described:
    error_code: int
    topic_id: str  # "" when the broker has no topic ids (Metadata before v10)
    partitions: list[int]


async def describe_topics(client: Any, topics: list[str]) -> dict[str, Described]:
    """What the broker says of each named topic (`client`: an aiokafka client)."""
    node = client.get_random_node()
    if node is None:
        raise TransientError("no Kafka broker is known to ask for metadata")
    response = (await client.send(node, _TopicMetadata(topics))).to_object()
    found: dict[str, Described] = {}
    for entry in response["topics"]:
        raw = entry.get("topic_id")
        found[entry["topic"]] = Described(
            entry["error_code"],
            str(uuid.UUID(bytes=raw)) if raw else "",
            sorted(p["partition"] for p in entry["partitions"] or []),
        )
    return found


async def topic_partitions(client: Any, topic: str) -> list[TopicPartition]:
    entry = (await describe_topics(client, [topic])).get(topic)
    if entry is None or entry.error_code:
        return []
    return [TopicPartition(topic, p) for p in entry.partitions]


def check_created(response: Any) -> None:
    """Raise the first refusal of a CreateTopics answer; "already exists" is none: another
    process may have created the topic since we looked, which is fine."""
    for topic, code, *rest in response.topic_errors:
        error = for_code(code)
        if code and error is not TopicAlreadyExistsError:
            raise error(f"cannot create topic {topic}: {rest[0] if rest else ''}")


# --- bootstrap and self-healing ----------------------------------------------------------
