"""Which records a replay takes: one source's, in a time range, chosen by key and headers.

A replay scans the documents and deletions topics between the offsets of two times and
re-publishes the records it takes with the same key, value and headers plus the job that
re-published them. What it takes is decided without decoding a body: govindex keys every
document event `tenant/source/doc`, and binary-mode CloudEvents carry `ce_source`,
`ce_subject` and `ce_type` as headers. A structured-mode record (its attributes are in the
body) is matched by its key alone, so `--type` leaves it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from govindex.core import events
from govindex.core.envelope import SOURCE_URI_PREFIX, TopicRecord
from govindex.core.paths import check_patterns, selected

EventKind = Literal["created", "updated", "deleted"]
TYPES: dict[str, str] = {
    "created": events.DOCUMENT_CREATED,
    "updated": events.DOCUMENT_UPDATED,
    "deleted": events.DOCUMENT_DELETED,
}
# What a dry run predicts (and an execute foresees) for each event; see indexer.decisions.
PREDICTIONS = ("apply", "duplicate", "stale", "behind_tombstone", "dead_letter")


@dataclass(frozen=True)
class Identity:
    """Which document a record is about, as its key and headers say; type "" when unsaid."""

    tenant_id: str
    source_id: str
    doc_id: str
    type: str


def identity(record: TopicRecord) -> Identity | None:
    """Read from the headers first (binary mode), else from the key; None when neither
    says which document the record is about."""
    headers = {k.lower(): v.decode(errors="replace") for k, v in record.headers}
    source, subject = headers.get("ce_source", ""), headers.get("ce_subject", "")
    prefix, _, rest = source.rpartition("/")
    tenant = prefix.rpartition("/")[2]
    if prefix.startswith(SOURCE_URI_PREFIX + "/") and rest and subject:
        return Identity(tenant, rest, subject, headers.get("ce_type", ""))
    try:
        key = (record.key or b"").decode()
    except UnicodeDecodeError:
        return None
    parts = key.split("/", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return Identity(parts[0], parts[1], parts[2], headers.get("ce_type", ""))


@dataclass(frozen=True)
class Scope:
    """What a replay takes: one source's records (of one tenant when known), documents
    matching `docs` (gitignore syntax, as a source's include), of the given kinds."""

    source_id: str
    tenant_id: str | None = None
    docs: tuple[str, ...] = ()
    kinds: tuple[EventKind, ...] = ()

    def __post_init__(self) -> None:
        check_patterns(self.docs)

    def admits(self, record: TopicRecord) -> bool:
        found = identity(record)
        if found is None or found.source_id != self.source_id:
            return False
        if self.tenant_id is not None and found.tenant_id != self.tenant_id:
            return False
        if self.docs and not selected(found.doc_id, self.docs, ()):
            return False
        return not self.kinds or found.type in {TYPES[k] for k in self.kinds}


def replayed_headers(
    headers: Sequence[tuple[str, bytes]], job_header: str, job_id: int
) -> list[tuple[str, bytes]]:
    """A record's headers as re-published: the same, naming the job (once)."""
    return [*((k, v) for k, v in headers if k != job_header), (job_header, str(job_id).encode())]
