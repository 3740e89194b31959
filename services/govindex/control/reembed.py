"""`govindex reembed`: build a model's vector generation beside the live one, as a job.

The model is the one chunks are embedded with last: GOVINDEX_EMBEDDER_NEXT while a change
of model is under way, else GOVINDEX_EMBEDDER. Its generation is registered first (with
its HNSW index), so from then on every indexer embeds new chunks with it as well as with
the live model; the job then embeds, from the text Postgres holds, every chunk that lacks
its vector, in chunk id order with the last id as checkpoint, paced by the job's rate. A
chunk a step embeds twice (a crash, a write that raced it) is stored once. When nothing is
missing it switches: the new generation becomes live and the old one retired in one
commit, so every read after it ranks by the new model and none mixes the two. A paused or
killed job continues with `govindex jobs resume`; `--no-switch` builds without switching.
"""

from __future__ import annotations

import asyncio

import structlog

from govindex.core.jobs import Job, JobError, JobState, Pacer
from govindex.core.ports import Embedder
from govindex.runtime.composition import Runtime
from govindex.runtime.job_types import Progress

log = structlog.get_logger(__name__)
REEMBED = "reembed"
STEP = 256  # chunks per step at most (fewer at a low rate)
ROUNDS = 5  # catch-up passes for chunks written while it ran, before a switch gives up


def target(rt: Runtime) -> Embedder:
    """The model a reembed job builds: the next one if configured, else today's."""
    if not rt.embedders:
        raise JobError("no embedder is configured (GOVINDEX_EMBEDDER=none): nothing to embed")
    return rt.embedders[-1]


async def run_reembed(rt: Runtime, job: Job, progress: Progress) -> Job:
    embedder = target(rt)
    model = (embedder.name, embedder.version)
    wanted = job.args.get("model")
    if wanted and wanted != f"{model[0]}/{model[1]}":
        raise JobError(
            f"this job builds {wanted}, but this process embeds with {model[0]}/{model[1]}; "
            "resume it where GOVINDEX_EMBEDDER_NEXT names that model"
        )
    have, total = await rt.vectors.count(*model)
    if job.dry_run:
        await rt.jobs.start(job.id, total, {"model": f"{model[0]}/{model[1]}"})
        counts = {"chunks_to_embed": total - have, "chunks": total}
        await rt.jobs.record(job.id, done=0, counts=counts, checkpoint={}, finished=True)
        return await _final(rt, job)
    if "after" not in job.checkpoint:
        generation = await rt.vectors.ensure_generation(*model, embedder.dims)
        checkpoint = {"after": "", "round": 1}
        await rt.jobs.start(job.id, total - have, checkpoint)
        job = job.model_copy(update={"total": total - have, "checkpoint": checkpoint})
        log.info("reembed.building", job=job.id, model=model, state=generation.state)
    counts = dict(job.counts)
    done, after = job.done, str(job.checkpoint["after"])
    rounds = int(job.checkpoint.get("round", 1))
    pacer = Pacer(job.rate)
    progress(done, job.total)
    while True:
        rows = await rt.vectors.missing_after(*model, after, pacer.batch(STEP))
        if rows:
            ids = [chunk_id for chunk_id, _ in rows]
            made = await asyncio.to_thread(embedder.embed, [text for _, text in rows])
            await rt.vectors.put(ids, made, model)
            after, done = ids[-1], done + len(rows)
            counts["embedded"] = counts.get("embedded", 0) + len(rows)
        elif await rt.vectors.missing(*model, 1):
            # Chunks written behind the cursor while it ran (their indexer could not
            # embed them then): one more pass from the start catches them.
            rounds += 1
            if rounds > ROUNDS:
                raise JobError(
                    f"chunks still lack {model[0]}/{model[1]} vectors after {ROUNDS} passes "
                    "(is the model's service down?); resume the job when it is back"
                )
            after = ""
        else:
            break
        checkpoint = {"after": after, "round": rounds}
        outcome = await rt.jobs.record(job.id, done=done, counts=counts, checkpoint=checkpoint)
        job = job.model_copy(update={"checkpoint": checkpoint})
        progress(done, max(job.total or 0, done))
        if outcome.state != JobState.RUNNING:
            return await _final(rt, job)
        pacer.retune(outcome.rate)
        await pacer.pace(len(rows))
    if job.args.get("switch", True):
        switched = await rt.vectors.switch_generation(*model)
        counts["switched"] = int(switched)
        log.info("reembed.switched", job=job.id, model=model, switched=switched)
    await rt.jobs.record(
        job.id, done=done, counts=counts, checkpoint={"after": after, "done": True}, finished=True
    )
    progress(done, max(job.total or 0, done))
    return await _final(rt, job)


async def _final(rt: Runtime, job: Job) -> Job:
    final = await rt.jobs.get(job.id)
    assert final is not None
    return final
