"""What each kind of job takes: one pydantic model per kind, read from the admin API's JSON
and built by the CLI's options, and the arguments its runner reads, worked out from it.

Every name is one bounded line and every number bounded; the booleans and numbers that decide
what a job does are strict (`StrictBool`, `StrictInt`), so a "yes" or a "1" never becomes
true or a count. The admin API validates these from JSON with `strict=True` besides.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    model_validator,
)

from govindex.core.inputs import SINGLE_LINE
from govindex.core.jobs import JobError
from govindex.core.paths import check_patterns
from govindex.runtime.composition import Runtime

INT32 = 2**31 - 1  # Kafka partitions, index generations (Postgres integer)
INT64 = 2**63 - 1  # Kafka offsets

# Source ids, consumer groups, topics (Kafka allows 249 characters), reasons, consumers.
Name = Annotated[str, Field(min_length=1, max_length=255), SINGLE_LINE]
# Which documents: .gitignore-style patterns over doc ids, refused if pathspec would.
DocPatterns = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=1024), SINGLE_LINE]],
    Field(max_length=1000),
    AfterValidator(check_patterns),
]


def _true(value: bool) -> bool:
    if not value:
        raise ValueError("give true, or leave it out")
    return value


# A flag that is there (true) or absent: `Literal[True]` would take 1 for true.
Flag = Annotated[StrictBool, AfterValidator(_true)]


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
    source: Name
    since: AwareDatetime = Field(alias="from")
    until: AwareDatetime | None = Field(default=None, alias="to")
    docs: DocPatterns = Field(default_factory=list)
    types: list[Literal["created", "updated", "deleted"]] = Field(
        default_factory=list, max_length=16
    )

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
    reason: Name | None = None
    consumer: Name | None = None
    since: AwareDatetime | None = None
    max: StrictInt | None = Field(default=None, ge=1, le=INT32)

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "consumer": self.consumer,
            "since": self.since.isoformat() if self.since else None,
            "max": self.max,
        }


class ResetTarget(_Request):
    datetime: AwareDatetime | None = None
    offset: StrictInt | None = Field(default=None, ge=0, le=INT64)
    shift_by: StrictInt | None = Field(default=None, ge=-INT64, le=INT64)
    earliest: Flag | None = None
    latest: Flag | None = None

    @model_validator(mode="after")
    def _one(self) -> ResetTarget:
        if len(self.model_dump(exclude_none=True)) != 1:
            raise ValueError("give exactly one of datetime, offset, shift_by, earliest, latest")
        return self


class ResetJob(_Request):
    kind: Literal["offsets-reset"]
    group: Name
    topic: Name
    partition: StrictInt | None = Field(default=None, ge=0, le=INT32)
    to: ResetTarget

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        from govindex.control.offsets import group_name

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
    generation: StrictInt | None = Field(default=None, ge=1, le=INT32)
    switch: StrictBool = True

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
    source: Name
    docs: DocPatterns = Field(default_factory=list)

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        manifest = await rt.registry.find(self.source)
        if manifest is None or not manifest.enabled:
            state = "not registered" if manifest is None else "disabled in its manifest"
            raise JobError(f"source {self.source!r} is {state}; a backfill reads enabled sources")
        return {"source": self.source, "docs": self.docs}


class ReembedJob(_Request):
    kind: Literal["reembed"]
    switch: StrictBool = True

    async def _args(self, rt: Runtime) -> dict[str, Any]:
        from govindex.control.reembed import target

        embedder = target(rt)
        return {"model": f"{embedder.name}/{embedder.version}", "switch": self.switch}


JobRequest = ReplayJob | RedriveJob | ResetJob | ReindexJob | BackfillJob | ReembedJob
