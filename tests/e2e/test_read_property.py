"""A property of the read service: whatever happens to the corpus, every item and every
hydrated chunk of every pack passes rules 1-5 and 8, checked by an oracle that reads
Postgres on its own (not through the service's gates)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from govindex.control.bootstrap import prepare
from govindex.core import events
from govindex.core.envelope import decode, encode_document_event
from govindex.core.errors import SourceDisabled
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.hashing import sha256_hex
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from indexer.app import indexer_ports
from indexer.handlers import index_document
from reader.app import read_service
from reader.models import CHANNELS, Pack, PackRequest
from tests.support.builders import manifest

pytestmark = pytest.mark.e2e

DOCS = ["runbooks/a.md", "runbooks/b.md", "policies/c.md", "notes/d.md"]
PRINCIPALS = ["group:eng", "group:hr", "user:ann"]
WORDS = ["failover", "replica", "orders-db", "rotate", "certificate", "KubePodCrashLooping"]
T0 = datetime(2025, 1, 1, tzinfo=UTC)
PREPARED: set[str] = set()


def _text(doc: str, n: int, words: list[str]) -> str:
    owner = "team-a" if n % 2 else "team-b"
    return (
        f"---\nservice: orders-db\nowner: {owner}\n---\n# {doc} v{n}\n\n"
        f"{' '.join(words)} step {n}.\n\n## Details\n\nMore about {words[0]} in {doc}.\n"
    )


update = st.tuples(
    st.just("update"),
    st.sampled_from(DOCS),
    st.lists(st.sampled_from(PRINCIPALS), min_size=1, max_size=2, unique=True),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    st.integers(0, 72),  # hours after T0 it becomes valid
)
op = st.one_of(
    update,
    update,
    update,  # updates weigh more, so packs have something to gate
    st.tuples(st.just("delete"), st.sampled_from(DOCS)),
    st.tuples(st.just("purpose"), st.sampled_from([["support"], ["support", "audit"], ["audit"]])),
    st.tuples(st.just("scope"), st.sampled_from([[], ["pii"]])),
    st.tuples(st.just("mode"), st.sampled_from(["tombstone", "tombstone_and_purge"])),
    st.tuples(st.just("disable"), st.booleans()),
    st.tuples(st.just("tamper"), st.sampled_from(DOCS)),
)
request = st.fixed_dictionaries(
    {
        "principals": st.lists(st.sampled_from(PRINCIPALS), min_size=1, max_size=3, unique=True),
        "scopes": st.sampled_from([[], ["pii"], ["pii"]]),
        "purpose": st.sampled_from(["support", "support", "audit"]),
        "hours": st.one_of(st.integers(-1, 100), st.integers(72, 79)),
        "words": st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
        "channels": st.lists(st.sampled_from(CHANNELS), min_size=1, max_size=5, unique=True),
        "max_tokens": st.one_of(st.integers(1, 60), st.integers(60, 3000)),
        "neighbours": st.integers(0, 2),
    }
)


async def _apply(rt: Runtime, tenant: str, ops: list[tuple[Any, ...]]) -> None:
    source = f"src-{tenant}"  # source ids are global
    state: dict[str, Any] = {"purposes": ["support"], "scopes": [], "mode": "tombstone_and_purge"}

    async def register(enabled: bool = True) -> None:
        await rt.registry.register(
            manifest(
                source,
                tenant,
                allowed_purposes=state["purposes"],
                required_scopes=state["scopes"],
                deletion_mode=state["mode"],
                enabled=enabled,
            )
        )

    await register()
    ports = indexer_ports(rt, await rt.index.live_generation() or 1)
    sequence = 0
    for operation in ops:
        kind = operation[0]
        sequence += 1
        if kind == "update":
            _, doc, acl, words, hours = operation
            text = _text(doc, sequence, words)
            body = DocumentChanged(
                tenant_id=tenant,
                source_id=source,
                doc_id=doc,
                source_version=f"v{sequence}",
                sequence=sequence,
                observed_at=T0 + timedelta(hours=hours),
                content_hash=sha256_hex(text),
                content=text,
                path=doc,
                acl=acl,
            )
            record = encode_document_event(events.DOCUMENT_UPDATED, body, op=f"u:{sequence}")
        elif kind == "delete":
            body_d = DocumentDeleted(
                tenant_id=tenant,
                source_id=source,
                doc_id=operation[1],
                source_version=f"del{sequence}",
                sequence=sequence,
                deleted_at=T0 + timedelta(hours=80),
            )
            record = encode_document_event(events.DOCUMENT_DELETED, body_d, op="deleted")
        elif kind == "tamper":
            async with rt.pool.connection() as conn:
                await conn.execute(
                    "UPDATE chunks SET text = text || '!' WHERE tenant_id = %s AND doc_id = %s "
                    "AND ordinal = 1",
                    (tenant, operation[1]),
                )
            continue
        else:
            if kind == "purpose":
                state["purposes"] = operation[1]
            elif kind == "scope":
                state["scopes"] = operation[1]
            elif kind == "mode":
                state["mode"] = operation[1]
            await register(enabled=not (kind == "disable" and operation[1]))
            continue
        envelope = decode(record.key, record.value, list(record.headers))
        with contextlib.suppress(SourceDisabled):  # a disabled source refuses changes
            await index_document(envelope, ports)


async def _control(rt: Runtime, tenant: str) -> None:
    """A document in a source of its own that no random operation touches."""
    source = f"ctl-{tenant}"
    await rt.registry.register(manifest(source, tenant))
    text = "# Control\n\nThe control beacon is always visible to group:eng.\n"
    body = DocumentChanged(
        tenant_id=tenant,
        source_id=source,
        doc_id="control.md",
        source_version="c1",
        sequence=1,
        observed_at=T0,
        content_hash=sha256_hex(text),
        content=text,
        path="control.md",
    )
    record = encode_document_event(events.DOCUMENT_CREATED, body, op="control")
    ports = indexer_ports(rt, await rt.index.live_generation() or 1)
    await index_document(decode(record.key, record.value, list(record.headers)), ports)


async def _oracle(rt: Runtime, tenant: str, pack: Pack, req: PackRequest) -> None:
    """Rules 1-5 and 8 for every item and hydrated chunk, from raw Postgres rows."""
    assert req.as_of is not None
    pinned = [i.anchor for i in pack.items] + [h.anchor for i in pack.items for h in i.hydrated]
    texts = {i.anchor.chunk_id: i.text for i in pack.items}
    texts.update({h.anchor.chunk_id: h.text for i in pack.items for h in i.hydrated})
    async with rt.pool.connection() as conn:
        for anchor in pinned:
            cur = await conn.execute(
                "SELECT c.tenant_id, c.acl, c.required_scopes, c.allowed_purposes, c.valid_from, "
                " c.valid_to, c.text, c.content_hash, c.contains_instructions, c.trust_level, "
                " c.version_sequence, s.enabled, "
                " (SELECT count(*) FROM tombstones t WHERE t.tenant_id = c.tenant_id AND "
                "  t.source_id = c.source_id AND t.doc_id = c.doc_id AND t.deletion_mode = "
                "  'tombstone_and_purge' AND t.sequence > c.version_sequence) "
                "FROM chunks c JOIN sources s USING (tenant_id, source_id) WHERE c.chunk_id = %s",
                (anchor.chunk_id,),
            )
            row = await cur.fetchone()
            assert row is not None, "an item the system of record does not hold"
            (t, acl, scopes, purposes, vf, vt, text, digest, instr, trust, _, enabled, purged) = row
            assert t == tenant  # rule 1
            assert set(acl) & set(req.subject.principals)  # rule 1
            assert set(scopes) <= set(req.subject.scopes)  # rule 1
            assert req.purpose in purposes  # rule 1
            assert vf <= req.as_of and (vt is None or vt > req.as_of)  # rule 3
            assert enabled and purged == 0  # rule 2
            assert "sha256:" + hashlib.sha256(text.encode()).hexdigest() == digest  # rule 4
            assert texts[anchor.chunk_id] == text
            assert not (instr and trust != "authoritative")  # rule 4
    assert pack.used_tokens <= req.budget.max_tokens  # rule 8
    hashes = [a.content_hash for a in pinned]
    assert len(hashes) == len(set(hashes))  # rule 8
    keys = {i.key for i in pack.items}
    assert {k for i in pack.items for f in i.flags for k in f.members} <= keys  # rule 8
    for item in pack.items:
        for flag in item.flags:  # only admitted evidence: rule 5's corollary for flags
            for chunk_id in flag.evidence:
                cur = await _evidence_ok(rt, chunk_id, tenant, req)
                assert cur, flag


async def _evidence_ok(rt: Runtime, chunk_id: str, tenant: str, req: PackRequest) -> bool:
    async with rt.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT 1 FROM chunks c WHERE chunk_id = %s AND tenant_id = %s AND acl && %s "
            "AND required_scopes <@ %s AND %s = ANY (allowed_purposes)",
            (chunk_id, tenant, list(req.subject.principals), list(req.subject.scopes), req.purpose),
        )
        return await cur.fetchone() is not None


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    ops=st.lists(op, min_size=3, max_size=14), requests=st.lists(request, min_size=2, max_size=4)
)
def test_every_item_of_every_pack_passes_the_oracle(
    settings: Settings, ops: list[tuple[Any, ...]], requests: list[dict[str, Any]]
) -> None:
    async def run() -> None:
        if settings.namespace not in PREPARED:  # once per namespace, not per example
            await prepare(settings)
            PREPARED.add(settings.namespace)
        async with Runtime(settings, pool_size=4) as rt:
            tenant = f"prop-{uuid.uuid4().hex[:8]}"
            await _apply(rt, tenant, ops)
            await _control(rt, tenant)
            await rt.index.refresh()
            service = read_service(rt)
            # The positive control: a document every gate admits is found, and passes the
            # oracle, so the property cannot hold merely because nothing is ever returned.
            control = PackRequest.model_validate(
                {
                    "tenant": tenant,
                    "subject": {"principals": ["group:eng"]},
                    "purpose": "support",
                    "query": "control beacon",
                    "as_of": (T0 + timedelta(hours=100)).isoformat(),
                    "cache": "bypass",
                }
            )
            found = await service.pack(control)
            assert any(i.anchor.doc_id == "control.md" for i in found.items)
            await _oracle(rt, tenant, found, control)
            for r in requests:
                req = PackRequest.model_validate(
                    {
                        "tenant": tenant,
                        "subject": {"principals": r["principals"], "scopes": r["scopes"]},
                        "purpose": r["purpose"],
                        "as_of": (T0 + timedelta(hours=r["hours"])).isoformat(),
                        "query": " ".join(r["words"]),
                        "entities": ["service:orders-db"],
                        "channels": r["channels"],
                        "budget": {"max_tokens": r["max_tokens"]},
                        "hydration": {"neighbours": r["neighbours"]},
                        "dedup_threshold": 6,
                        "cache": "use",
                    }
                )
                pack = await service.pack(req)
                await _oracle(rt, tenant, pack, req)

    asyncio.run(run())
