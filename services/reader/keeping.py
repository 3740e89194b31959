"""Packs kept under an idempotency key: built once, answered again for a retry, and served
by id re-judged for the caller now (`reader.stored` says how they are stored).

A retry (the same key, the same body) gets the same pack id and bytes without retrieving
again, minus any item whose text was purged since or whose pins became invalid; the same key
with another body is refused (`KeyReused`). Serving a kept pack by id checks its pins now,
for the subject it was built for, which the caller must hold: a pack built for others is
answered like an unknown one, so its manifest's pins reach no one who could not see them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from govindex.core.ports import AuditEntry, PackStore, StoredPackRow
from reader.models import Pack, PackRequest, PinVerdict, StoredPack, Withheld
from reader.service import ReadService
from reader.stored import built_event, kept_items, kept_row, reassemble


class KeyReused(Exception):
    """The idempotency key already names a pack built from another request."""


class KeptGone(Exception):
    """A kept pack none of whose items can be served again (410)."""


@dataclass(frozen=True)
class Keeping:
    """Who keeps a pack under which key, for which request, and the audit record of its
    answer (written with the pack, in its transaction)."""

    credential_name: str
    idempotency_key: str
    request_hash: str
    audit: Callable[[Pack], AuditEntry]


class PackKeeper:
    def __init__(
        self, service: ReadService, packs: PackStore, receipts_topic: str, retention_days: int
    ) -> None:
        self._service = service
        self._packs = packs
        self._topic = receipts_topic
        self._days = retention_days

    async def pack(self, request: PackRequest, keeping: Keeping) -> tuple[Pack, bool]:
        """The pack for `request`, built and kept, or the one already kept under the key
        (True: a replay). Raises KeyReused, or KeptGone when a replay has nothing left."""
        found = await self._packs.keyed(
            request.tenant, keeping.credential_name, keeping.idempotency_key
        )
        if found is not None:
            return await self._replay(found, keeping.request_hash), True
        # Built fresh: a kept pack is its own, never a cached answer of another request.
        pack = await self._service.pack(request.model_copy(update={"cache": "bypass"}))
        row = kept_row(
            pack,
            credential_name=keeping.credential_name,
            idempotency_key=keeping.idempotency_key,
            request_hash=keeping.request_hash,
            retention_days=self._days,
        )
        event = built_event(row, pack, self._topic)
        if await self._packs.keep(row, kept_items(pack), keeping.audit(pack), event):
            return pack, False
        # Another request kept a pack under this key first: answer with that one.
        found = await self._packs.keyed(
            request.tenant, keeping.credential_name, keeping.idempotency_key
        )
        if found is None:
            raise KeptGone("the pack kept under this key expired while it was read")
        return await self._replay(found, keeping.request_hash), True

    async def _replay(self, row: StoredPackRow, request_hash: str) -> Pack:
        if row.request_hash != request_hash:
            raise KeyReused(
                "this Idempotency-Key already names a pack built from another request: "
                "send the same body to get that pack again, or use a new key"
            )
        stored = await self.stored(row.tenant_id, row.pack_id, None)
        if stored is None:
            raise KeptGone("the pack kept under this key has expired")
        return stored.pack

    async def stored(
        self, tenant_id: str, pack_id: str, holds: Callable[[Pack], bool] | None
    ) -> StoredPack | None:
        """The kept pack re-judged now; None when unknown, expired, or (`holds` False) built
        for a subject the caller does not hold. Raises KeptGone when nothing is left."""
        loaded = await self._packs.load(tenant_id, pack_id)
        if loaded is None:
            return None
        row, items = loaded
        pack, withheld = reassemble(row, items)
        if holds is not None and not holds(pack):
            return None
        verdict = await self._service.verify(pack.manifest)
        by_key: dict[str, list[PinVerdict]] = {}
        for pin in verdict.pins:
            by_key.setdefault(pin.key, []).append(pin)
        kept = []
        for item in pack.items:
            invalid = [p for p in by_key.get(item.key, []) if p.status == "invalid"]
            if invalid:
                reason = invalid[0].reason or "no longer valid"
                withheld.append(
                    Withheld(key=item.key, chunk_id=item.anchor.chunk_id, reason=reason)
                )
            else:
                kept.append(item)
        if (pack.items and not kept) or (not pack.items and withheld):
            raise KeptGone("nothing of this pack can be served again: " + _reasons(withheld))
        stale = any(p.status == "stale" for i in kept for p in by_key.get(i.key, []))
        status = "partial" if withheld else "stale" if stale else "valid"
        return StoredPack(
            pack=pack.model_copy(update={"items": kept}),
            withheld=sorted(withheld, key=lambda w: int(w.key[1:]) if w.key[1:].isdigit() else 0),
            status=status,
            checked_at=verdict.checked_at,
            expires_at=row.expires_at,
        )


def _reasons(withheld: Sequence[Withheld]) -> str:
    return "; ".join(f"{w.key}: {w.reason}" for w in withheld[:5])
