"""Retry transient failures with capped exponential backoff and jitter."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from govindex.core import metrics
from govindex.core.errors import TransientError

T = TypeVar("T")
log = structlog.get_logger(__name__)


async def retry_transient(
    operation: Callable[[], Awaitable[T]],
    *,
    what: str,
    initial: float = 0.2,
    maximum: float = 5.0,
    give_up_after: float = 60.0,
) -> T:
    """Run `operation` until it stops raising TransientError, or `give_up_after` seconds pass.

    Giving up re-raises the TransientError: the caller must then leave the offset uncommitted
    so the message is redelivered, never dead-letter it.
    """
    delay = initial
    deadline = time.monotonic() + give_up_after
    attempt = 0
    while True:
        attempt += 1
        try:
            return await operation()
        except TransientError as exc:
            if time.monotonic() + delay > deadline:
                raise
            metrics.RETRIES.labels(metrics.consumer_label(what)).inc()
            log.warning(
                "retry.transient", what=what, attempt=attempt, delay_s=delay, error=str(exc)
            )
            await asyncio.sleep(delay * (0.5 + random.random() / 2))
            delay = min(maximum, delay * 2)
