"""The admin API's contract: an OpenAPI 3.1 document built from its job models, served at
GET /openapi.json and GET /docs (no credential) and committed in `schemas/`.

The admin module passes its request models in (`admin.admin_openapi`): it imports this one
to serve the document, so this one cannot import it back."""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any

from pydantic import BaseModel, Field

from govindex.core.jobs import Job, JobItem
from govindex.core.schemas import Components, Mode, components
from reader.models import ApiError, Readiness
from reader.openapi import BEARER, answer, document, json_content, refusals

TITLE = "govindex admin API"
# The admin's refusals are bodies of the read API's error shape: error, reason, field.


def _types(
    start: type[BaseModel], rate: type[BaseModel], max_id: int
) -> dict[str, tuple[Any, Mode]]:
    return {
        "StartJob": (start, "validation"),
        "SetRate": (rate, "validation"),
        "Job": (Job, "serialization"),
        "Jobs": (list[Job], "serialization"),
        "JobItems": (list[JobItem], "serialization"),
        "Readiness": (Readiness, "serialization"),
        "ApiError": (ApiError, "serialization"),
        "JobId": (Annotated[int, Field(ge=0, le=max_id)], "validation"),
        "Limit": (Annotated[int, Field(ge=1, le=1000)], "validation"),
        "Kind": (Annotated[str, Field(min_length=1, max_length=64)], "validation"),
        "Operator": (Annotated[str, Field(min_length=1, max_length=128)], "validation"),
    }


def _job_id(s: Components) -> dict[str, Any]:
    return {"name": "job_id", "in": "path", "required": True, "schema": s.of("JobId")}


def _operation(
    s: Components,
    operation: str,
    summary: str,
    answered: str,
    *,
    status: int = 200,
    errors: tuple[int, ...] = (401, 503),
    body: str | None = None,
    parameters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    found: dict[str, Any] = {"operationId": operation, "summary": summary}
    if parameters:
        found["parameters"] = parameters
    if body is not None:
        found["requestBody"] = {"required": True, "content": json_content(s.of(body))}
    found["responses"] = {
        str(status): answer(summary, s.of(answered, "serialization")),
        **refusals(sorted(errors), s.of("ApiError", "serialization")),
    }
    return found


def _on_job(s: Components, verb: str, summary: str, status: int = 200) -> dict[str, Any]:
    return {
        "post": _operation(
            s,
            verb,
            summary,
            "Job",
            status=status,
            errors=(400, 401, 404, 409, 503),
            parameters=[_job_id(s)],
        )
    }


# Long on purpose: the admin API's route table, one entry per route, read top to bottom.
@functools.cache
def _built(start: type[BaseModel], rate: type[BaseModel], max_id: int, operator_header: str) -> str:
    s = components(_types(start, rate, max_id))
    operator = {
        "name": operator_header,
        "in": "header",
        "required": False,
        "description": "Who asks (recorded as http:<operator>); default admin-api.",
        "schema": s.of("Operator"),
    }
    listing = [
        {"name": "kind", "in": "query", "required": False, "schema": s.of("Kind")},
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {**s.of("Limit"), "default": 20},
        },
    ]
    paths = {
        "/healthz": {
            "get": {
                "operationId": "healthz",
                "summary": "Live",
                "security": [],
                "responses": {"200": answer("Live", s.of("Readiness", "serialization"))},
            }
        },
        "/livez": {
            "get": {
                "operationId": "livez",
                "summary": "Live while the event loop answers (no I/O)",
                "security": [],
                "responses": {"200": answer("Live", s.of("Readiness", "serialization"))},
            }
        },
        "/readyz": {
            "get": {
                "operationId": "readyz",
                "summary": "Ready while PostgreSQL and the broker answer",
                "security": [],
                "responses": {
                    "200": answer("Ready", s.of("Readiness", "serialization")),
                    "503": answer("What is down, and why", s.of("Readiness", "serialization")),
                },
            }
        },
        "/v1/jobs": {
            "get": _operation(
                s,
                "jobs",
                "Recent jobs, newest first",
                "Jobs",
                errors=(400, 401, 503),
                parameters=listing,
            ),
            "post": _operation(
                s,
                "start",
                "Start a job (a dry run unless execute is true)",
                "Job",
                status=202,
                errors=(400, 401, 404, 409, 413, 503),
                body="StartJob",
                parameters=[operator],
            ),
        },
        "/v1/jobs/{job_id}": {
            "get": _operation(
                s,
                "show",
                "One job: arguments, state, checkpoint, counts",
                "Job",
                errors=(400, 401, 404, 503),
                parameters=[_job_id(s)],
            )
        },
        "/v1/jobs/{job_id}/items": {
            "get": _operation(
                s,
                "items",
                "What the job did (or would do) with each record",
                "JobItems",
                errors=(400, 401, 404, 503),
                parameters=[_job_id(s)],
            )
        },
        "/v1/jobs/{job_id}/pause": _on_job(s, "pause", "Pause after its current step"),
        "/v1/jobs/{job_id}/cancel": _on_job(s, "cancel", "Cancel after its current step"),
        "/v1/jobs/{job_id}/resume": _on_job(
            s, "resume", "Continue it here, from its checkpoint", 202
        ),
        "/v1/jobs/{job_id}/rate": {
            "post": _operation(
                s,
                "rate",
                "Set its rate (items per second; null: unlimited)",
                "Job",
                errors=(400, 401, 404, 409, 413, 503),
                body="SetRate",
                parameters=[_job_id(s)],
            )
        },
    }
    security = {
        BEARER: {
            "type": "http",
            "scheme": "bearer",
            "description": "The admin token (GOVINDEX_ADMIN_TOKEN).",
        }
    }
    description = (
        "Operator jobs over HTTP: the same jobs as the CLI, recorded in the same table. "
        "Served on an internal network only."
    )
    return json.dumps(
        document(title=TITLE, description=description, security=security, paths=paths, schemas=s)
    )


def admin_document(
    start: type[BaseModel], rate: type[BaseModel], *, max_id: int, operator_header: str
) -> dict[str, Any]:
    """The admin API's OpenAPI 3.1 document over its request models `start` (POST /v1/jobs)
    and `rate` (POST /v1/jobs/{id}/rate), job ids up to `max_id` and the operator header
    (a fresh copy: callers may change it)."""
    found: dict[str, Any] = json.loads(_built(start, rate, max_id, operator_header))
    return found
