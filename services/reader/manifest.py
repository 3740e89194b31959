"""Pack manifests: pins, the canonical hash, and what verification decides (pure)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from govindex.core.links import source_url
from govindex.core.ports import ChunkFacts, ReadAccess
from govindex.core.records import Chunk
from reader.gates import refusal
from reader.models import Anchor, Manifest, Pin, PinVerdict, Verdict


def anchor_of(c: Chunk) -> Anchor:
    return Anchor(
        chunk_id=c.chunk_id,
        tenant=c.tenant_id,
        source_id=c.source_id,
        doc_id=c.doc_id,
        version_id=c.version_id,
        sequence=c.sequence,
        source_version=c.source_version,
        content_hash=c.content_hash,
        locator=c.locator,
        heading_path=list(c.heading_path),
        char_start=c.char_start,
        char_end=c.char_end,
        line_start=c.line_start,
        line_end=c.line_end,
    )


def described(facts: ChunkFacts) -> dict[str, Any]:
    """What a hit, pack item, hydrated chunk or chunk view says the chunk is (`Described`)."""
    c = facts.chunk
    return {
        "kind": c.kind,
        "title": facts.title,
        "valid_from": c.valid_from,
        "valid_to": c.valid_to,
        "observed_at": c.observed_at,
        "recorded_at": c.recorded_at,
        "event_time": c.event_time,
        "trust_level": c.trust_level,
        "classification": c.classification,
        "labels": list(c.labels),
        "evidence": list(c.evidence),
        "stale_source": facts.stale_source,
        "source_url": source_url(
            facts.web_url,
            doc_id=c.doc_id,
            source_version=c.source_version,
            line_start=c.line_start,
            line_end=c.line_end,
        ),
    }


def pin_from_anchor(a: Anchor) -> Pin:
    return Pin(
        chunk_id=a.chunk_id,
        doc=f"{a.tenant}/{a.source_id}/{a.doc_id}",
        version_id=a.version_id,
        sequence=a.sequence,
        source_version=a.source_version,
        content_hash=a.content_hash,
    )


def pack_hash(manifest: Manifest) -> str:
    """sha256 over the canonical JSON (sorted keys, no spaces) of all fields but the hash."""
    body = manifest.model_dump(mode="json", exclude={"pack_hash"})
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


# What a refusal by each gate means for a pinned chunk, checked later.
_INVALID = {
    "tenant": "tenant changed",
    "acl": "access revoked",
    "scope": "scope withdrawn",
    "purpose": "purpose withdrawn",
    "system_time": "not held at known_at",
    "integrity": "content changed",
    "trust": "now flagged as untrusted instructions",
}


def is_past(manifest: Manifest) -> bool:
    """A pack about a fixed past moment: its as_of is before the moment it was built. A pack
    asked "as of now" has as_of = built_at; a version 1 manifest has no build time and is
    judged as one asked as of now."""
    return manifest.built_at is not None and manifest.as_of < manifest.built_at


def judge_pin(
    pin: Pin, key: str, facts: ChunkFacts | None, access: ReadAccess, *, past: bool = False
) -> PinVerdict:
    """valid, stale or invalid, with the reason; never with text. Judged at the pack's own
    as_of: deleted, revoked, withdrawn or changed content is invalid whenever the pack was
    built for. A pack about a past as_of stays valid while each pin is still the version
    admissible at that as_of (a newer version recorded later does not matter); it becomes
    stale when a correction moves the pin's validity off that as_of. A pack asked as of now
    becomes stale once a newer version of a pinned document lands."""
    if facts is None:
        return PinVerdict(chunk_id=pin.chunk_id, key=key, status="invalid", reason="deleted")
    refused = refusal(facts, access)
    moved = refused is not None and refused[0] == "valid_time"
    if moved:  # judged again at a moment it holds: a deletion or a revocation outranks it
        refused = refusal(facts, replace(access, as_of=facts.chunk.valid_from))
    if refused is not None:
        gate, why = refused
        reason = why if gate == "deletion" else _INVALID[gate]
        return PinVerdict(chunk_id=pin.chunk_id, key=key, status="invalid", reason=reason)
    if facts.chunk.content_hash != pin.content_hash:
        return PinVerdict(
            chunk_id=pin.chunk_id, key=key, status="invalid", reason="content changed"
        )
    if facts.tombstoned:
        return PinVerdict(chunk_id=pin.chunk_id, key=key, status="invalid", reason="deleted")
    if moved:
        reason = "no longer valid at as_of: another version holds then"
        return PinVerdict(chunk_id=pin.chunk_id, key=key, status="stale", reason=reason)
    if facts.chunk.version_id != pin.version_id or (facts.superseded and not past):
        return PinVerdict(
            chunk_id=pin.chunk_id, key=key, status="stale", reason="superseded by a newer version"
        )
    return PinVerdict(chunk_id=pin.chunk_id, key=key, status="valid")


def overall(verdicts: list[PinVerdict], hash_ok: bool) -> Verdict:
    if not hash_ok:
        return "tampered"
    if any(v.status == "invalid" for v in verdicts):
        return "invalid"
    if any(v.status == "stale" for v in verdicts):
        return "stale"
    return "valid"


def pins(manifest: Manifest) -> list[tuple[Pin, str]]:
    """Every pinned chunk with the key of the item it belongs to."""
    found: list[tuple[Pin, str]] = []
    for item in manifest.items:
        found.append((item, item.key))
        found += [(h, item.key) for h in item.hydrated]
    return found
