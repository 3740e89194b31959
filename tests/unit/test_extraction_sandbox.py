"""The extraction sandbox: a file that hangs its extractor, kills it or eats its memory is
refused with a reason, and the next file is extracted as if nothing happened. The
extractors here misbehave on purpose; they run in the real child process."""

from __future__ import annotations

import os
import time

import pytest

from govindex.core.errors import ExtractionTimeout, TooLarge, Unreadable
from indexer.extractors import Sandbox
from indexer.extractors.base import Extracted, Limits


class Echo:
    name, version, suffixes, binary = "echo", "1.0.0", (".echo",), True

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        return Extracted(text=data.decode())


class Hangs(Echo):
    name = "hangs"

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        time.sleep(60)
        raise AssertionError("unreachable")


class Dies(Echo):
    name = "dies"

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        os._exit(3)


class Hogs(Echo):
    name = "hogs"

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        hoard = bytearray(8 * 1024 * 1024 * 1024)  # past the child's address-space cap
        return Extracted(text=str(len(hoard)))


class Refuses(Echo):
    name = "refuses"

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        raise TooLarge("the file is 9,999 pages, over the 2,000-page limit")


@pytest.fixture
def sandbox() -> Sandbox:
    box = Sandbox()
    yield box  # type: ignore[misc]
    box.close()


def test_a_hanging_extractor_is_killed_at_its_limit_and_the_next_file_goes_through(
    sandbox: Sandbox,
) -> None:
    assert sandbox.run(Echo(), b"warm", "warm.echo").text == "warm"
    started = time.monotonic()
    with pytest.raises(ExtractionTimeout, match="ran past the 1-second limit") as refused:
        sandbox.run(Hangs(), b"x", "slow.echo", Limits(timeout_seconds=1))
    assert time.monotonic() - started < 20
    assert refused.value.reason == "timeout"
    assert sandbox.run(Echo(), b"after", "next.echo").extractor == "echo-1.0.0"
    assert sandbox.run(Echo(), b"after", "next.echo").text == "after"


def test_an_extractor_that_dies_or_runs_out_of_memory_refuses_the_file_as_unreadable(
    sandbox: Sandbox,
) -> None:
    with pytest.raises(Unreadable, match="died on this file"):
        sandbox.run(Dies(), b"x", "dies.echo")
    with pytest.raises(Unreadable, match="MemoryError"):
        sandbox.run(Hogs(), b"x", "hogs.echo")
    assert sandbox.run(Echo(), b"fine", "fine.echo").text == "fine"


def test_an_extractor_refusal_comes_back_as_it_was_raised(sandbox: Sandbox) -> None:
    with pytest.raises(TooLarge, match="9,999 pages") as refused:
        sandbox.run(Refuses(), b"x", "big.echo")
    assert refused.value.reason == "too_large"
