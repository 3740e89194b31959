"""Builders of manifests and events with test defaults."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import UTC, datetime
from typing import Any

from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex
from govindex.core.ports import TombstonePlan, VersionPlan
from govindex.core.records import SourceManifest
from indexer.handlers import plan_version


def manifest(source_id: str, tenant: str, **overrides: Any) -> SourceManifest:
    fields: dict[str, Any] = {
        "source_id": source_id,
        "tenant": tenant,
        "source_type": "git",
        "owner_team": "platform",
        "classification": "internal",
        "default_acl": ["group:eng"],
        "allowed_purposes": ["support"],
        "trust_level": "authoritative",
    }
    fields.update(overrides)
    return SourceManifest.model_validate(fields)


def change_payload(
    tenant: str,
    source: str,
    doc_id: str,
    sequence: int,
    text: str,
    *,
    acl: list[str] | None = None,
    observed_at: datetime | None = None,
) -> DocumentChanged:
    return DocumentChanged(
        tenant_id=tenant,
        source_id=source,
        doc_id=doc_id,
        source_version=f"v{sequence}",
        sequence=sequence,
        observed_at=observed_at or datetime.now(UTC),
        content_hash=sha256_hex(text),
        content=text,
        path=doc_id,
        acl=acl,
    )


def version_plan(
    m: SourceManifest,
    doc_id: str,
    sequence: int,
    text: str,
    *,
    acl: list[str] | None = None,
    generation: int = 1,
) -> VersionPlan:
    """A new version as the indexer plans it: parsed, chunked and stamped."""
    payload = change_payload(m.tenant, m.source_id, doc_id, sequence, text, acl=acl)
    return plan_version(payload, text, m, generation=generation, now=datetime.now(UTC))


def tombstone_plan(m: SourceManifest, doc_id: str, sequence: int) -> TombstonePlan:
    now = datetime.now(UTC)
    return TombstonePlan(
        tenant_id=m.tenant,
        source_id=m.source_id,
        doc_id=doc_id,
        sequence=sequence,
        event_id=f"delete-{doc_id}-{sequence}",
        source_version=f"del{sequence}",
        reason="deleted_in_source",
        deletion_mode=m.deletion_mode.value,
        deleted_at=now,
        recorded_at=now,
    )


def csv_text(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


TEXT = "# Failover\nPromote the replica.\n## Rollback\nDemote it again.\n"
OTHER = "# Failover\nPromote the standby with the new tool.\n"


def unique(prefix: str) -> str:
    """A name no other test uses (tests share the servers, never their data)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# The fields every test manifest shares, as YAML a person would write.
MANIFEST_YAML = """\
tenant: acme
owner_team: platform
classification: internal
default_acl: ["group:eng"]
allowed_purposes: [support]
trust_level: authoritative
deletion_mode: tombstone_and_purge
"""
