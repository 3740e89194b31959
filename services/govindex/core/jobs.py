"""Operator jobs: replays, redrives, offset resets, rebuilds and backfills as records.

Every operation is a job recorded in Postgres: who asked, with which arguments, dry-run or
not, its state, its checkpoint and its outcome counts. A job is dry-run unless asked to
execute; it advances in steps that commit their effect and checkpoint together, so a job
whose process died resumes from its last step; its rate can change while it runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from govindex.core.errors import GovindexError

# A running job's process writes a heartbeat at every step; one silent for this long died.
STALE_AFTER_S = 30.0


# Who a job started by a worker process itself is recorded as requested by (the rebuild of
# an index the OpenSearch server lost).
SELF_HEAL = "govindex self-heal"


class JobState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (JobState.CANCELLED, JobState.SUCCEEDED, JobState.FAILED)


class JobError(GovindexError):
    """A job cannot do what was asked (unknown id, wrong state): the message says why."""


class JobTakenOver(JobError):
    """Another run of the job took it over (a resume while this one was still stepping):
    this run's step was rolled back and it stops, leaving the job to the other run."""


# The run this task is: the token `jobs.runner` holds while it runs the job. Every step is
# fenced on it, so two runs of one job (a resume racing a pause) never both commit.
RUN: ContextVar[str | None] = ContextVar("govindex_job_run", default=None)


class Job(BaseModel):
    """One row of the jobs table."""

    model_config = ConfigDict(frozen=True)

    id: int
    kind: str
    requested_by: str
    args: dict[str, Any]
    dry_run: bool
    state: JobState
    rate: float | None = Field(default=None, gt=0)
    total: int | None = None
    done: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    checkpoint: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    runner: str | None = None
    heartbeat_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None


@dataclass(frozen=True)
class JobItem:
    """One record a job looked at, and what it did with it (or would, in a dry run)."""

    topic: str
    partition: int
    offset: int
    event_id: str
    doc_key: str
    event_type: str
    sequence: int | None
    outcome: str
    reason: str = ""


@dataclass(frozen=True)
class StepOutcome:
    """What the jobs table says after a step: whether to go on, and at what rate."""

    state: JobState
    rate: float | None


class JobStore(Protocol):
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

    async def claim(self, job_id: int, runner: str, *, runner_gone: bool = False) -> Job:
        """Take a paused or failed job, or a running one whose process stopped beating (or
        is known to be gone), to run it here from its checkpoint; JobError otherwise."""
        ...

    async def set_state(self, job_id: int, state: JobState, error: str | None = None) -> Job: ...

    async def set_rate(self, job_id: int, rate: float | None) -> Job: ...

    async def start(self, job_id: int, total: int | None, checkpoint: Mapping[str, Any]) -> None:
        """The job's scope, fixed once (a resumed job keeps the one it had)."""
        ...

    async def beat(self, job_id: int) -> StepOutcome: ...


@dataclass
class Pacer:
    """Holds a job to `rate` items per second (None: as fast as it goes); the rate can
    change between steps. Waits are cut short when `wake` is set."""

    rate: float | None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _start: float = field(default=0.0, init=False)
    _items: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._start = self.clock()

    def retune(self, rate: float | None) -> None:
        if rate != self.rate:  # a new rate counts from now
            self.rate, self._start, self._items = rate, self.clock(), 0.0

    async def pace(self, items: int) -> None:
        self._items += items
        if self.rate is None:
            return
        due = self._start + self._items / self.rate
        wait = due - self.clock()
        if wait > 0:
            await self.sleep(wait)

    def batch(self, default: int) -> int:
        """How many items one step may take: about half a second's worth at the rate."""
        if self.rate is None:
            return default
        return max(1, min(default, int(self.rate / 2)))
