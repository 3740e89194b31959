"""Dead letters as an operator sees them: why, from where, how often redriven.

A dead letter is the original record, untouched, with headers saying why it failed, which
consumer failed it and where it came from. A redrive publishes it to its origin topic again
with its redrive count; a record redriven `MAX_REDRIVES` times that failed once more goes
to the quarantine topic instead of looping.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from govindex.core.envelope import TopicRecord

REASON_HEADER = "govindex-dlq-reason"
ERROR_HEADER = "govindex-dlq-error"
CONSUMER_HEADER = "govindex-dlq-consumer"
ORIGIN_HEADER = "govindex-dlq-origin"
REDRIVES_HEADER = "govindex-redrives"  # not dlq-prefixed: it survives the next dead-lettering
JOB_HEADER = "govindex-job"
MAX_REDRIVES = 3

Action = Literal["redrive", "quarantine", "skip"]


@dataclass(frozen=True)
class DeadLetter(TopicRecord):
    """One record of the dead-letter topic."""

    @classmethod
    def of(cls, record: TopicRecord) -> DeadLetter:
        return cls(**vars(record))

    def header(self, name: str) -> str:
        for key, value in self.headers:
            if key == name:
                return value.decode(errors="replace")
        return ""

    @property
    def position(self) -> str:
        return f"{self.partition}:{self.offset}"

    @property
    def at(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ms / 1000, UTC)

    @property
    def reason(self) -> str:
        return self.header(REASON_HEADER)

    @property
    def error(self) -> str:
        return self.header(ERROR_HEADER)

    @property
    def consumer(self) -> str:
        return self.header(CONSUMER_HEADER)

    @property
    def origin_topic(self) -> str:
        """The topic the record was consumed from (origin is `topic/partition/offset`)."""
        return self.header(ORIGIN_HEADER).rsplit("/", 2)[0]

    @property
    def redrives(self) -> int:
        raw = self.header(REDRIVES_HEADER)
        return int(raw) if raw.isdigit() else 0

    @property
    def event_id(self) -> str:
        """The CloudEvent id: a binary-mode header, or inside a structured-mode value."""
        found = self.header("ce_id")
        if found or not self.value:
            return found
        try:
            data = json.loads(self.value)
        except (ValueError, RecursionError):
            return ""
        return str(data.get("id", "")) if isinstance(data, dict) else ""


@dataclass(frozen=True)
class Filter:
    reason: str | None = None
    consumer: str | None = None
    since: datetime | None = None

    def admits(self, letter: DeadLetter) -> bool:
        return (
            (self.reason is None or letter.reason == self.reason)
            and (self.consumer is None or letter.consumer == self.consumer)
            and (self.since is None or letter.at >= self.since)
        )


def plan(letter: DeadLetter) -> tuple[Action, str]:
    """What a redrive does with a dead letter, and why."""
    if not letter.origin_topic or not letter.consumer:
        return "skip", "no origin or consumer header: not a govindex dead letter"
    if letter.key is not None:
        try:
            letter.key.decode()
        except UnicodeDecodeError:
            return "quarantine", "its key is not UTF-8; it cannot be re-published by key"
    if letter.redrives >= MAX_REDRIVES:
        return "quarantine", f"failed again after {letter.redrives} redrives"
    return "redrive", f"redrive {letter.redrives + 1} of {MAX_REDRIVES}"


def redriven(letter: DeadLetter, job_id: int) -> list[tuple[str, bytes]]:
    """The headers a redriven record carries: the original ones, one more redrive, the job."""
    kept = [
        (k, v)
        for k, v in letter.headers
        if not k.startswith("govindex-dlq-") and k not in (REDRIVES_HEADER, JOB_HEADER)
    ]
    return [
        *kept,
        (REDRIVES_HEADER, str(letter.redrives + 1).encode()),
        (JOB_HEADER, str(job_id).encode()),
    ]
