"""`govindex reindex`: rebuild, verify or switch the OpenSearch projection, as a job.

A build registers the next generation as `building` before it copies: from then on every
worker writes each batch to it as well as to the live generation (and purges reach every
generation). It copies Postgres's chunks in chunk id order with the last id as checkpoint;
a step re-sent after a crash is a no-op (external version = sequence). Then it verifies the
generation against Postgres chunk by chunk (sequence and content hash, both directions),
repairs the differences that persist once in-flight writes have landed (a copy that raced a
purge, a write that raced the copy) and goes round again until a round finds nothing to
repair; only then does it point the alias at it, atomically. A cancelled build is retired
and its index dropped; a paused or killed one continues with `govindex jobs resume`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from govindex.core.jobs import Job, JobError, JobState, Pacer
from govindex.core.records import Chunk
from govindex.runtime.composition import Runtime
from govindex.runtime.job_types import Progress

log = structlog.get_logger(__name__)
REINDEX = "reindex"
COPY_STEP = 1000  # chunks per step at most (fewer at a low rate)
PAGE = 1000  # chunks per page of a comparison
ROUNDS = 5  # comparisons before a verification gives up
SETTLE_S = 2.0  # how long in-flight writes get to land before a difference counts


async def run_reindex(rt: Runtime, job: Job, progress: Progress) -> Job:
    """Run (or continue) a reindex job: build (default), verify, or switch."""
    mode = job.args.get("mode", "build")
    if mode == "build":
        return await _build(rt, job, progress)
    generation = job.args.get("generation") or await rt.index.live_generation()
    if generation is None:
        raise JobError("the index alias points at no generation; run `govindex reindex` first")
    state = await rt.generations.get(int(generation))
    if state is None:
        raise JobError(f"generation {generation} was never registered")
    if mode == "switch" and state != "building":
        raise JobError(f"generation {generation} is {state}; only a building one can be switched")
    total = await rt.generations.stored_chunks()
    await rt.jobs.start(job.id, total, {"generation": generation, "phase": "verify"})
    counts = dict(job.counts)
    progress(0, total)
    clean = await _verify(rt, job, int(generation), counts, 0, repair=not job.dry_run)
    if mode == "switch" and not job.dry_run:
        if not clean:
            raise JobError(f"generation {generation} differs from Postgres; not switched")
        await _switch(rt, int(generation))
        counts["switched"] = 1
    await rt.jobs.record(
        job.id, done=total, counts=counts, checkpoint=_point(job, "done"), finished=True
    )
    progress(total, total)
    return await _final(rt, job)


async def _build(rt: Runtime, job: Job, progress: Progress) -> Job:
    counts = dict(job.counts)
    if job.dry_run:
        total = await rt.generations.stored_chunks()
        live = await rt.index.live_generation()
        await rt.jobs.start(job.id, total, {"live": live})
        counts = {"chunks_to_copy": total}
        await rt.jobs.record(job.id, done=0, counts=counts, checkpoint={}, finished=True)
        return await _final(rt, job)
    if "generation" not in job.checkpoint:  # registered before anything is copied
        generation = await rt.generations.begin(rt.index.index_name, job.id)
        await rt.index.ensure_template()
        await rt.index.create_generation(generation)
        total = await rt.generations.stored_chunks()
        checkpoint = {"generation": generation, "phase": "copy", "after": ""}
        await rt.jobs.start(job.id, total, checkpoint)
        job = job.model_copy(update={"total": total, "checkpoint": checkpoint})
        log.info("reindex.building", job=job.id, generation=generation, chunks=total)
    generation = int(job.checkpoint["generation"])
    if await rt.generations.get(generation) != "building":
        raise JobError(f"generation {generation} is no longer building; start a new reindex")
    done, after = job.done, str(job.checkpoint.get("after", ""))
    pacer = Pacer(job.rate)
    progress(done, job.total)
    while job.checkpoint.get("phase") == "copy":
        chunks = await _page(rt, after, pacer.batch(COPY_STEP))
        if chunks:
            counts["copied"] = counts.get("copied", 0) + await rt.index.write_generation(
                chunks, generation
            )
            after, done = chunks[-1].chunk_id, done + len(chunks)
        phase = "copy" if chunks else "verify"
        checkpoint = {"generation": generation, "phase": phase, "after": after}
        outcome = await rt.jobs.record(job.id, done=done, counts=counts, checkpoint=checkpoint)
        job = job.model_copy(update={"checkpoint": checkpoint})
        progress(done, job.total)
        if outcome.state != JobState.RUNNING:
            return await _stopped(rt, job, generation, outcome.state)
        pacer.retune(outcome.rate)
        await pacer.pace(len(chunks))
    if job.checkpoint.get("phase") == "verify":
        if not await _verify(rt, job, generation, counts, done, repair=True):
            raise JobError(
                f"generation {generation} still differs from Postgres after {ROUNDS} rounds of "
                f"repairs; `govindex reindex --verify --generation {generation}` lists them"
            )
        state = (await rt.jobs.beat(job.id)).state
        if state != JobState.RUNNING:
            return await _stopped(rt, job, generation, state)
        switch = job.args.get("switch", True)
        if switch:
            await _switch(rt, generation)
            counts["switched"] = 1
        checkpoint = {"generation": generation, "phase": "done"}
        await rt.jobs.record(job.id, done=done, counts=counts, checkpoint=checkpoint, finished=True)
        log.info("reindex.built", job=job.id, generation=generation, switched=switch)
    return await _final(rt, job)


async def _page(rt: Runtime, after: str, n: int) -> list[Chunk]:
    pages = rt.chunks.iter_all_chunks(batch=n, after=after)
    try:
        return await anext(pages, [])
    finally:
        await pages.aclose()  # type: ignore[attr-defined]


async def _differences(rt: Runtime, index: str) -> set[str]:
    """Chunk ids whose (sequence, content hash) differ between Postgres and `index`, or that
    one side holds and the other not: Postgres paged against the index, then the reverse."""
    await rt.index.refresh()
    found: set[str] = set()
    after = ""
    while page := await rt.generations.digests(after, PAGE):
        held = await rt.index.digests_of(index, [c for c, _, _ in page])
        found |= {c for c, q, h in page if held.get(c) != (q, h)}
        after = page[-1][0]
    after = ""
    while page := await rt.index.digests(index, after, PAGE):
        stored = await rt.generations.digests_of([c for c, _, _ in page])
        found |= {c for c, q, h in page if stored.get(c) != (q, h)}
        after = page[-1][0]
    return found


async def _confirmed(rt: Runtime, index: str, ids: set[str]) -> tuple[list[str], dict[str, int]]:
    """Of `ids`, those still differing once in-flight writes landed: the ids to write from
    Postgres, and the ids to remove with the sequence the index holds them at."""
    await asyncio.sleep(SETTLE_S)
    await rt.index.refresh()
    wanted = sorted(ids)
    stored = await rt.generations.digests_of(wanted)
    held = await rt.index.digests_of(index, wanted)
    differing = [c for c in wanted if stored.get(c) != held.get(c)]
    extra = {c: held[c][0] for c in differing if c not in stored}
    return [c for c in differing if c in stored], extra


async def _verify(
    rt: Runtime, job: Job, generation: int, counts: dict[str, int], done: int, *, repair: bool
) -> bool:
    """Compare the generation with Postgres (and repair it); whether it ended equal."""
    index = rt.index.index_name(generation)
    for round_ in range(1, ROUNDS + 1):
        found = await _differences(rt, index)
        write, remove = await _confirmed(rt, index, found) if found else ([], {})
        counts["verify_rounds"] = round_
        log.info(
            "reindex.verified",
            job=job.id,
            round=round_,
            missing_or_stale=len(write),
            extra=len(remove),
            in_flight=len(found) - len(write) - len(remove),
        )
        if not write and not remove:
            counts["differences"] = 0
            return True
        counts["differences"] = len(write) + len(remove)
        if not repair:
            counts["missing_or_stale"], counts["extra"] = len(write), len(remove)
            return False
        chunks = await rt.chunks.chunks_by_id(write)
        counts["repaired"] = counts.get("repaired", 0) + await rt.index.write_generation(
            chunks, generation, repair=True
        )
        counts["removed"] = counts.get("removed", 0) + await rt.index.remove(
            index, list(remove), remove
        )
        await rt.jobs.record(job.id, done=done, counts=counts, checkpoint=_point(job, "verify"))
    return False


async def _switch(rt: Runtime, generation: int) -> None:
    """The alias first (workers write to it and to the building list, which still names the
    generation), then the registry: no batch is written to the old generation only."""
    await rt.index.point_alias(generation)
    await rt.generations.go_live(generation)


async def _stopped(rt: Runtime, job: Job, generation: int, state: JobState) -> Job:
    if state == JobState.CANCELLED:  # abandoned: workers stop writing to it, its index goes
        await rt.generations.retire(generation)
        await rt.index.drop_generation(generation)
        log.info("reindex.abandoned", job=job.id, generation=generation)
    return await _final(rt, job)


def _point(job: Job, phase: str) -> dict[str, Any]:
    return {**job.checkpoint, "phase": phase}


async def _final(rt: Runtime, job: Job) -> Job:
    final = await rt.jobs.get(job.id)
    assert final is not None
    return final
