"""The admission predicate every read statement carries, and the parameters it binds.

Tenant, ACL, scopes, purpose, valid time, system time, deletion (a purge-mode tombstone newer
than the chunk's version, a disabled source, purged content) and trust, over `c` (chunks):
a channel only ever ranks chunks the subject may see at `as_of`.
"""

from __future__ import annotations

from typing import Any, LiteralString

from govindex.core.ports import ReadAccess, ReadFilters

# Parameters are named, so one statement can use the predicate more than once. The three
# parts: who may see it (ACCESS), when it holds (VALID_AT), and whether it is still held
# whole (HELD: system time, deletion, purge, trust).
# The scopes test is written with `= '{}'` first: PostgreSQL has no statistics for `<@`
# and guesses 0.5 % of rows, which made it read every admissible chunk and sort instead of
# walking the dense channel's HNSW index (docs/benchmarks/dense.md); the equality is
# estimated from the column's statistics. The rows admitted are the same.
ACCESS: LiteralString = """
    c.tenant_id = %(tenant)s
    AND c.acl && %(principals)s::text[]
    AND (c.required_scopes = '{}' OR c.required_scopes <@ %(scopes)s::text[])
    AND %(purpose)s = ANY (c.allowed_purposes)"""
VALID_AT: LiteralString = """
    c.valid_from <= %(as_of)s AND (c.valid_to IS NULL OR c.valid_to > %(as_of)s)"""
HELD: LiteralString = """
    AND (%(known_at)s::timestamptz IS NULL OR (c.recorded_at <= %(known_at)s
         AND (c.superseded_at IS NULL OR c.superseded_at > %(known_at)s)))
    AND EXISTS (SELECT 1 FROM sources s WHERE s.tenant_id = c.tenant_id
                AND s.source_id = c.source_id AND s.enabled)
    AND NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.tenant_id = c.tenant_id
                AND t.source_id = c.source_id AND t.doc_id = c.doc_id
                AND t.deletion_mode = 'tombstone_and_purge' AND t.sequence > c.version_sequence)
    AND EXISTS (SELECT 1 FROM document_versions v WHERE v.version_id = c.version_id
                AND v.content_purged_at IS NULL)
    AND NOT (c.contains_instructions AND c.trust_level <> 'authoritative')
"""
ADMISSIBLE: LiteralString = ACCESS + "\n    AND" + VALID_AT + HELD
# What a subject may see and the index still holds, but not valid at as_of: the versions a
# time predicate drops, found so a pack can say why they are left out (never content the
# subject may not see: ACCESS holds).
OUTSIDE_VALID_TIME: LiteralString = ACCESS + "\n    AND NOT (" + VALID_AT + ")" + HELD

# The caller's narrowing (sources, kinds, labels, a path prefix); empty means any.
FILTERED: LiteralString = """
    AND (cardinality(%(sources)s::text[]) = 0 OR c.source_id = ANY (%(sources)s::text[]))
    AND (cardinality(%(kinds)s::text[]) = 0 OR c.kind = ANY (%(kinds)s::text[]))
    AND (cardinality(%(labels)s::text[]) = 0 OR c.labels && %(labels)s::text[])
    AND (%(path_prefix)s::text IS NULL OR c.doc_id LIKE %(path_prefix)s)
    AND (%(event_from)s::timestamptz IS NULL OR c.event_time >= %(event_from)s)
    AND (%(event_to)s::timestamptz IS NULL OR c.event_time < %(event_to)s)
"""

# An edge (`e`, graph_edges) that holds at as_of and is held at known_at. Without known_at,
# an edge with its own window (a fact entry's validity fields) counts only while its
# version is current: a newer version's rows restate the history, and the old row's
# window was what it said then. Every other edge is ended by its next version, so its
# superseded copies are the valid-time history.
EDGE_HELD: LiteralString = """
    e.valid_from <= %(as_of)s AND (e.valid_to IS NULL OR e.valid_to > %(as_of)s)
    AND (CASE WHEN %(known_at)s::timestamptz IS NULL
              THEN (NOT e.own_time OR e.superseded_at IS NULL)
              ELSE e.recorded_at <= %(known_at)s
                   AND (e.superseded_at IS NULL OR e.superseded_at > %(known_at)s) END)"""

WHERE_ADMISSIBLE: LiteralString = " WHERE " + ADMISSIBLE + FILTERED
WHERE_OUTSIDE_VALID_TIME: LiteralString = " WHERE " + OUTSIDE_VALID_TIME + FILTERED


def admission_params(access: ReadAccess, filters: ReadFilters, **extra: Any) -> dict[str, Any]:
    """What ADMISSIBLE and FILTERED bind, with a statement's own parameters."""
    return {
        "tenant": access.tenant_id,
        "principals": list(access.principals),
        "scopes": list(access.scopes),
        "purpose": access.purpose,
        "as_of": access.as_of,
        "known_at": access.known_at,
        "sources": list(filters.sources),
        "kinds": list(filters.kinds),
        "labels": list(filters.labels),
        "path_prefix": _like_prefix(filters.path_prefix),
        "event_from": filters.event_from,
        "event_to": filters.event_to,
        **extra,
    }


def _like_prefix(prefix: str | None) -> str | None:
    if prefix is None:
        return None
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"
