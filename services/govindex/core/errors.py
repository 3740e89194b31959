"""The two kinds of failure the pipeline knows: transient (retry) and permanent (dead-letter)."""

from __future__ import annotations


class GovindexError(Exception):
    """Base of every error govindex raises on purpose."""


class TransientError(GovindexError):
    """A dependency is unavailable or slow; retry with backoff, never dead-letter."""


class ModelUnavailable(TransientError):
    """An embedding model cannot embed now (its service is down, slow or answering wrong):
    ingestion commits chunks without its vectors and queues them; a read answers without
    the dense channel and says so (`degraded`)."""


class PermanentError(GovindexError):
    """The input itself is wrong; dead-letter it with `reason` and move on.

    `reason` is a short machine-readable code; the message says what was wrong and what to do.
    """

    reason = "permanent_error"


class InvalidEvent(PermanentError):
    reason = "invalid_event"


class InvalidFrontmatter(InvalidEvent):
    """A document's frontmatter is refused: YAML we do not load (aliases, too deep), or a
    field of the wrong type or size. The message names the field."""

    reason = "invalid_frontmatter"


class UnknownSource(PermanentError):
    reason = "unknown_source"


class SourceDisabled(PermanentError):
    reason = "source_disabled"


class MissingAcl(PermanentError):
    reason = "missing_acl"


class ParserFailed(PermanentError):
    """A parser raised on a document: parsers are pure, so it would fail the same way on
    every redelivery (a poison pill); the document is dead-lettered instead."""

    reason = "parser_failed"


class TooLarge(PermanentError):
    """A file over an extraction limit (bytes, pages, decompressed size, text): the message
    names the limit and the figure."""

    reason = "too_large"


class ExtractionTimeout(PermanentError):
    """An extractor ran past its time limit on a file; it would on every redelivery."""

    reason = "timeout"


class Unreadable(PermanentError):
    """A file its extractor cannot read (malformed, encrypted, not what its name says): the
    message gives the library's reason."""

    reason = "unreadable"


class NoTextLayer(PermanentError):
    """A PDF with no text to extract (a scan): there is nothing to index without OCR."""

    reason = "no_text_layer"


class ContentUnavailable(PermanentError):
    reason = "content_unavailable"


class RejectedByStore(PermanentError):
    """Postgres refused the event's rows (a value it cannot store, a broken constraint)."""

    reason = "rejected_by_postgres"


class RejectedByIndex(PermanentError):
    """OpenSearch refused the event's chunks for good (a mapping rejection)."""

    reason = "rejected_by_opensearch"


class ManifestError(GovindexError):
    """A source manifest failed validation; the message names file, field and problem."""


class StackNotRunning(GovindexError):
    """No running stack was found and no server addresses were configured."""
