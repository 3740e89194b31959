"""What the control plane and the composition root hand out besides the services' ports:
operator jobs, worker controls and heartbeats, index generations, and the composite
projection and cache a process holds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from govindex.core.jobs import Job, JobItem, JobState, StepOutcome
from govindex.core.ports.connectors import CdcLedger, ConnectorState
from govindex.core.ports.indexing import ChunkStore, SourceCatalog, SourceRegistry
from govindex.core.ports.messaging import DeadLetterLog, Outbox
from govindex.core.ports.projection import CandidateIndex, PurgeIndex, SearchIndex
from govindex.core.ports.purging import (
    Lineage,
    LineageRegistry,
    PurgeReadBack,
    PurgeStore,
    RetentionStore,
    TaggedCache,
)
from govindex.core.ports.reading import ReadCache
from govindex.core.ports.values import DocumentRow, OutboxMessage, TombstoneRow
from govindex.core.records import Chunk


@dataclass(frozen=True)
class Heartbeat:
    """A worker process's last report: what it runs, what it has paused."""

    runner: str
    kinds: list[str]
    paused: list[str]
    beat_at: datetime


class JobStore(Protocol):
    """Operator jobs: records, steps with their checkpoints, items, and who runs them."""

    async def create(
        self,
        kind: str,
        args: Mapping[str, Any],
        *,
        requested_by: str,
        dry_run: bool,
        rate: float | None,
        runner: str,
    ) -> Job: ...

    async def get(self, job_id: int) -> Job | None: ...

    async def recent(self, limit: int, kind: str | None = None) -> list[Job]: ...

    async def claim(self, job_id: int, runner: str, *, runner_gone: bool = False) -> Job: ...

    async def set_state(self, job_id: int, state: JobState, error: str | None = None) -> Job: ...

    async def set_rate(self, job_id: int, rate: float | None) -> Job: ...

    async def start(
        self, job_id: int, total: int | None, checkpoint: Mapping[str, Any]
    ) -> None: ...

    async def beat(self, job_id: int) -> StepOutcome: ...

    async def record(
        self,
        job_id: int,
        *,
        done: int,
        counts: Mapping[str, int],
        checkpoint: Mapping[str, Any],
        finished: bool = False,
        items: Sequence[JobItem] = (),
    ) -> StepOutcome: ...

    async def items(self, job_id: int) -> list[JobItem]: ...

    async def actions(self, topic: str) -> dict[tuple[int, int], str]: ...

    async def publish_step(
        self,
        job_id: int,
        *,
        messages: Sequence[OutboxMessage],
        unsettle: Sequence[tuple[str, str]],
        done: int,
        counts: Mapping[str, int],
        checkpoint: Mapping[str, Any],
        finished: bool = False,
        topic: str = "",
        actions: Sequence[tuple[int, int, str]] = (),
        items: Sequence[JobItem] = (),
    ) -> StepOutcome: ...


class WorkerControls(Protocol):
    """`govindex worker pause|resume` flags and the heartbeats of worker processes."""

    async def paused(self) -> set[str]: ...

    async def set_paused(self, kind: str, paused: bool, requested_by: str) -> None: ...

    async def beat(
        self,
        runner: str,
        kinds: Sequence[str],
        paused: Sequence[str],
        healing: str | None = None,
    ) -> None: ...

    async def gone(self, runner: str) -> None: ...

    async def alive(self, within_s: float) -> list[Heartbeat]: ...


class GenerationStore(Protocol):
    """Which OpenSearch index holds which build of the projection, as Postgres records it."""

    async def begin(self, index_name: Callable[[int], str], job_id: int | None = None) -> int: ...

    async def go_live(self, generation: int) -> None: ...

    async def building(self) -> list[tuple[int, str]]: ...

    async def live(self) -> int | None: ...

    async def get(self, generation: int) -> str | None: ...

    async def retire(self, generation: int) -> None: ...

    async def digests(self, after: str, limit: int) -> list[tuple[str, int, str]]: ...

    async def digests_of(self, chunk_ids: Sequence[str]) -> dict[str, tuple[int, str]]: ...

    async def stored_chunks(self) -> int: ...


class ProjectionIndex(SearchIndex, PurgeIndex, CandidateIndex, Protocol):
    """The whole search projection a process holds: writes, purges and candidates (each its own
    port) and the generations behind the alias."""

    async def ensure_template(self) -> None: ...

    async def live_generation(self) -> int | None: ...

    async def create_generation(self, generation: int) -> str: ...

    async def restore_alias(self, generation: int) -> None: ...

    async def point_alias(self, generation: int) -> None: ...

    async def write_generation(
        self, chunks: Sequence[Chunk], generation: int, *, repair: bool = False
    ) -> int: ...

    async def drop_generation(self, generation: int) -> None: ...

    async def close(self) -> None: ...

    async def count(self) -> int: ...

    async def refresh(self) -> None: ...

    def index_name(self, generation: int) -> str: ...

    async def digests(self, index: str, after: str, size: int) -> list[tuple[str, int, str]]: ...

    async def digests_of(
        self, index: str, chunk_ids: Sequence[str]
    ) -> dict[str, tuple[int, str]]: ...

    async def remove(
        self, index: str, chunk_ids: Sequence[str], versions: Mapping[str, int] | None = None
    ) -> int: ...


class AnswerCacheStore(TaggedCache, ReadCache, Protocol):
    """The cache a process holds: the read path's tagged entries and their eviction."""

    async def close(self) -> None: ...


# What one Postgres adapter offers several audiences: the composition root hands out the
# whole, each handler is typed by the part it uses.
class SourcePorts(SourceRegistry, SourceCatalog, Protocol):
    """The source registry, for the indexer and the connectors alike."""


class PurgeRecords(PurgeStore, RetentionStore, PurgeReadBack, Protocol):
    """Tombstones, purge receipts and retention."""

    async def pending(self) -> list[TombstoneRow]: ...

    async def receipt(
        self, tenant_id: str, doc_id: str, sequence: int
    ) -> dict[str, Any] | None: ...


class OutboxPorts(Outbox, DeadLetterLog, Protocol):
    """The outbox and the dead-letter log it also keeps."""


class LineagePorts(Lineage, LineageRegistry, Protocol):
    """Lineage of derived artifacts: registered by readers, invalidated by purges."""


class ConnectorPorts(ConnectorState, CdcLedger, Protocol):
    """What connectors keep: fingerprints, sequences, CDC positions."""

    async def behind(self, source_id: str) -> int: ...


class ChunkPorts(ChunkStore, Protocol):
    """The chunk store, and the listing `govindex documents` shows."""

    async def documents(self, source_id: str) -> list[DocumentRow]: ...
