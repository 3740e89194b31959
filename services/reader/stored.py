"""Kept packs (pure): what a pack kept under an idempotency key is stored as, its
`pack.built` event, and the pack rebuilt from what is still kept.

A kept pack is a copy of content, so it is stored the way lineage can reach: the row holds
the pack without its items' text (`shell`), and each item, its text and hydrated chunks
included, is an artifact built from its document and chunks. A deletion, a purge or
retention removes an item's text like any stored summary's, and the pack is served again
without it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from govindex.core import events
from govindex.core.envelope import encode
from govindex.core.ports import KeptItem, OutboxMessage, StoredItem, StoredPackRow
from reader.models import Pack, PackItem, Withheld

PACKS_SOURCE = "read-api"  # the CloudEvent source segment of `pack.built`
# A fixed namespace: a pack's event id follows from its pack id alone.
_EVENT_NAMESPACE = uuid.UUID("9a3c5f1e-2b7d-4c8e-a1f0-6d2e8b4c7a93")


def kept_row(
    pack: Pack,
    *,
    credential_name: str,
    idempotency_key: str | None,
    request_hash: str,
    retention_days: int,
) -> StoredPackRow:
    """The row a pack is kept as: its shell (the pack with no items, and their keys)."""
    manifest = pack.manifest
    assert manifest.pack_id is not None and manifest.built_at is not None  # schema 2
    shell: dict[str, Any] = pack.model_dump(mode="json")
    shell["items"] = []
    shell["keys"] = [item.key for item in pack.items]
    return StoredPackRow(
        pack_id=manifest.pack_id,
        tenant_id=manifest.tenant,
        credential_name=credential_name,
        idempotency_key=idempotency_key,
        request_hash=request_hash,
        pack_hash=manifest.pack_hash,
        built_at=manifest.built_at,
        expires_at=manifest.built_at + timedelta(days=retention_days),
        shell=shell,
    )


def kept_items(pack: Pack) -> list[KeptItem]:
    """Each item as its JSON, built from its document and every chunk it holds."""
    found = []
    for item in pack.items:
        a = item.anchor
        chunks = [a.chunk_id, *(h.anchor.chunk_id for h in item.hydrated)]
        documents = {f"{a.tenant}/{a.source_id}/{a.doc_id}"} | {
            f"{h.anchor.tenant}/{h.anchor.source_id}/{h.anchor.doc_id}" for h in item.hydrated
        }
        found.append(KeptItem(item.key, item.model_dump_json(), (*sorted(documents), *chunks)))
    return found


def built_event(row: StoredPackRow, pack: Pack, topic: str) -> OutboxMessage:
    """`pack.built`, on the receipts topic, keyed by the pack."""
    manifest = pack.manifest
    payload = events.PackBuilt(
        tenant_id=row.tenant_id,
        pack_id=row.pack_id,
        pack_hash=row.pack_hash,
        request_hash=row.request_hash,
        credential_name=row.credential_name,
        purpose=manifest.purpose,
        as_of=manifest.as_of,
        built_at=row.built_at,
        expires_at=row.expires_at,
        items=len(pack.items),
        documents=sorted({doc_key_of(i) for i in pack.items}),
    )
    record = encode(
        event_type=events.PACK_BUILT,
        event_id=str(uuid.uuid5(_EVENT_NAMESPACE, row.pack_id)),
        tenant_id=row.tenant_id,
        source_id=PACKS_SOURCE,
        subject=row.pack_id,
        key=f"{row.tenant_id}/packs/{row.pack_id}",
        payload=payload,
        time=row.built_at,
    )
    return OutboxMessage(topic, record, tenant_id=row.tenant_id)


def doc_key_of(item: PackItem) -> str:
    a = item.anchor
    return f"{a.tenant}/{a.source_id}/{a.doc_id}"


def reassemble(row: StoredPackRow, items: Sequence[StoredItem]) -> tuple[Pack, list[Withheld]]:
    """The pack as kept, with the items whose text is still kept, in order; the others
    withheld with the reason their text went."""
    pins = {str(i["key"]): str(i["chunk_id"]) for i in row.shell["manifest"]["items"]}
    kept: list[PackItem] = []
    withheld: list[Withheld] = []
    for stored in items:
        if stored.text is None:
            reason = stored.reason or "its text was removed"
            chunk_id = pins.get(stored.key, "")
            withheld.append(Withheld(key=stored.key, chunk_id=chunk_id, reason=reason))
        else:
            kept.append(PackItem.model_validate_json(stored.text))
    shell = {k: v for k, v in row.shell.items() if k != "keys"}
    return Pack.model_validate({**shell, "items": kept}), withheld
