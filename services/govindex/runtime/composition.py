"""The composition root: the one place that opens connections and builds adapters.

`Runtime` is built from settings whose server addresses are all known (`Servers`); it
opens the Postgres pool on entry and builds the OpenSearch index, the Redis cache and the
async event publisher the first time something asks for them, so a command that needs only
Postgres never touches the broker. Everything it handed out is closed on exit. Workers, the
webhook receiver, every CLI command, the demo and the tests get their ports from here.
"""

from __future__ import annotations

from functools import cached_property
from types import TracebackType

import structlog
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.embedders import (
    EmbedderError,
    EmbedderSpec,
    HttpOptions,
    check_embedder,
    make_embedder,
    parse_embedder,
)
from govindex.adapters.kafka_async import AsyncKafkaPublisher
from govindex.adapters.kafka_security import KafkaSecurity
from govindex.adapters.opensearch import BulkPolicy, OpenSearchIndex, OpenSearchSecurity
from govindex.adapters.postgres.audit import PostgresReadAudit
from govindex.adapters.postgres.controls import PostgresControls
from govindex.adapters.postgres.deliveries import PostgresDeliveries
from govindex.adapters.postgres.documents import PostgresChunkStore
from govindex.adapters.postgres.generations import PostgresGenerations
from govindex.adapters.postgres.ingest_state import PostgresIngestState
from govindex.adapters.postgres.jobs import PostgresJobs
from govindex.adapters.postgres.lineage import PostgresLineage
from govindex.adapters.postgres.outbox import PostgresOutbox
from govindex.adapters.postgres.packs import PostgresPackStore
from govindex.adapters.postgres.pool import open_pool
from govindex.adapters.postgres.purges import PostgresPurgeStore
from govindex.adapters.postgres.reads import Dense, PostgresReadStore
from govindex.adapters.postgres.sources import PostgresSourceRegistry
from govindex.adapters.postgres.vectors import PostgresVectorStore
from govindex.adapters.postgres.versions import PostgresBlobStore, PostgresVersionStore
from govindex.adapters.redis_cache import RedisTaggedCache
from govindex.core.errors import TransientError
from govindex.core.ports import (
    BlobStore,
    Deliveries,
    Embedder,
    PackStore,
    ReadAudit,
    ReadStore,
    VersionStore,
)
from govindex.core.ports.operations import (
    AnswerCacheStore,
    ChunkPorts,
    ConnectorPorts,
    GenerationStore,
    JobStore,
    LineagePorts,
    OutboxPorts,
    ProjectionIndex,
    PurgeRecords,
    SourcePorts,
    WorkerControls,
)
from govindex.core.settings import Servers, Settings
from govindex.core.tokens import SETTING as TOKENIZER_SETTING
from govindex.core.tokens import TokenEstimator, TokenizerError, estimator_from

log = structlog.get_logger(__name__)


class Runtime:
    """Connections opened once, ports handed out; an async context manager."""

    # Typed by ports: callers see capabilities, never an adapter (built in __aenter__).
    registry: SourcePorts
    chunks: ChunkPorts
    blobs: BlobStore
    versions: VersionStore
    purges: PurgeRecords
    outbox: OutboxPorts
    lineage: LineagePorts
    ingest_state: ConnectorPorts
    deliveries: Deliveries
    generations: GenerationStore
    jobs: JobStore
    controls: WorkerControls
    # The one token counter of this process: the indexer stamps `token_estimate` with it
    # and the read API packs with it; `tokens.label` (`name/version`) says which it is.
    tokens: TokenEstimator

    def __init__(
        self,
        settings: Settings,
        *,
        pool_size: int | None = None,
        index: ProjectionIndex | None = None,
    ) -> None:
        """`index`: another Runtime's, shared (and left open on exit) so that one process
        has one OpenSearch client, one set of bulk slots, one purge-first gate.
        `pool_size`: the most Postgres connections (default GOVINDEX_PG_POOL_SIZE)."""
        self.settings = settings.require_servers()
        self.servers: Servers = self.settings.servers()
        # TLS and SASL of every Kafka client, the credentials and CAs of OpenSearch: built
        # once, handed to every client this process builds.
        self.kafka_security = KafkaSecurity.from_settings(self.settings)
        self.opensearch_security = OpenSearchSecurity.from_settings(self.settings)
        self._pool_size = self.settings.pg_pool_size if pool_size is None else pool_size
        self._pool_min = min(self.settings.pg_pool_min, self._pool_size)
        self._owns_index = index is None
        if index is not None:
            self.__dict__["index"] = index
        self._pool: AsyncConnectionPool | None = None
        self._publisher: AsyncKafkaPublisher | None = None
        self._embedder_specs = embedder_specs(self.settings)
        # Loaded here, once: a tokenizer file that cannot be used stops the process at start,
        # not at its first event or read.
        try:
            self.tokens = estimator_from(self.settings.tokenizer)
        except TokenizerError as exc:
            raise TokenizerError(
                f"{TOKENIZER_SETTING}={self.settings.tokenizer!r} is refused: {exc}"
            ) from None

    async def __aenter__(self) -> Runtime:
        pool = open_pool(self.servers.pg_dsn, min_size=self._pool_min, max_size=self._pool_size)
        try:
            await pool.open(wait=True, timeout=15)
        except Exception as exc:  # psycopg_pool raises PoolTimeout with the cause inside
            await pool.close()
            raise TransientError(
                f"cannot reach PostgreSQL at {self.servers.pg_dsn}: {exc}. "
                "Is `govindex up` running, or are GOVINDEX_PG_DSN and the server right?"
            ) from exc
        self._pool = pool
        # Postgres ports: plain objects over the one pool (building them does no I/O).
        self.registry = PostgresSourceRegistry(pool)
        self.chunks = PostgresChunkStore(pool)
        self.blobs = PostgresBlobStore(pool)
        self.versions = PostgresVersionStore(pool)
        self.purges = PostgresPurgeStore(pool)
        self.outbox = PostgresOutbox(pool)
        self.lineage = PostgresLineage(pool)
        self.ingest_state = PostgresIngestState(pool)
        self.deliveries = PostgresDeliveries(pool)
        self.generations = PostgresGenerations(pool, self.settings.index_alias)
        self.jobs = PostgresJobs(pool)
        self.controls = PostgresControls(pool)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._publisher is not None:
            await self._publisher.stop()
        if "cache" in self.__dict__ and self.cache is not None:
            await self.cache.close()
        if "index" in self.__dict__ and self._owns_index:
            await self.index.close()
        if self._pool is not None:
            await self._pool.close()

    @property
    def pool(self) -> AsyncConnectionPool:
        if self._pool is None:
            raise RuntimeError("use `async with Runtime(settings)` before asking for ports")
        return self._pool

    # --- the other servers ------------------------------------------------------------

    @cached_property
    def index(self) -> ProjectionIndex:
        s = self.settings
        bulk = BulkPolicy(s.bulk_max_chunks, s.bulk_max_bytes, s.bulk_concurrency, s.bulk_timeout_s)
        return OpenSearchIndex(
            self.servers.opensearch_url, s.index_alias, bulk=bulk, security=self.opensearch_security
        )

    @cached_property
    def cache(self) -> AnswerCacheStore | None:
        if self.servers.redis_url is None:
            return None
        return RedisTaggedCache(self.servers.redis_url, self.settings.namespace)

    @cached_property
    def embedder(self) -> Embedder | None:
        """The model of GOVINDEX_EMBEDDER: what the dense channel ranks by once live."""
        return make_embedder(self._embedder_specs[0])

    @cached_property
    def embedders(self) -> tuple[Embedder, ...]:
        """Every model chunks are embedded with: the configured one, and the next one
        while its generation is built beside it (GOVINDEX_EMBEDDER_NEXT)."""
        made = [self.embedder, *(make_embedder(s) for s in self._embedder_specs[1:])]
        return tuple(e for e in made if e is not None)

    @cached_property
    def reads(self) -> ReadStore:
        """The read service's snapshots; the dense channel ranks in pgvector."""
        s = self.settings
        dense = (
            Dense(
                self.embedders,
                min_similarity=s.dense_min_similarity,
                ef_search=s.dense_ef_search,
                max_scan_tuples=s.dense_max_scan_tuples,
            )
            if self.embedders
            else None
        )
        return PostgresReadStore(self.pool, dense)

    @cached_property
    def vectors(self) -> PostgresVectorStore:
        return PostgresVectorStore(self.pool, build_memory=self.settings.vector_index_build_memory)

    @cached_property
    def audit(self) -> ReadAudit:
        """The audit of answered reads (a port over the pool: building it does no I/O)."""
        return PostgresReadAudit(self.pool)

    @property
    def packs(self) -> PackStore:
        """Packs kept under idempotency keys (a port over the pool)."""
        return PostgresPackStore(self.pool)

    async def publisher(self) -> AsyncKafkaPublisher:
        """The one async producer of this process, started on first use."""
        if self._publisher is None:
            publisher = AsyncKafkaPublisher(self.servers.kafka_bootstrap, self.kafka_security)
            await publisher.start()
            self._publisher = publisher
        return self._publisher


def embedder_specs(settings: Settings) -> tuple[EmbedderSpec, ...]:
    """GOVINDEX_EMBEDDER (and GOVINDEX_EMBEDDER_NEXT), checked without loading a model: a
    spec that cannot work stops the process at start, saying what is wrong."""
    s = settings
    options = (
        None
        if s.embedder_model is None
        else HttpOptions(
            model=s.embedder_model,
            api_key=s.embedder_api_key,
            dims=s.embedder_dims,
            batch=s.embedder_batch,
            timeout_s=s.embedder_timeout_s,
            retries=s.embedder_retries,
            max_response_bytes=s.embedder_max_response_bytes,
            version=s.embedder_version,
        )
    )
    named = [("GOVINDEX_EMBEDDER", s.embedder)]
    if s.embedder_next is not None:
        named.append(("GOVINDEX_EMBEDDER_NEXT", s.embedder_next))
    specs = []
    for setting, value in named:
        try:
            specs.append(check_embedder(parse_embedder(value, http=options)))
        except ValueError as exc:
            raise EmbedderError(f"{setting} is refused: {exc}") from None
    return tuple(specs)
