"""The one client and alias every part of the OpenSearch adapter shares; driver errors
translated at the boundary."""

from __future__ import annotations

from opensearchpy import AsyncOpenSearch
from opensearchpy import exceptions as os_exc

from govindex.core.errors import PermanentError, TransientError


def translate(exc: Exception, what: str) -> Exception:
    """A driver error as ours: unreachable, 429 and 5xx are transient, the rest permanent."""
    if isinstance(exc, os_exc.ConnectionError | os_exc.ConnectionTimeout):
        return TransientError(f"OpenSearch is unreachable during {what}: {exc}")
    if isinstance(exc, os_exc.TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        if status == 429 or status >= 500:
            return TransientError(f"OpenSearch is busy during {what} ({status}): {exc}")
        return PermanentError(f"OpenSearch refused {what} ({status}): {exc}")
    return exc


class Connection:
    """A client for one alias and its generations, `{alias}-gNNNN`, live or retired."""

    def __init__(self, url: str, alias: str) -> None:
        self._client = AsyncOpenSearch(hosts=[url], timeout=30, max_retries=0)
        self.alias = alias

    @property
    def pattern(self) -> str:
        """Every generation of this alias, live or not: what a purge must sweep."""
        return f"{self.alias}-g*"

    def index_name(self, generation: int) -> str:
        return f"{self.alias}-g{generation:04d}"

    async def close(self) -> None:
        await self._client.close()

    async def generations(self) -> list[str]:
        """Every index of this alias's generations, live or retired."""
        try:
            found = await self._client.indices.get(index=self.pattern)
        except os_exc.NotFoundError:
            return []
        except Exception as exc:
            raise translate(exc, "generation lookup") from exc
        return sorted(found)

    async def refresh(self) -> None:
        try:
            await self._client.indices.refresh(index=self.pattern)
        except os_exc.NotFoundError:
            return
        except Exception as exc:
            raise translate(exc, "refresh") from exc

    async def count(self) -> int:
        try:
            result = await self._client.count(index=self.alias)
        except os_exc.NotFoundError:
            return 0
        except Exception as exc:
            raise translate(exc, "count") from exc
        return int(result["count"])
