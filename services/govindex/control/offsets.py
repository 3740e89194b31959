"""`govindex offsets show|reset` and `govindex worker pause|resume`.

A reset has `kafka-consumer-groups --reset-offsets` semantics: targets per partition from a
time, an offset, a shift or either end, clamped to what the partition holds, committed for
the group with manual assignment (no join). The broker refuses to move a group that has
live members; so does govindex, before asking, while any worker process runs that group's
kind unpaused: `govindex worker pause KIND` stops those consumers in every process first.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from govindex.adapters.kafka import GroupOffsets
from govindex.core.jobs import Job, JobError
from govindex.core.settings import Consumers, Settings
from govindex.runtime.composition import Runtime
from govindex.runtime.job_types import Progress, requester

log = structlog.get_logger(__name__)
RESET = "offsets-reset"
KINDS = Consumers.KINDS


def group_name(settings: Settings, group: str) -> str:
    """A group as Kafka names it; a worker's short name (`indexer`) gets the namespace."""
    return group if "." in group else settings.group(group)


def group_kind(settings: Settings, group: str) -> str | None:
    """Which worker kind consumes as `group` (None: not one of govindex's groups)."""
    prefix = f"{settings.namespace}."
    if not group.startswith(prefix):
        return None
    name = group.removeprefix(prefix)
    if name in ("indexer", "indexer-deletions"):
        return "indexer"
    if name == "purger":
        return "purger"
    return "cdc" if name.startswith("cdc.") else None


@dataclass(frozen=True)
class PartitionOffsets:
    partition: int
    first: int
    end: int
    committed: int | None

    @property
    def lag(self) -> int:
        return self.end - (self.committed if self.committed is not None else self.first)


def _read(rt: Runtime, group: str, topic: str, only: int | None) -> list[PartitionOffsets]:
    with GroupOffsets(rt.servers.kafka_bootstrap, rt.kafka_security) as offsets:
        first, end = offsets.bounds(topic)
        committed = offsets.committed(group, topic)
    if only is not None and only not in end:
        raise JobError(f"{topic} has no partition {only}; it has {sorted(end)}")
    return [
        PartitionOffsets(p, first[p], end[p], committed.get(p))
        for p in sorted(end)
        if only is None or p == only
    ]


async def show_offsets(
    rt: Runtime, group: str, topic: str, partition: int | None
) -> list[PartitionOffsets]:
    return await asyncio.to_thread(_read, rt, group, topic, partition)


def _targets(rt: Runtime, args: dict[str, Any]) -> dict[int, tuple[int | None, int]]:
    """partition -> (committed now, target), targets clamped to [first, end]."""
    rows = _read(rt, args["group"], args["topic"], args.get("partition"))
    to = args["to"]
    at: dict[int, int | None] = {}
    if "datetime" in to:
        ms = int(datetime.fromisoformat(to["datetime"]).timestamp() * 1000)
        with GroupOffsets(rt.servers.kafka_bootstrap, rt.kafka_security) as offsets:
            at = offsets.at_time(args["topic"], [r.partition for r in rows], ms)
    plan: dict[int, tuple[int | None, int]] = {}
    for r in rows:
        base = r.committed if r.committed is not None else r.first
        if "earliest" in to:
            target = r.first
        elif "latest" in to:
            target = r.end
        elif "offset" in to:
            target = int(to["offset"])
        elif "shift_by" in to:
            target = base + int(to["shift_by"])
        else:
            found = at.get(r.partition)
            target = r.end if found is None else found
        plan[r.partition] = (r.committed, min(max(target, r.first), r.end))
    return plan


async def live_consumers(rt: Runtime, group: str) -> list[str]:
    """Why the group cannot be moved now: processes running its kind unpaused, or members
    the broker reports; empty when it can."""
    settings = rt.settings
    kind = group_kind(settings, group)
    reasons = []
    if kind is not None:
        for beat in await rt.controls.alive(within_s=3 * settings.control_poll_s):
            if kind in beat.kinds and kind not in beat.paused:
                reasons.append(f"{beat.runner} runs the {kind} worker unpaused")

    def members() -> int | None:
        with GroupOffsets(rt.servers.kafka_bootstrap, rt.kafka_security) as offsets:
            return offsets.members(group)

    count = await asyncio.to_thread(members)
    if count:
        reasons.append(f"the broker reports {count} live member(s) of {group}")
    return reasons


async def run_reset(rt: Runtime, job: Job, progress: Progress) -> Job:
    """Plan the new offsets; with --execute, commit them (refused while the group lives)."""
    args = job.args
    plan = await asyncio.to_thread(_targets, rt, args)
    total = len(plan)
    checkpoint: dict[str, Any] = {
        "plan": {str(p): {"from": c, "to": t} for p, (c, t) in sorted(plan.items())}
    }
    await rt.jobs.start(job.id, total, checkpoint)
    progress(0, total)
    counts = {
        "partitions": total,
        "records_replayed": sum(max((c or 0) - t, 0) for c, t in plan.values()),
        "records_skipped": sum(max(t - (c or 0), 0) for c, t in plan.values() if c is not None),
    }
    live = await live_consumers(rt, args["group"])
    if job.dry_run:
        if live:
            checkpoint["would_be_refused"] = "; ".join(live)
        await rt.jobs.record(job.id, done=0, counts=counts, checkpoint=checkpoint, finished=True)
    else:
        if live:
            raise JobError(
                f"group {args['group']} is live ({'; '.join(live)}); pause its workers with "
                f"`govindex worker pause {group_kind(rt.settings, args['group']) or 'KIND'}` "
                "(or stop its consumers), then run the reset again"
            )

        def commit() -> dict[int, str]:
            targets = {p: t for p, (_, t) in plan.items()}
            with GroupOffsets(rt.servers.kafka_bootstrap, rt.kafka_security) as offsets:
                refused = offsets.commit(args["group"], args["topic"], targets)
                if refused and offsets.members(args["group"]) is None:
                    # The broker cannot say who is in the group and refuses an outside
                    # commit; our workers of it are paused: commit as its only member.
                    log.info("offsets.commit_as_member", group=args["group"], refused=refused)
                    offsets.commit_as_member(args["group"], args["topic"], targets)
                    return {}
                return refused

        refused = await asyncio.to_thread(commit)
        if refused:
            raise JobError(
                f"the broker refused the new offsets of {args['group']}: "
                + ", ".join(f"partition {p}: {e}" for p, e in sorted(refused.items()))
                + "; a live member (not a govindex worker?) still consumes as this group"
            )
        await rt.jobs.record(
            job.id, done=total, counts=counts, checkpoint=checkpoint, finished=True
        )
    progress(total, total)
    final = await rt.jobs.get(job.id)
    assert final is not None
    return final


async def pause_workers(rt: Runtime, kind: str, paused: bool, wait_s: float = 30.0) -> list[str]:
    """Set the flag, then wait until every live process running `kind` reports it; the
    processes that did (their host:pid). JobError if one did not in time."""
    if kind not in KINDS:
        raise JobError(f"unknown worker {kind!r}; use one of {', '.join(KINDS)}")
    await rt.controls.set_paused(kind, paused, requester())
    poll = rt.settings.control_poll_s
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        beats = [b for b in await rt.controls.alive(within_s=3 * poll) if kind in b.kinds]
        late = [b.runner for b in beats if (kind in b.paused) != paused]
        if not late:
            return [b.runner for b in beats]
        if asyncio.get_running_loop().time() > deadline:
            raise JobError(
                f"{len(late)} process(es) have not {'paused' if paused else 'resumed'} the "
                f"{kind} worker after {wait_s:.0f} s: {', '.join(late)}; the flag is set, "
                "they follow it when they can reach Postgres"
            )
        await asyncio.sleep(poll / 2)
