"""A Redis cache for pack builders whose entries are tagged with what they contain.

Every entry records the documents and chunks it was built from, and the principals it was
built for, as Redis sets (tags), so the purger can evict by document and a revocation by
principal. Tag sets are kept next to the entries; an entry that expired on its own leaves a
stale member behind, which eviction tolerates.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from govindex.core.errors import TransientError

PREFIX = "govindex"


def _doc_tag(namespace: str, doc_key: str) -> str:
    return f"{PREFIX}:{namespace}:tag:doc:{doc_key}"


def _chunk_tag(namespace: str, chunk_id: str) -> str:
    return f"{PREFIX}:{namespace}:tag:chunk:{chunk_id}"


def _source_tag(namespace: str, tenant_source: str) -> str:
    return f"{PREFIX}:{namespace}:tag:source:{tenant_source}"


def _source_of(doc_key: str) -> str:
    """`tenant/source` of a `tenant/source/doc` key."""
    return "/".join(doc_key.split("/", 2)[:2])


def _principal_tag(namespace: str, principal: str) -> str:
    return f"{PREFIX}:{namespace}:tag:principal:{principal}"


def redis_version(url: str) -> str:
    """The server's version, through one short synchronous connection (for status)."""
    client = redis.Redis.from_url(url, socket_timeout=3)
    try:
        client.ping()
        return str(client.info("server").get("redis_version", "?"))
    finally:
        client.close()


class RedisTaggedCache:
    """put/get/evict with tag sets; keys are namespaced like topics and the index alias.

    Entries are also tagged by source (`tenant/source`), so disabling a source or changing
    its manifest evicts everything built from it.
    """

    def __init__(self, url: str, namespace: str) -> None:
        self._redis = aioredis.Redis.from_url(url, socket_timeout=5)
        self.namespace = namespace

    def key(self, name: str) -> str:
        return f"{PREFIX}:{self.namespace}:entry:{name}"

    async def close(self) -> None:
        await self._redis.aclose()

    async def put(
        self,
        name: str,
        value: bytes | str,
        *,
        documents: Iterable[str],
        chunks: Iterable[str] = (),
        principals: Iterable[str] = (),
        ttl_s: int = 3600,
    ) -> None:
        """Store an entry and tag it with every document (`tenant/source/doc`), chunk and
        principal it was built from or for."""
        key = self.key(name)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(key, value, ex=ttl_s)
                documents = list(documents)
                for source in {_source_of(d) for d in documents}:
                    pipe.sadd(_source_tag(self.namespace, source), key)
                for doc in documents:
                    pipe.sadd(_doc_tag(self.namespace, doc), key)
                for chunk in chunks:
                    pipe.sadd(_chunk_tag(self.namespace, chunk), key)
                for principal in principals:
                    pipe.sadd(_principal_tag(self.namespace, principal), key)
                await pipe.execute()
        except RedisError as exc:
            raise TransientError(f"Redis is unavailable: {exc}") from exc

    async def delete(self, name: str) -> None:
        try:
            await self._redis.delete(self.key(name))
        except RedisError as exc:
            raise TransientError(f"Redis is unavailable: {exc}") from exc

    async def get(self, name: str) -> bytes | None:
        try:
            value = await self._redis.get(self.key(name))
        except RedisError as exc:
            raise TransientError(f"Redis is unavailable: {exc}") from exc
        return value.encode() if isinstance(value, str) else value

    async def evict_document(self, doc_key: str, chunk_ids: Iterable[str] = ()) -> int:
        """Delete every entry built from the document (or any of its chunks)."""
        tags = [_doc_tag(self.namespace, doc_key)]
        tags += [_chunk_tag(self.namespace, c) for c in chunk_ids]
        return await self._evict(tags)

    async def evict_documents(self, doc_keys: Iterable[str]) -> int:
        """Delete every entry built from any of the documents (a batch's new versions)."""
        return await self._evict([_doc_tag(self.namespace, k) for k in doc_keys])

    async def evict_for(self, doc_key: str, principals: Iterable[str]) -> int:
        """Delete entries built from the document *for* any of the principals (revocation):
        the intersection of the document's tag and each principal's tag."""
        try:
            doc_keys = await self._redis.smembers(_doc_tag(self.namespace, doc_key))
            keys: set[bytes | str] = set()
            for principal in principals:
                tag = _principal_tag(self.namespace, principal)
                keys |= doc_keys & await self._redis.smembers(tag)
            return int(await self._redis.delete(*keys)) if keys else 0
        except RedisError as exc:
            raise TransientError(f"Redis is unavailable: {exc}") from exc

    async def evict_source(self, tenant_id: str, source_id: str) -> int:
        """Delete every entry built from any document of the source (disabled, or its
        manifest changed what it allows)."""
        return await self._evict([_source_tag(self.namespace, f"{tenant_id}/{source_id}")])

    async def evict_chunks(self, chunk_ids: Iterable[str]) -> int:
        """Delete every entry built from any of these chunks (one version going away)."""
        return await self._evict([_chunk_tag(self.namespace, c) for c in chunk_ids])

    async def _evict(self, tags: list[str]) -> int:
        try:
            if not tags:
                return 0
            keys: set[bytes | str] = set(await self._redis.sunion(tags))  # one round trip
            removed = int(await self._redis.delete(*keys)) if keys else 0
            await self._redis.delete(*tags)
        except RedisError as exc:
            raise TransientError(f"Redis is unavailable: {exc}") from exc
        return removed

    async def count_document(self, doc_key: str, chunk_ids: Iterable[str] = ()) -> int:
        """Read-back: live entries still tagged with the document or its chunks."""
        tags = [_doc_tag(self.namespace, doc_key)]
        tags += [_chunk_tag(self.namespace, c) for c in chunk_ids]
        try:
            keys: set[bytes | str] = set()
            for tag in tags:
                keys |= await self._redis.smembers(tag)
            return int(await self._redis.exists(*keys)) if keys else 0
        except RedisError as exc:
            raise TransientError(f"Redis is unavailable: {exc}") from exc
