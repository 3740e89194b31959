"""The index itself: its template, generations and alias, assembled with its writes, purges
and reads into `OpenSearchIndex`; and `rebuild`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import structlog
from opensearchpy import exceptions as os_exc

from govindex.adapters.opensearch.bulk import BulkPolicy, BulkWriter, in_generation
from govindex.adapters.opensearch.client import NO_SECURITY, OpenSearchSecurity, translate
from govindex.adapters.opensearch.mapping import MAPPING
from govindex.adapters.opensearch.purge import PurgeQueries
from govindex.adapters.opensearch.search import CandidateSearch
from govindex.core.ports.operations import ProjectionIndex
from govindex.core.records import Chunk

log = structlog.get_logger(__name__)


class OpenSearchIndex(BulkWriter, PurgeQueries, CandidateSearch):
    """The search projection of Postgres chunks; rebuildable at any time.

    One client shared by the parts, one per port: writes (`BulkWriter`: SearchIndex),
    purges (`PurgeQueries`: PurgeIndex) and reads (`CandidateSearch`: CandidateIndex).
    """

    def __init__(
        self,
        url: str,
        alias: str,
        *,
        refresh_interval: str = "1s",
        bulk: BulkPolicy | None = None,
        security: OpenSearchSecurity = NO_SECURITY,
    ) -> None:
        super().__init__(url, alias, bulk=bulk, security=security)
        self._refresh_interval = refresh_interval

    async def ensure_template(self) -> None:
        body = {
            "index_patterns": [self.pattern],
            "template": {
                "settings": {
                    "number_of_shards": 1,
                    "number_of_replicas": 0,
                    "refresh_interval": self._refresh_interval,
                },
                "mappings": MAPPING,
            },
        }
        try:
            await self._client.indices.put_index_template(name=self.alias, body=body)
            # Generations created under an older template learn the fields they lack; a
            # field they have keeps its old parameters (they cannot change in place; a
            # reindex builds a generation with the current ones).
            for name in await self.generations():
                held = await self._client.indices.get_mapping(index=name)
                known = held.get(name, {}).get("mappings", {}).get("properties", {})
                missing = {k: v for k, v in MAPPING["properties"].items() if k not in known}
                if missing:
                    await self._client.indices.put_mapping(index=name, body={"properties": missing})
        except Exception as exc:
            raise translate(exc, "template creation") from exc

    async def live_generation(self) -> int | None:
        try:
            if not await self._client.indices.exists_alias(name=self.alias):
                return None
            found = await self._client.indices.get_alias(name=self.alias)
        except Exception as exc:
            raise translate(exc, "alias lookup") from exc
        names = sorted(found)
        return int(names[-1].rsplit("-g", 1)[1]) if names else None

    async def create_generation(self, generation: int) -> str:
        name = self.index_name(generation)
        try:
            if not await self._client.indices.exists(index=name):
                await self._client.indices.create(index=name)
        except Exception as exc:
            raise translate(exc, "index creation") from exc
        return name

    async def restore_alias(self, generation: int) -> None:
        """After the server lost its indexes: the live generation's index and the alias back.

        A write sent to the alias while it was missing made an index of the alias's own name
        (with guessed mappings), which stops the alias being created: it goes, as what it
        holds is a copy of Postgres that the rebuild writes again.
        """
        try:
            if not await self._client.indices.exists_alias(name=self.alias) and (
                await self._client.indices.exists(index=self.alias)
            ):
                await self._client.indices.delete(index=self.alias)
        except Exception as exc:
            raise translate(exc, "stray index removal") from exc
        await self.create_generation(generation)
        await self.point_alias(generation)

    async def point_alias(self, generation: int) -> None:
        """Atomically make `generation` the one the alias serves."""
        name = self.index_name(generation)
        actions: list[dict[str, Any]] = [{"add": {"index": name, "alias": self.alias}}]
        try:
            if await self._client.indices.exists_alias(name=self.alias):
                current = await self._client.indices.get_alias(name=self.alias)
                actions = [
                    {"remove": {"index": old, "alias": self.alias}}
                    for old in current
                    if old != name
                ] + actions
            await self._client.indices.update_aliases(body={"actions": actions})
        except Exception as exc:
            raise translate(exc, "alias switch") from exc

    async def write_generation(
        self, chunks: Sequence[Chunk], generation: int, *, repair: bool = False
    ) -> int:
        """Index chunks into one generation (stamped with it), external version = sequence:
        a rebuild's copy. Returns how many it took (409: it held something as new). A
        `repair` also overwrites the same version (a chunk deleted by mistake leaves its
        version behind; one altered in place kept its version): never a newer one."""
        stamped = in_generation(chunks, generation)
        return await self.upsert(stamped, index=self.index_name(generation), same_version=repair)

    async def drop_generation(self, generation: int) -> None:
        """Delete a generation's index (an abandoned build; never the live one)."""
        try:
            await self._client.indices.delete(index=self.index_name(generation))
        except os_exc.NotFoundError:
            return
        except Exception as exc:
            raise translate(exc, "index deletion") from exc


async def rebuild(
    index: ProjectionIndex, batches: AsyncIterator[list[Chunk]], generation: int
) -> int:
    """Build `generation` from Postgres chunks, then point the alias at it. Returns the count."""
    name = await index.create_generation(generation)
    total = 0
    async for batch in batches:
        stamped = in_generation(batch, generation)
        total += await index.upsert(stamped, index=name)
        log.info("projection.rebuild.progress", generation=generation, chunks=total)
    await index.point_alias(generation)
    return total
