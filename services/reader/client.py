"""A Python client for the read API: async (`ReadClient`) with a sync facade (`SyncReadClient`).

    async with ReadClient(url, token) as client:
        pack = await client.pack(PackRequest(tenant="acme", subject=Subject(principals=[
            "group:sre"]), purpose="support", query="orders-db failover"))
        verdict = await client.verify(pack.manifest)

Requests and responses are the same pydantic models the server validates with; a refusal
raises `ReadApiError` with the HTTP status, the field and the reason.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel, ValidationError

from reader.models import (
    ApiError,
    ChunkView,
    DerivedArtifact,
    Manifest,
    Pack,
    PackRequest,
    SearchRequest,
    SearchResponse,
    VerifyRequest,
    VerifyResponse,
)

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")


class ReadApiError(Exception):
    def __init__(self, status: int, error: str, reason: str, field: str | None) -> None:
        where = f" ({field})" if field else ""
        super().__init__(f"{status} {error}{where}: {reason}")
        self.status, self.error, self.reason, self.field = status, error, reason, field


class ReadClient:
    def __init__(self, url: str, token: str, *, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ReadClient:
        self._session = aiohttp.ClientSession(headers=self._headers, timeout=self._timeout)
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def search(self, request: SearchRequest) -> SearchResponse:
        return await self._post("/v1/search", request, SearchResponse)

    async def pack(self, request: PackRequest) -> Pack:
        return await self._post("/v1/packs", request, Pack)

    async def verify(self, manifest: Manifest) -> VerifyResponse:
        return await self._post(
            "/v1/packs/verify", VerifyRequest(manifest=manifest), VerifyResponse
        )

    async def chunk(
        self,
        chunk_id: str,
        *,
        tenant: str,
        principals: Sequence[str],
        purpose: str,
        scopes: Sequence[str] = (),
        as_of: datetime | None = None,
    ) -> ChunkView:
        params: list[tuple[str, str]] = [("tenant", tenant), ("purpose", purpose)]
        params += [("principal", p) for p in principals] + [("scope", s) for s in scopes]
        if as_of is not None:
            params.append(("as_of", as_of.isoformat()))
        session = self._require()
        async with session.get(f"{self.url}/v1/chunks/{chunk_id}", params=params) as resp:
            return _parse(resp.status, await resp.read(), ChunkView)

    async def register_lineage(self, artifact: DerivedArtifact) -> None:
        session = self._require()
        body = artifact.model_dump_json().encode()
        headers = {"Content-Type": "application/json"}
        async with session.post(f"{self.url}/v1/lineage", data=body, headers=headers) as resp:
            if resp.status != 201:
                _raise(resp.status, await resp.read())

    async def _post(self, path: str, body: BaseModel, model: type[M]) -> M:
        session = self._require()
        data = body.model_dump_json(exclude_unset=False).encode()
        headers = {"Content-Type": "application/json"}
        async with session.post(self.url + path, data=data, headers=headers) as resp:
            return _parse(resp.status, await resp.read(), model)

    def _require(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("use `async with ReadClient(url, token)`")
        return self._session


def _parse(status: int, raw: bytes, model: type[M]) -> M:
    if status != 200:
        _raise(status, raw)
    return model.model_validate_json(raw)


def _raise(status: int, raw: bytes) -> None:
    try:
        err = ApiError.model_validate_json(raw)
    except ValidationError:
        raise ReadApiError(status, "http_error", raw[:200].decode(errors="replace"), None) from None
    raise ReadApiError(status, err.error, err.reason, err.field)


class SyncReadClient:
    """The same calls, blocking: a private event loop on a background thread."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 30.0) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client = ReadClient(url, token, timeout_s=timeout_s)
        self._run(self._client.__aenter__())

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def search(self, request: SearchRequest) -> SearchResponse:
        return self._run(self._client.search(request))

    def pack(self, request: PackRequest) -> Pack:
        return self._run(self._client.pack(request))

    def verify(self, manifest: Manifest) -> VerifyResponse:
        return self._run(self._client.verify(manifest))

    def chunk(self, chunk_id: str, **kwargs: Any) -> ChunkView:
        return self._run(self._client.chunk(chunk_id, **kwargs))

    def register_lineage(self, artifact: DerivedArtifact) -> None:
        self._run(self._client.register_lineage(artifact))

    def close(self) -> None:
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> SyncReadClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
