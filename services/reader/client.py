"""The read API's client under its first names: `govindex_client`'s clients, kept for code
written against `reader.client`. New code imports `govindex_client` (docs/read-api/client.md).

    async with ReadClient(url, token) as client:
        pack = await client.pack(PackRequest(tenant="acme", subject=Subject(principals=[
            "group:sre"]), purpose="support", query="orders-db failover"))
        verdict = await client.verify(pack.manifest)

`ReadClient` is `AsyncGovindexClient`, `SyncReadClient` is `GovindexClient` (both take
`timeout_s`, as before); `ReadApiError` is `GovindexError`, with `status`, `error`, `field`
and `reason` (its subclasses name the status: `Forbidden`, `NotFound`, …).
"""

from __future__ import annotations

from govindex_client import AsyncGovindexClient, GovindexClient, GovindexError

ReadApiError = GovindexError


class ReadClient(AsyncGovindexClient):
    def __init__(self, url: str, token: str, *, timeout_s: float = 30.0) -> None:
        super().__init__(url, token, timeout=timeout_s)

    async def close(self) -> None:
        await self.aclose()


class SyncReadClient(GovindexClient):
    def __init__(self, url: str, token: str, *, timeout_s: float = 30.0) -> None:
        super().__init__(url, token, timeout=timeout_s)


__all__ = ["ReadApiError", "ReadClient", "SyncReadClient"]
