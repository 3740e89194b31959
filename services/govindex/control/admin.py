"""The admin API: operator jobs over HTTP, behind one bearer token.

    GET  /v1/jobs[?kind=K&limit=N]      recent jobs, newest first
    GET  /v1/jobs/{id}                  one job: arguments, state, checkpoint, counts
    GET  /v1/jobs/{id}/items            what it did (or would do) with each record
    POST /v1/jobs                       start one (dry run unless "execute": true): 202
    POST /v1/jobs/{id}/pause|cancel     after its current step
    POST /v1/jobs/{id}/resume           continue it here, from its checkpoint: 202
    POST /v1/jobs/{id}/rate             {"rate": N} or {"rate": null} (unlimited)
    GET  /healthz, /livez               live (the event loop answers), without the token
    GET  /readyz                        ready while PostgreSQL and the broker answer
    GET  /openapi.json, /docs           the contract (OpenAPI 3.1), without the token

The same jobs as the CLI, with the same arguments, recorded in the same table; a job
started here runs in this process (a task), and `govindex jobs resume` takes it over if
this process dies. No token or a wrong one: 401. A malformed request: 400 naming each field;
types are strict, so `"execute": "yes"` (or 1, or "true") is refused and nothing starts. A
body over 64 KiB: 413. A job that cannot do what is asked (wrong state, unknown id): 409 or
404 with the reason. Serve it on an internal network only.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import structlog
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from govindex.control.admin_openapi import TITLE, admin_document
from govindex.control.job_requests import JobRequest
from govindex.control.jobs import launch_job, relaunch_job
from govindex.core.errors import GovindexError, TransientError
from govindex.core.inputs import has_control, quote
from govindex.core.jobs import Job, JobError, JobState
from govindex.runtime.composition import Runtime
from govindex.runtime.listener import Listener
from reader.openapi import CONTRACT_PATHS, add_contract
from reader.wire import ApiRefusal, bad_request, json_answer, read_body

log = structlog.get_logger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPERATOR_HEADER = "X-Govindex-Operator"
BODY_MAX = 64 * 1024  # a job request is a few hundred bytes
MAX_RATE = 1_000_000.0  # items per second; also keeps inf (JSON 1e400) out
MAX_ID = 2**63 - 1  # job ids are Postgres bigints
# What answers without the token: the probe and the contract.
_PUBLIC = frozenset({"/healthz", "/livez", "/readyz", *CONTRACT_PATHS})

# Items per second, bounded; JSON numbers only (strict), an integer is a rate too.
Rate = Annotated[float, Field(gt=0, le=MAX_RATE)]


class _Request(BaseModel):
    # Strict: whether a job acts for real is decided by a JSON `true`, never by "yes", "1"
    # or 1 (the job models below are validated strictly too: see `_body`).
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class StartJob(_Request):
    job: Annotated[JobRequest, Field(discriminator="kind")]
    execute: StrictBool = False
    rate: Rate | None = None


class SetRate(_Request):
    rate: Rate | None


def _job(job: Job, status: int = 200) -> web.Response:
    return web.json_response(job.model_dump(mode="json"), status=status)


async def _body(request: web.Request, model: type[BaseModel]) -> Any:
    """The body as `model`, strictly; every validation problem in one 400 (`ApiError`)."""
    raw = await read_body(request, BODY_MAX)
    try:
        # strict=True here reaches the nested job models, whose own config stays lax for the
        # CLI (it builds them from Python values, datetimes as ISO strings among them).
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        raise bad_request(exc) from None
    except (ValueError, RecursionError):
        raise ApiRefusal(400, "bad_request", "the body is not valid JSON") from None


def _number(raw: str, name: str, low: int, high: int) -> int:
    """A decimal number in [low, high] from a path or query parameter; 400 naming it if not.
    ASCII digits only: `str.isdigit` also says yes to "²", which `int` refuses."""
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19 and low <= int(raw) <= high):
        raise ApiRefusal(400, "bad_request", f"{name} is a number from {low} to {high}", name)
    return int(raw)


def _line(raw: str, name: str, limit: int = 128) -> str:
    """A name from a header or the query string: one line of text, bounded. Header bytes
    that are not UTF-8 arrive as lone surrogates, which no UTF-8 column can hold."""
    if not 1 <= len(raw) <= limit or has_control(raw) or not _utf8(raw):
        raise ApiRefusal(
            400, "bad_request", f"one line of 1 to {limit} characters, not {quote(raw)}", name
        )
    return raw


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _guard(token: str) -> Any:
    expected = token.encode()

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            if request.path not in _PUBLIC:
                scheme, _, given = request.headers.get("Authorization", "").partition(" ")
                # surrogateescape: header bytes that are not UTF-8 compare as the bytes they are
                if scheme.lower() != "bearer" or not hmac.compare_digest(
                    given.strip().encode(errors="surrogateescape"), expected
                ):
                    raise ApiRefusal(
                        401,
                        "unauthorized",
                        "send Authorization: Bearer <admin token>",
                        headers={"WWW-Authenticate": "Bearer"},
                    )
            return await handler(request)
        except ApiRefusal as refusal:
            answer = json_answer(refusal.body, refusal.status)
            answer.headers.update(refusal.headers or {})
            return answer
        except JobError as exc:
            status = 404 if str(exc).startswith("no job") else 409
            return web.json_response({"error": "refused", "reason": str(exc)}, status=status)
        except TransientError as exc:
            log.warning("admin.unavailable", error=str(exc))
            body = {"error": "unavailable", "reason": "a server the job needs is unreachable"}
            return web.json_response(body, status=503)
        except GovindexError as exc:
            return web.json_response({"error": "refused", "reason": str(exc)}, status=409)

    return guard


def build_admin_app(rt: Runtime, token: str, tasks: set[asyncio.Task[Job]]) -> web.Application:
    def job_id(request: web.Request) -> int:
        return _number(request.match_info["job_id"], "job_id", 0, MAX_ID)

    async def existing(request: web.Request) -> Job:
        found = await rt.jobs.get(job_id(request))
        if found is None:
            raise ApiRefusal(404, "not_found", "no such job")
        return found

    def keep(task: asyncio.Task[Job]) -> None:
        tasks.add(task)
        task.add_done_callback(_finished(tasks))

    async def jobs(request: web.Request) -> web.Response:
        limit = _number(request.query.get("limit", "20"), "limit", 1, 1000)
        kind = request.query.get("kind")
        found = await rt.jobs.recent(limit, None if kind is None else _line(kind, "kind", 64))
        return web.json_response([j.model_dump(mode="json") for j in found])

    async def show(request: web.Request) -> web.Response:
        return _job(await existing(request))

    async def items(request: web.Request) -> web.Response:
        job = await existing(request)
        return web.json_response([vars(x) for x in await rt.jobs.items(job.id)])

    async def start(request: web.Request) -> web.Response:
        operator = _line(request.headers.get(OPERATOR_HEADER) or "admin-api", OPERATOR_HEADER)
        body: StartJob = await _body(request, StartJob)
        args = await body.job.args(rt)
        job, task = await launch_job(
            rt,
            body.job.kind,
            args,
            dry_run=not body.execute,
            rate=body.rate,
            requested_by=f"http:{operator}",
        )
        keep(task)
        return _job(job, 202)

    async def pause(request: web.Request) -> web.Response:
        return _job(await _set(await existing(request), JobState.PAUSED))

    async def cancel(request: web.Request) -> web.Response:
        return _job(await _set(await existing(request), JobState.CANCELLED))

    async def _set(job: Job, state: JobState) -> Job:
        if job.state.finished:
            raise ApiRefusal(409, "refused", f"job {job.id} is already {job.state.value}")
        return await rt.jobs.set_state(job.id, state)

    async def resume(request: web.Request) -> web.Response:
        job, task = await relaunch_job(rt, (await existing(request)).id)
        keep(task)
        return _job(job, 202)

    async def rate(request: web.Request) -> web.Response:
        body: SetRate = await _body(request, SetRate)
        return _job(await rt.jobs.set_rate((await existing(request)).id, body.rate))

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def readyz(request: web.Request) -> web.Response:
        from govindex.control.health import readiness

        down = await readiness(rt, ())  # jobs need PostgreSQL and the broker
        if down:
            return web.json_response({"ok": False, "down": down}, status=503)
        return web.json_response({"ok": True})

    app = web.Application(middlewares=[_guard(token)])
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/v1/jobs", jobs)
    app.router.add_post("/v1/jobs", start)
    app.router.add_get("/v1/jobs/{job_id}", show)
    app.router.add_get("/v1/jobs/{job_id}/items", items)
    app.router.add_post("/v1/jobs/{job_id}/pause", pause)
    app.router.add_post("/v1/jobs/{job_id}/cancel", cancel)
    app.router.add_post("/v1/jobs/{job_id}/resume", resume)
    app.router.add_post("/v1/jobs/{job_id}/rate", rate)
    add_contract(app, admin_openapi, TITLE)
    return app


def admin_openapi() -> dict[str, Any]:
    """The admin API's OpenAPI 3.1 document, over this module's request models."""
    return admin_document(StartJob, SetRate, max_id=MAX_ID, operator_header=OPERATOR_HEADER)


def _finished(tasks: set[asyncio.Task[Job]]) -> Callable[[asyncio.Task[Job]], None]:
    def done(task: asyncio.Task[Job]) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # recorded as failed
            log.warning("admin.job_failed", error=str(task.exception()))

    return done


class AdminServer:
    """The admin listener on `host:port` (port 0: any free port, reported in `url`)."""

    def __init__(self, rt: Runtime, token: str | None, host: str, port: int) -> None:
        if not token or len(token) < 16:
            raise ValueError(
                "the admin API needs a bearer token of 16 characters or more: set "
                "GOVINDEX_ADMIN_TOKEN (e.g. from `python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'`)"
            )
        self.rt, self.token = rt, token
        self._listener = Listener("admin_api", host, port)
        self._tasks: set[asyncio.Task[Job]] = set()

    async def start(self) -> str:
        return await self._listener.start(build_admin_app(self.rt, self.token, self._tasks))

    async def stop(self) -> None:
        """Stop listening; jobs still running here stop between steps and stay `running`
        with a heartbeat that goes stale, so `govindex jobs resume` can take them over."""
        await self._listener.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
