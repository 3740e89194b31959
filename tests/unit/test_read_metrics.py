"""The read path's metrics: each observe function moves the registry's values, and every
label stays within its bounded set (anything unknown is counted as "other")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import REGISTRY

from govindex.core import metrics as m


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@contextmanager
def delta(name: str, **labels: str) -> Iterator[list[float]]:
    """How much a sample grew inside the block (the registry is the process's: other tests
    may have moved it before)."""
    grown: list[float] = []
    before = value(name, **labels)
    yield grown
    grown.append(value(name, **labels) - before)


def label_values(family: str, label: str) -> set[str]:
    return {
        s.labels[label]
        for f in REGISTRY.collect()
        if f.name == family
        for s in f.samples
        if label in s.labels
    }


def test_observe_read_counts_the_request_and_times_it_by_endpoint() -> None:
    with (
        delta("govindex_read_requests_total", endpoint="pack", status="200") as counted,
        delta("govindex_read_request_duration_seconds_count", endpoint="pack") as timed,
        delta("govindex_read_request_duration_seconds_sum", endpoint="pack") as seconds,
        delta("govindex_read_request_duration_seconds_bucket", endpoint="pack", le="0.05") as fast,
    ):
        m.observe_read("pack", 200, 0.04)
        m.observe_read("pack", 200, 0.3)
    assert counted == [2] and timed == [2] and fast == [1]
    assert abs(seconds[0] - 0.34) < 1e-9


def test_an_unknown_endpoint_or_status_is_counted_without_a_series_of_its_own() -> None:
    with (
        delta("govindex_read_requests_total", endpoint="other", status="200") as other,
        delta("govindex_read_requests_total", endpoint="search", status="4xx") as teapot,
        delta("govindex_read_requests_total", endpoint="search", status="other") as nonsense,
    ):
        m.observe_read("/v1/search?tenant=acme", 200, 0.01)
        m.observe_read("search", 418, 0.01)
        m.observe_read("search", 9000, 0.01)
    assert other == teapot == nonsense == [1]
    assert label_values("govindex_read_requests", "endpoint") <= m.READ_ENDPOINTS | {m.OTHER}
    assert "418" not in label_values("govindex_read_requests", "status")
    assert "9000" not in label_values("govindex_read_requests", "status")


def test_observe_channel_times_every_channel_and_counts_the_degraded_ones() -> None:
    with (
        delta("govindex_read_channel_duration_seconds_count", channel="bm25") as bm25,
        delta("govindex_read_channel_duration_seconds_count", channel="dense") as dense,
        delta("govindex_read_degraded_channels_total", channel="bm25") as degraded,
        delta("govindex_read_degraded_channels_total", channel="dense") as dense_degraded,
        delta("govindex_read_channel_duration_seconds_count", channel="other") as other,
    ):
        m.observe_channel("bm25", 2.0, degraded=True)
        m.observe_channel("dense", 0.02, degraded=False)
        m.observe_channel("opensearch-acme", 0.02, degraded=True)
    assert bm25 == dense == degraded == other == [1]
    assert dense_degraded == [0]
    for family in ("govindex_read_channel_duration_seconds", "govindex_read_degraded_channels"):
        assert label_values(family, "channel") <= m.READ_CHANNELS | {m.OTHER}


def test_observe_cache_counts_hits_and_misses() -> None:
    with (
        delta("govindex_read_cache_total", result="hit") as hits,
        delta("govindex_read_cache_total", result="miss") as misses,
    ):
        m.observe_cache(True)
        m.observe_cache(False)
        m.observe_cache(False)
    assert hits == [1] and misses == [2]
    assert label_values("govindex_read_cache", "result") <= {"hit", "miss"}


def test_observe_refusals_counts_by_gate_kind_and_folds_the_rest_into_other() -> None:
    with (
        delta("govindex_read_refusals_total", gate="acl") as acl,
        delta("govindex_read_refusals_total", gate="time") as time,
        delta("govindex_read_refusals_total", gate="dedup") as dedup,
        delta("govindex_read_refusals_total", gate="deletion") as deletion,
        delta("govindex_read_refusals_total", gate="other") as other,
    ):
        m.observe_refusals(
            {
                "acl": 3,
                "valid_time": 2,  # the read gates name the two times apart
                "system_time": 1,
                "dedup": 4,
                "deletion": 0,  # nothing refused: nothing counted
                "user:alice": 5,  # never a principal (or any other value) as a label
            }
        )
    assert acl == [3] and time == [3] and dedup == [4] and deletion == [0] and other == [5]
    assert label_values("govindex_read_refusals", "gate") <= m.READ_GATES | {m.OTHER}


def test_observe_tokens_packed_records_the_pack_size() -> None:
    with (
        delta("govindex_read_tokens_packed_count") as packs,
        delta("govindex_read_tokens_packed_sum") as tokens,
        delta("govindex_read_tokens_packed_bucket", le="1000.0") as small,
    ):
        m.observe_tokens_packed(800)
        m.observe_tokens_packed(3000)
        m.observe_tokens_packed(-5)  # a miscount is recorded as an empty pack
    assert packs == [3] and tokens == [3800] and small == [2]


def test_no_read_metric_has_an_unbounded_label() -> None:
    allowed = {"endpoint", "status", "channel", "result", "gate", "le"}
    for family in REGISTRY.collect():
        if family.name.startswith("govindex_read_"):
            for sample in family.samples:
                assert set(sample.labels) <= allowed, (family.name, sample.labels)
