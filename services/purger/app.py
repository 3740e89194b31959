"""The purger's wiring: its ports and subscription from a Runtime, and its operator verbs."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

from govindex.core.ports import DocumentKey
from govindex.core.records import SourceManifest
from govindex.runtime.composition import Runtime
from govindex.runtime.subscription import Subscription, subscription
from purger.handlers import CONSUMER, PurgerPorts, on_tombstones_record
from purger.retention import RetentionReport, enforce_retention
from purger.sinks import purge_sinks
from purger.verify import Verification, verify_purge


def purger_ports(rt: Runtime) -> PurgerPorts:
    return PurgerPorts(
        store=rt.purges,
        sinks=purge_sinks(store=rt.purges, index=rt.index, cache=rt.cache, lineage=rt.lineage),
        receipts_topic=rt.settings.topics.receipts,
        cache=rt.cache,
    )


def purger_subscriptions(rt: Runtime) -> list[Subscription]:
    handle = partial(on_tombstones_record, ports=purger_ports(rt))
    return [subscription(rt.settings, CONSUMER, rt.settings.topics.tombstones, handle)]


async def verify_document_purge(rt: Runtime, manifest: SourceManifest, doc_id: str) -> Verification:
    return await verify_purge(
        DocumentKey(manifest.tenant, manifest.source_id, doc_id),
        store=rt.purges,
        index=rt.index,
        cache=rt.cache,
        lineage=rt.lineage,
    )


async def apply_retention(rt: Runtime, manifests: list[SourceManifest]) -> RetentionReport:
    return await enforce_retention(
        manifests,
        store=rt.purges,
        index=rt.index,
        lineage=rt.lineage,
        cache=rt.cache,
        now=datetime.now(UTC),
    )
