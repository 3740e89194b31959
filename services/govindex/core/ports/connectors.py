"""What connectors (git, folders, CDC, webhooks) keep: their state, ledgers and the
transaction that records a decision with the events it emits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from govindex.core.ports.values import OutboxMessage


class Emitter(Protocol):
    """Opens connector transactions (durable emission through the outbox)."""

    def transaction(self) -> AbstractAsyncContextManager[ConnectorTransaction]: ...


class ConnectorState(Emitter, Protocol):
    """A git or folder connector's state: what it last emitted for each document (the
    fingerprints a sync compares with), its sequences and its checkpoint.

    Read here; its decisions and their events are written together through `transaction()`.
    """

    async def known(self, tenant_id: str, source_id: str) -> dict[str, str]: ...

    async def raise_sequences(
        self, tenant_id: str, source_id: str, at_least: dict[str, int]
    ) -> None: ...

    async def forget(self, tenant_id: str, source_id: str, doc_ids: Sequence[str]) -> None: ...

    async def assume_present(
        self, tenant_id: str, source_id: str, doc_ids: Sequence[str]
    ) -> None: ...

    async def set_checkpoint(self, tenant_id: str, source_id: str, position: str) -> None: ...

    async def synced(self, tenant_id: str, source_id: str) -> None:
        """The source synced successfully now: what its refresh_sla is measured from."""
        ...

    async def checkpoint(self, tenant_id: str, source_id: str) -> str | None: ...


class CdcLedger(Emitter, Protocol):
    """The CDC connector's per-document positions, written through `transaction()`."""

    async def ledger(self, tenant_id: str, source_id: str, doc_id: str) -> tuple[int, bool]: ...

    async def synced(self, tenant_id: str, source_id: str) -> None: ...

    async def live_documents(self, tenant_id: str, source_id: str, prefix: str) -> list[str]: ...

    async def truncated_at(self, tenant_id: str, source_id: str) -> int: ...


class Deliveries(Protocol):
    """Webhook deliveries already handled."""

    async def seen(self, provider: str, delivery_id: str) -> bool: ...

    async def record(self, provider: str, delivery_id: str, sources: str) -> None: ...


class ConnectorTransaction(Protocol):
    """A connector's decision and the events that announce it, committed together."""

    async def reserve_sequences(
        self, tenant_id: str, source_id: str, doc_ids: Sequence[str]
    ) -> dict[str, int]: ...

    async def raise_sequences(
        self, tenant_id: str, source_id: str, at_least: dict[str, int]
    ) -> None: ...

    async def record(
        self,
        tenant_id: str,
        source_id: str,
        seen: dict[str, str | None],
        *,
        at: Mapping[str, int] | None = None,
    ) -> None: ...

    async def record_position(
        self, tenant_id: str, source_id: str, doc_id: str, sequence: int, *, deleted: bool
    ) -> None: ...

    async def record_truncate(self, tenant_id: str, source_id: str, sequence: int) -> None: ...

    async def put_blob(self, content_hash: str, content: str) -> None: ...

    async def put_blobs(self, blobs: Sequence[tuple[str, str]]) -> None: ...

    async def emit(self, messages: Sequence[OutboxMessage]) -> None: ...
