"""Pack manifests: pins, the canonical hash, and what verification decides (pure)."""

from __future__ import annotations

import hashlib
import json

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
    "valid_time": "validity changed: no longer valid at as_of",
    "system_time": "not held at known_at",
    "integrity": "content changed",
    "trust": "now flagged as untrusted instructions",
}


def judge_pin(pin: Pin, key: str, facts: ChunkFacts | None, access: ReadAccess) -> PinVerdict:
    """valid, stale (superseded since) or invalid (deleted, revoked, withdrawn, changed,
    backdated away), with the reason; never with text."""
    if facts is None:
        return PinVerdict(chunk_id=pin.chunk_id, key=key, status="invalid", reason="deleted")
    refused = refusal(facts, access)
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
    if facts.superseded or facts.chunk.version_id != pin.version_id:
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
