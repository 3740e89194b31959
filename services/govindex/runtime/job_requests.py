"""What each kind of job takes: one pydantic model per kind, read from the admin API's JSON
and built by the CLI's options, and the arguments its runner reads, worked out from it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from govindex.core.jobs import JobError
from govindex.core.records import Patterns
from govindex.runtime.composition import Runtime


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    async def args(self, rt: Runtime) -> dict[str, Any]:
        """The job's arguments as its runner reads them (empty ones left out)."""
        found = await self._args(rt)
        return {k: v for k, v in found.items() if v not in (None, [], "")}

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        raise NotImplementedError


class ReplayJob(_Request):
    kind: Literal["replay"]
    source: str
    since: AwareDatetime = Field(alias="from")
    until: AwareDatetime | None = Field(default=None, alias="to")
    docs: Patterns = Field(default_factory=list)
    types: list[Literal["created", "updated", "deleted"]] = Field(default_factory=list)

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        manifest = await rt.registry.find(self.source)
        until = self.until or datetime.now(UTC)
        if until <= self.since:
            raise JobError(f"'to' ({until.isoformat()}) is not after 'from'")
        return {
            "source": self.source,
            "tenant": manifest.tenant if manifest else None,
            "since": self.since.isoformat(),
            "until": until.isoformat(),
            "docs": self.docs,
            "kinds": list(dict.fromkeys(self.types)),
        }


class RedriveJob(_Request):
    kind: Literal["dlq-redrive"]
    reason: str | None = None
    consumer: str | None = None
    since: AwareDatetime | None = None
    max: int | None = Field(default=None, ge=1)

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "consumer": self.consumer,
            "since": self.since.isoformat() if self.since else None,
            "max": self.max,
        }


class ResetTarget(_Request):
    datetime: AwareDatetime | None = None
    offset: int | None = Field(default=None, ge=0)
    shift_by: int | None = None
    earliest: Literal[True] | None = None
    latest: Literal[True] | None = None

    @model_validator(mode="after")
    def _one(self) -> ResetTarget:
        if len(self.model_dump(exclude_none=True)) != 1:
            raise ValueError("give exactly one of datetime, offset, shift_by, earliest, latest")
        return self


class ResetJob(_Request):
    kind: Literal["offsets-reset"]
    group: str
    topic: str
    partition: int | None = Field(default=None, ge=0)
    to: ResetTarget

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        from govindex.runtime.offsets import group_name

        ns = rt.settings.namespace
        to = self.to.model_dump(exclude_none=True, mode="json")
        return {
            "group": group_name(rt.settings, self.group),
            "topic": self.topic if "." in self.topic else f"{ns}.{self.topic}",
            "to": to,
            "partition": self.partition,
        }


class ReindexJob(_Request):
    kind: Literal["reindex"]
    mode: Literal["build", "verify", "switch"] = "build"
    generation: int | None = Field(default=None, ge=1)
    switch: bool = True

    @model_validator(mode="after")
    def _generation(self) -> ReindexJob:
        if self.mode == "switch" and self.generation is None:
            raise ValueError("mode switch needs the generation to switch to")
        if self.mode == "build" and self.generation is not None:
            raise ValueError("a build makes a new generation; give no generation")
        return self

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        if self.mode == "build":
            return {"mode": "build", "switch": self.switch}
        return {"mode": self.mode, "generation": self.generation}


class BackfillJob(_Request):
    kind: Literal["backfill"]
    source: str
    docs: Patterns = Field(default_factory=list)

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        manifest = await rt.registry.find(self.source)
        if manifest is None or not manifest.enabled:
            state = "not registered" if manifest is None else "disabled in its manifest"
            raise JobError(f"source {self.source!r} is {state}; a backfill reads enabled sources")
        return {"source": self.source, "docs": self.docs}


JobRequest = ReplayJob | RedriveJob | ResetJob | ReindexJob | BackfillJob
