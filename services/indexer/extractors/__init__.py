"""Extractors, chosen by file type, run where a hostile file cannot stall the indexer.

A file whose type has an extractor (PDF, Word, PowerPoint, Excel, HTML, notebooks) is
turned into canonical text before a parser cuts it (`indexer.extractors.base`). Every
extraction runs in a child process with the time limit enforced from outside, since a
library stuck in C code cannot be interrupted from within: past the limit the child is
killed and the file refused (`timeout`); a child that dies (out of memory, a crash in the
library) refuses the file as `unreadable`. Either way the indexer goes on.
"""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import PurePosixPath

from govindex.core.errors import ExtractionTimeout, PermanentError, Unreadable
from indexer.extractors.base import DEFAULT_LIMITS, Box, Extracted, Extractor, Limits, Page

# name -> extractor; filled by `_register` from the format modules that import cleanly.
EXTRACTORS: dict[str, Extractor] = {}
BY_SUFFIX: dict[str, str] = {}
MEMORY_LIMIT = 2 * 1024 * 1024 * 1024  # address space of the child, bytes


def _register() -> None:
    from indexer.extractors import formats

    for extractor in formats.ALL:
        EXTRACTORS[extractor.name] = extractor
        for suffix in extractor.suffixes:
            BY_SUFFIX[suffix] = extractor.name


def extractor_for(path: str | None) -> Extractor | None:
    """The extractor for a file's type, or None when a parser reads it as it is."""
    if not EXTRACTORS:
        _register()
    name = BY_SUFFIX.get(PurePosixPath(path or "").suffix.lower())
    return EXTRACTORS.get(name) if name else None


def is_binary(path: str | None) -> bool:
    """Whether a file of this type travels as bytes (base64) rather than UTF-8 text."""
    extractor = extractor_for(path)
    return extractor is not None and extractor.binary


class Sandbox:
    """One child process, reused while it behaves; replaced after a timeout or a crash."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def run(
        self, extractor: Extractor, data: bytes, what: str, limits: Limits = DEFAULT_LIMITS
    ) -> Extracted:
        """`extractor.extract(data)` in the child; its refusals come back as they are."""
        with self._lock:  # one extraction at a time: the child is one process
            pool = self._pool or self._start()
            future = pool.submit(_extract, extractor, data, limits)
            try:
                return future.result(timeout=limits.timeout_seconds)
            except FutureTimeout:
                self._kill()
                raise ExtractionTimeout(
                    f"{what}: extractor {extractor.name} {extractor.version} ran past the "
                    f"{limits.timeout_seconds:g}-second limit; the file was not indexed"
                ) from None
            except BrokenProcessPool:
                self._kill()
                raise Unreadable(
                    f"{what}: extractor {extractor.name} {extractor.version} died on this file "
                    "(out of memory or a crash in its library); the file was not indexed"
                ) from None
            except PermanentError:
                raise
            except Exception as exc:  # a library's own error on this file
                raise Unreadable(
                    f"{what}: extractor {extractor.name} {extractor.version} cannot read it "
                    f"({exc.__class__.__name__}: {str(exc)[:200]})"
                ) from None

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def _start(self) -> ProcessPoolExecutor:
        self._pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_limit_memory,
        )
        return self._pool

    def _kill(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)


SANDBOX = Sandbox()


def extract(
    path: str | None, data: bytes, limits: Limits = DEFAULT_LIMITS, sandbox: Sandbox = SANDBOX
) -> Extracted | None:
    """The canonical text of a file whose type has an extractor; None for the others."""
    extractor = extractor_for(path)
    if extractor is None:
        return None
    return sandbox.run(extractor, data, path or "the file", limits)


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):  # not every platform lets a process cap itself
        pass


def _extract(extractor: Extractor, data: bytes, limits: Limits) -> Extracted:
    """In the child: the extractor travels pickled (its class is imported there)."""
    found = extractor.extract(data, limits)
    return replace(found, extractor=f"{extractor.name}-{extractor.version}")


__all__ = [
    "BY_SUFFIX",
    "EXTRACTORS",
    "SANDBOX",
    "Box",
    "Extracted",
    "Extractor",
    "Limits",
    "Page",
    "Sandbox",
    "extract",
    "extractor_for",
    "is_binary",
]
