"""Dead letters: the original record, untouched, with the reason in headers."""

from __future__ import annotations

from govindex.core.deadletters import CONSUMER_HEADER, ERROR_HEADER, ORIGIN_HEADER, REASON_HEADER
from govindex.core.envelope import Delivery, KafkaRecord
from govindex.core.errors import PermanentError


def dead_letter(delivery: Delivery, error: PermanentError, consumer: str) -> KafkaRecord:
    """The record to put on the dead-letter topic: same key, value and headers, plus why."""
    headers = [(k, v) for k, v in delivery.headers if not k.startswith("govindex-dlq-")]
    headers += [
        (REASON_HEADER, error.reason.encode()),
        (ERROR_HEADER, str(error).encode()[:4000]),
        (CONSUMER_HEADER, consumer.encode()),
        (ORIGIN_HEADER, delivery.origin.encode()),
    ]
    return KafkaRecord(key=delivery.key, value=delivery.value or b"", headers=headers)
