"""What a job is written against: its progress callback, its runner's signature, and who
runs and asks for it. The jobs engine (control/jobs.py) and every job import this, so no job
imports the engine that runs it."""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Awaitable, Callable

from govindex.core.jobs import Job
from govindex.runtime.composition import Runtime

# done, total: what a command shows in its progress bar.
Progress = Callable[[int, int | None], None]
Runner = Callable[[Runtime, Job, Progress], Awaitable[Job]]


def runner_id() -> str:
    """This process, as heartbeats and jobs name it: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def requester() -> str:
    """Who asked: GOVINDEX_OPERATOR, else the login name."""
    found = os.environ.get("GOVINDEX_OPERATOR")
    if found:
        return found
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
