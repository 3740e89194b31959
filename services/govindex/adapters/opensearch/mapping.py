"""The chunk mapping every generation is created with (the index template's)."""

from __future__ import annotations

from typing import Any

_KEYWORD = {"type": "keyword"}
_DATE = {"type": "date"}


def _stored(kind: str) -> dict[str, Any]:
    """A field kept in `_source` (every stamp travels with its chunk) but not indexed:
    nothing queries it in OpenSearch (readers hydrate from Postgres), and each indexed
    field costs every bulk write (on the embedded server, 2.5x the bulk rate)."""
    if kind == "text":
        return {"type": "text", "index": False}
    return {"type": kind, "index": False, "doc_values": False}


MAPPING: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        # Indexed: what reads, purges, sweeps and operators filter or match on.
        "chunk_id": _KEYWORD,
        "version_id": _KEYWORD,
        "tenant_id": _KEYWORD,
        "source_id": _KEYWORD,
        "doc_id": _KEYWORD,
        "sequence": {"type": "long"},
        "version_sequence": {"type": "long"},
        "content_hash": _KEYWORD,
        "text": {"type": "text"},
        "valid_from": _DATE,
        "valid_to": _DATE,
        "event_time": _DATE,
        "superseded_at": _DATE,
        "acl": _KEYWORD,
        "required_scopes": _KEYWORD,
        "allowed_purposes": _KEYWORD,
        "classification": _KEYWORD,
        "heading_path": {"type": "text", "fields": {"raw": _KEYWORD}},
        "labels": _KEYWORD,
        "evidence": _KEYWORD,
        "kind": _KEYWORD,
        "trust_level": _KEYWORD,
        "index_generation": {"type": "integer"},
        # Stored only.
        "source_version": _stored("keyword"),
        "recorded_at": _stored("date"),
        "observed_at": _stored("date"),
        "indexed_at": _stored("date"),
        "parser": _stored("keyword"),
        "parser_version": _stored("keyword"),
        "locator": _stored("keyword"),
        "char_start": _stored("integer"),
        "char_end": _stored("integer"),
        "line_start": _stored("integer"),
        "line_end": _stored("integer"),
        "context": _stored("text"),
        "parent_id": _stored("keyword"),
        "prev_id": _stored("keyword"),
        "next_id": _stored("keyword"),
        "ordinal": _stored("integer"),
        "contains_instructions": _stored("boolean"),
        "token_estimate": _stored("integer"),
        "simhash": _stored("long"),
    },
}
