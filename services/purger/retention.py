"""History retention: superseded versions older than the source's `history_retention` lose
their content in every sink; current versions are never touched."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import structlog

from govindex.core.events import document_key
from govindex.core.ports import Lineage, RetentionStore, SearchIndex, TaggedCache
from govindex.core.records import SourceManifest

log = structlog.get_logger(__name__)


@dataclass
class RetentionReport:
    versions: list[str] = field(default_factory=list)
    chunks: int = 0
    cache_entries: int = 0
    summaries: int = 0


async def enforce_retention(
    manifests: list[SourceManifest],
    *,
    store: RetentionStore,
    index: SearchIndex,
    lineage: Lineage,
    cache: TaggedCache | None,
    now: datetime,
) -> RetentionReport:
    """Postgres first (the gate), then every OpenSearch generation, caches and summaries."""
    report = RetentionReport()
    for manifest in manifests:
        cutoff = now - manifest.history_retention
        for version in await store.expired_versions(manifest.tenant, manifest.source_id, cutoff):
            key = document_key(manifest.tenant, manifest.source_id, version.doc_id)
            receipt = {
                "kind": "retention",
                "superseded_at": version.superseded_at.isoformat(),
                "history_retention": str(manifest.history_retention),
                "purged_at": now.isoformat(),
            }
            chunk_ids = await store.purge_version(version.version_id, receipt)
            await index.delete_chunks(chunk_ids)
            if cache is not None:
                report.cache_entries += await cache.evict_chunks(chunk_ids)
            # Only what was built from this version's chunks goes; a summary of the whole
            # document describes its current version, which stays.
            invalidated = await lineage.invalidate(
                manifest.tenant,
                key,
                chunk_ids,
                f"version of {key} past history retention",
                whole_document=False,
            )
            report.summaries += len(invalidated)
            report.versions.append(f"{key}@{version.version_sequence}")
            report.chunks += len(chunk_ids)
            log.info(
                "retention.purged",
                doc_key=key,
                version=version.version_sequence,
                chunks=len(chunk_ids),
            )
    return report
