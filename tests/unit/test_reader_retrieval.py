"""Retrieval's pure parts: what each channel is asked, gating every channel's candidates,
fusion, and the hits a search answers with (issue 20: the read service in rooms)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from govindex.core.hashing import sha256_hex
from govindex.core.ports import ChunkFacts, ReadFilters
from govindex.core.records import Chunk
from reader.access import read_access
from reader.fusion import RRF_K, fuse
from reader.manifest import anchor_of
from reader.models import SearchRequest
from reader.retrieval import (
    Ranked,
    filters_of,
    gate_channels,
    graph_seeds,
    search_response,
    structured_keys,
    top_chunks,
)
from tests.support.builders import manifest, version_plan

T0 = datetime(2025, 1, 1, tzinfo=UTC)
AS_OF = datetime(2025, 6, 1, tzinfo=UTC)
ACCESS = read_access(
    tenant="acme", principals=["group:eng"], scopes=[], purpose="support", as_of=AS_OF
)
_STORED = version_plan(manifest("src", "acme"), "runbooks/a.md", 1, "# A\n\nalpha\n").chunks[0]


def chunk(chunk_id: str, text: str = "Promote the replica.\n", **fields: Any) -> Chunk:
    """A stored chunk whose hash matches its text (unless `text` is changed afterwards)."""
    update = {"chunk_id": chunk_id, "text": text, "content_hash": sha256_hex(text)}
    return _STORED.model_copy(update={**update, "valid_from": T0, **fields})


def facts(c: Chunk) -> ChunkFacts:
    return ChunkFacts(
        chunk=c,
        source_enabled=True,
        purge_tombstoned=False,
        tombstoned=False,
        content_purged=False,
        superseded=False,
    )


def request(**fields: Any) -> SearchRequest:
    body = {
        "tenant": "acme",
        "subject": {"principals": ["group:eng"]},
        "purpose": "support",
        "query": "promote the replica",
        **fields,
    }
    return SearchRequest.model_validate(body)


def test_each_channel_is_asked_with_the_entities_first_then_what_the_query_names() -> None:
    asked = request(query="What pages PAY-4097 on orders-db?", entities=["service:ledger"])
    assert structured_keys(asked) == ["service:ledger", "PAY-4097", "orders-db"]
    assert graph_seeds(asked) == [
        "service:ledger",
        "PAY-4097",
        "orders-db",
        "pages",
        "pay-4097",
        "orders-db",
    ]
    narrowed = request(
        filters={
            "sources": ["src"],
            "kinds": ["step"],
            "labels": ["key:PAY-4097"],
            "path_prefix": "runbooks/",
        }
    )
    assert filters_of(narrowed) == ReadFilters(
        sources=("src",), kinds=("step",), labels=("key:PAY-4097",), path_prefix="runbooks/"
    )
    assert filters_of(request()) == ReadFilters()


def test_gating_keeps_each_channels_order_and_traces_only_what_may_be_told() -> None:
    first, second = chunk("a"), chunk("b", "Check the lag.\n")
    tampered = chunk("t").model_copy(update={"text": "Edited behind our back.\n"})
    hr_only = chunk("hr", acl=("group:hr",))
    other_tenant = chunk("x", tenant_id="someone-else")
    known = {c.chunk_id: facts(c) for c in (first, second, tampered, hr_only, other_tenant)}
    raw = {
        "fulltext": ["hr", "b", "t", "gone", "a"],
        "structured": ["x", "a"],
    }
    ranked, trace = gate_channels(raw, known, ACCESS)
    assert ranked == {"fulltext": ["b", "a"], "structured": ["a"]}
    lines = [(t.stage, t.chunk_id, t.decision, t.reason) for t in trace]
    assert lines == [
        ("fulltext", "b", "admitted", "rank 1; passed every gate"),
        ("fulltext", "t", "refused", "stored text does not match its content hash"),
        ("fulltext", None, "dropped", "not in Postgres"),
        ("fulltext", "a", "admitted", "rank 2; passed every gate"),
        ("fulltext", None, "ranked", "2 admitted"),
        ("structured", "a", "admitted", "rank 1; passed every gate"),
        ("structured", None, "ranked", "1 admitted"),
    ]
    told = "".join(t.model_dump_json() for t in trace)
    assert '"hr"' not in told and '"x"' not in told  # confidential refusals leave no trace


def test_fusion_sums_reciprocal_ranks_and_breaks_ties_the_same_way_every_time() -> None:
    reviewed = chunk("r", trust_level="reviewed")
    authoritative = chunk("u", trust_level="authoritative")
    newer = chunk("n", trust_level="reviewed", valid_from=T0 + timedelta(days=1))
    both = chunk("both")
    chunks = {c.chunk_id: c for c in (reviewed, authoritative, newer, both)}
    fused = fuse({"fulltext": ["both", "r"], "dense": ["u", "both"], "graph": ["n"]}, chunks)
    assert [c for c, _, _ in fused] == ["both", "u", "n", "r"]
    scores = {c: s for c, s, _ in fused}
    assert scores["both"] == 1 / (RRF_K + 1) + 1 / (RRF_K + 2)
    assert scores["u"] == scores["n"] == 1 / (RRF_K + 1)  # tied: authority, then newer first
    assert scores["r"] == 1 / (RRF_K + 2)
    assert {c: r for c, _, r in fused}["both"] == {"fulltext": 1, "dense": 2}
    again = fuse({"graph": ["n"], "dense": ["u", "both"], "fulltext": ["both", "r"]}, chunks)
    assert again == fused


def test_a_search_answers_with_the_top_hits_their_highlights_and_the_trace_if_asked() -> None:
    hits = [chunk(f"h{n}", f"Promote replica {n}: promote it.\n") for n in range(3)]
    fused = [(c.chunk_id, 1 / (RRF_K + n), {"fulltext": n}) for n, c in enumerate(hits, 1)]
    ranked = Ranked(
        ACCESS, fused, {c.chunk_id: facts(c) for c in hits}, {"h1": ("a", "R", "b")}, ["bm25"]
    )
    asked = request(limit=2)
    assert top_chunks(asked, ranked) == hits[:2]
    response = search_response(asked, ranked)
    assert [(h.rank, h.anchor, h.graph_path) for h in response.hits] == [
        (1, anchor_of(hits[0]), []),
        (2, anchor_of(hits[1]), ["a", "R", "b"]),
    ]
    assert response.hits[0].score == round(1 / (RRF_K + 1), 8)
    text = hits[0].text
    assert [(text[h.start : h.end], h.term) for h in response.hits[0].highlights] == [
        ("Promote", "promote"),
        ("replica", "replica"),
        ("promote", "promote"),
    ]
    assert response.degraded == ["bm25"] and response.as_of == AS_OF
    assert response.trace is None
    assert search_response(request(limit=2, trace=True), ranked).trace == ranked.trace
