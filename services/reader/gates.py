"""The gates every candidate passes, in order, on one Postgres snapshot (pure).

Each channel already filters by the same rules inside its query; this re-check runs on the
facts read in the request's snapshot, adds integrity, and names the first gate that refuses.
A refusal by tenant, ACL, scope or purpose is *confidential*: nothing about that candidate
(id, locator, count or trace line) may reach the caller.
"""

from __future__ import annotations

from typing import Literal, get_args

from govindex.core.hashing import sha256_hex
from govindex.core.ports import ChunkFacts, ReadAccess
from govindex.core.records import TrustLevel

Gate = Literal[
    "tenant",
    "acl",
    "scope",
    "purpose",
    "valid_time",
    "system_time",
    "deletion",
    "integrity",
    "trust",
]
GATES: tuple[Gate, ...] = get_args(Gate)
CONFIDENTIAL: frozenset[Gate] = frozenset({"tenant", "acl", "scope", "purpose"})


def refusal(facts: ChunkFacts, access: ReadAccess) -> tuple[Gate, str] | None:
    """The first gate that refuses this chunk, with its reason; None if it is admitted."""
    c = facts.chunk
    if c.tenant_id != access.tenant_id:
        return "tenant", "another tenant"
    if not set(c.acl) & set(access.principals):
        return "acl", "no principal of the subject is in the ACL"
    if not set(c.required_scopes) <= set(access.scopes):
        return "scope", "a required scope is missing"
    if access.purpose not in c.allowed_purposes:
        return "purpose", "purpose not allowed"
    if c.valid_from > access.as_of or (c.valid_to is not None and c.valid_to <= access.as_of):
        return "valid_time", "not valid at as_of"
    if access.known_at is not None and (
        c.recorded_at > access.known_at
        or (c.superseded_at is not None and c.superseded_at <= access.known_at)
    ):
        return "system_time", "not held by the index at known_at"
    if facts.purge_tombstoned:
        return "deletion", "deleted (purge mode): hidden at every as_of"
    if not facts.source_enabled:
        return "deletion", "source disabled"
    if facts.content_purged:
        return "deletion", "content purged"
    if sha256_hex(c.text) != c.content_hash:
        return "integrity", "stored text does not match its content hash"
    if c.contains_instructions and c.trust_level != TrustLevel.AUTHORITATIVE.value:
        return "trust", "instruction-bearing text from a non-authoritative source"
    return None


def admitted(facts: ChunkFacts, access: ReadAccess) -> bool:
    return refusal(facts, access) is None
