"""What each worker kind runs: `indexer` is its two lanes, either of which a process may
run alone (`govindex worker documents`, `govindex worker deletions`)."""

from __future__ import annotations

import pytest

from govindex.cli.common import Failure
from govindex.cli.stack import _names
from govindex.control.workers import WORKERS, kind_of, parts


def test_the_indexer_is_its_two_lanes_and_each_counts_as_the_indexer() -> None:
    assert parts(("indexer", "purger")) == ("documents", "deletions", "purger")
    assert parts(("deletions",)) == ("deletions",)
    assert parts(("documents", "indexer", "deletions")) == ("documents", "deletions")
    assert parts(WORKERS) == ("documents", "deletions", "purger", "cdc")
    assert {kind_of(p) for p in ("documents", "deletions")} == {"indexer"}
    assert kind_of("purger") == "purger" and kind_of("cdc") == "cdc"


def test_the_cli_takes_either_lane_and_refuses_what_is_not_a_worker() -> None:
    assert _names(["deletions"]) == ("deletions",)
    assert _names(["documents", "purger", "reader"]) == ("documents", "purger", "reader")
    with pytest.raises(Failure, match="documents, deletions"):
        _names(["deletes"])
