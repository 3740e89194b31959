"""The read audit in PostgreSQL: what is recorded comes back whole, every listing filter
narrows, listings are bounded, retention prunes by age, and `govindex audit` and
`govindex retention` work on it from the command line."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres import audit as audit_adapter
from govindex.core.errors import RejectedByStore
from govindex.core.manifests import load_manifests
from govindex.core.ports import AUDIT_LIST_MAX, AuditEntry, AuditRow
from govindex.core.settings import Settings
from govindex.runtime.composition import Runtime
from tests.support.builders import MANIFEST_YAML

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


def entry(tenant: str, **changes: object) -> AuditEntry:
    base = AuditEntry(
        endpoint="search",
        status=200,
        credential_kind="token",
        credential_name="rag-app",
        tenant=tenant,
        principals=("group:sre",),
        scopes=(),
        request_hash=f"sha256:{uuid.uuid4().hex}",
        chunk_ids=("c" * 32,),
        purpose="support",
        as_of=NOW,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def hashes(rows: Sequence[AuditRow | AuditEntry]) -> list[str]:
    return [r.request_hash for r in rows]


async def test_a_recorded_entry_comes_back_with_every_field(runtime: Runtime) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    pack = entry(
        tenant,
        endpoint="pack",
        credential_kind="jwt",
        credential_name="jwt:https://idp.example.com",
        subject="bob",
        principals=("group:eng", "user:bob"),
        scopes=("pii",),
        chunk_ids=("a" * 32, "b" * 32),
        as_of=NOW - timedelta(days=3),
        known_at=NOW - timedelta(days=1),
        pack_hash="f" * 64,
        at=NOW - timedelta(minutes=5),
    )
    await runtime.audit.record(pack)
    before = datetime.now(UTC)
    await runtime.audit.record(entry(tenant, purpose=None, as_of=None, chunk_ids=()))

    latest, first = await runtime.audit.entries(tenant=tenant)
    for field in dataclasses.fields(AuditEntry):
        assert getattr(first, field.name) == getattr(pack, field.name), field.name
    assert first.id < latest.id
    assert latest.at >= before - timedelta(seconds=5)  # no `at` given: the database's now()
    assert (latest.purpose, latest.as_of, latest.known_at, latest.chunk_ids) == (
        None,
        None,
        None,
        (),
    )


async def test_each_filter_narrows_the_listing_and_the_newest_come_first(runtime: Runtime) -> None:
    acme, globex = f"acme-{uuid.uuid4().hex[:6]}", f"globex-{uuid.uuid4().hex[:6]}"
    a = entry(acme, principals=("group:sre", "user:alice"), at=NOW - timedelta(hours=3))
    b = entry(
        acme,
        endpoint="pack",
        credential_kind="jwt",
        credential_name="jwt:https://idp.example.com",
        subject="bob",
        principals=("group:eng", "user:bob"),
        at=NOW - timedelta(hours=2),
    )
    c = entry(globex, endpoint="chunk", status=404, chunk_ids=(), at=NOW - timedelta(hours=1))
    d = entry(acme, endpoint="verify", principals=(), at=NOW - timedelta(minutes=30))
    for e in (a, b, c, d):
        await runtime.audit.record(e)
    audit = runtime.audit

    assert hashes(await audit.entries()) == hashes([d, c, b, a])
    cases: list[tuple[dict[str, object], list[AuditEntry]]] = [
        ({"tenant": acme}, [d, b, a]),
        ({"tenant": globex}, [c]),
        ({"credential": "rag-app"}, [d, c, a]),
        ({"credential": "jwt:https://idp.example.com"}, [b]),
        ({"principal": "group:sre"}, [c, a]),
        ({"principal": "user:bob"}, [b]),
        ({"principal": "group"}, []),  # a principal matches whole, never a prefix
        ({"endpoint": "pack"}, [b]),
        ({"endpoint": "lineage"}, []),
        ({"since": NOW - timedelta(hours=2, minutes=30)}, [d, c, b]),
        ({"since": b.at}, [d, c, b]),  # since is inclusive
        ({"until": NOW - timedelta(hours=1, minutes=30)}, [b, a]),
        ({"until": c.at}, [b, a]),  # until is exclusive
        ({"since": NOW - timedelta(hours=2, minutes=30), "until": c.at}, [b]),
        ({"tenant": acme, "principal": "group:sre"}, [a]),
        ({"tenant": acme, "credential": "rag-app", "endpoint": "verify"}, [d]),
        ({"tenant": f"nobody-{uuid.uuid4().hex[:6]}"}, []),
    ]
    for filters, expected in cases:
        found = await audit.entries(**filters)  # type: ignore[arg-type]
        assert hashes(found) == hashes(expected), filters


async def test_a_listing_returns_at_most_its_limit_and_never_past_the_bound(
    runtime: Runtime, pool: AsyncConnectionPool
) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO read_audit (at, endpoint, status, credential_kind, credential_name, "
            " tenant, principals, scopes, request_hash, chunk_ids) "
            "SELECT now() - make_interval(secs => n), 'search', 200, 'token', 'rag-app', %s, "
            " ARRAY['group:sre'], ARRAY[]::text[], 'sha256:' || n, ARRAY[]::text[] "
            "FROM generate_series(1, %s) AS n",
            (tenant, AUDIT_LIST_MAX + 5),
        )

    three = await runtime.audit.entries(tenant=tenant, limit=3)
    assert hashes(three) == ["sha256:1", "sha256:2", "sha256:3"]
    assert len(await runtime.audit.entries(tenant=tenant)) == 100  # the default
    assert len(await runtime.audit.entries(tenant=tenant, limit=10**9)) == AUDIT_LIST_MAX
    with pytest.raises(ValueError, match="at least 1"):
        await runtime.audit.entries(limit=0)


async def test_prune_deletes_only_entries_older_than_the_days_given(runtime: Runtime) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    ages = (100, 50, 2)
    for days in ages:
        await runtime.audit.record(entry(tenant, at=NOW - timedelta(days=days)))
    await runtime.audit.record(entry(tenant))  # recorded now

    assert await runtime.audit.prune(90) == 1
    assert len(await runtime.audit.entries(tenant=tenant)) == 3
    assert await runtime.audit.prune(90) == 0  # idempotent
    assert await runtime.audit.prune(30) == 1
    assert await runtime.audit.prune(1) == 1
    (left,) = await runtime.audit.entries(tenant=tenant)
    assert left.at > NOW - timedelta(days=1)
    with pytest.raises(ValueError, match="at least 1"):
        await runtime.audit.prune(0)


async def test_prune_deletes_more_than_one_batch(
    runtime: Runtime, pool: AsyncConnectionPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_adapter, "PRUNE_BATCH", 4)  # batches of 4: 10 rows take three
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    for _ in range(10):
        await runtime.audit.record(entry(tenant, at=NOW - timedelta(days=200)))
    await runtime.audit.record(entry(tenant))

    assert await runtime.audit.prune(90) == 10
    assert len(await runtime.audit.entries(tenant=tenant)) == 1


async def test_an_entry_outside_the_audited_endpoints_or_statuses_is_refused(
    runtime: Runtime,
) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    with pytest.raises(RejectedByStore):
        await runtime.audit.record(entry(tenant, endpoint="healthz"))
    with pytest.raises(RejectedByStore):
        await runtime.audit.record(entry(tenant, status=42))
    assert await runtime.audit.entries(tenant=tenant) == []


async def test_listings_and_prunes_find_their_rows_through_an_index(
    pool: AsyncConnectionPool,
) -> None:
    """The audit grows with every read: the listing filters and retention's cutoff each have
    an index (a scan would read months of reads)."""
    listing = "EXPLAIN SELECT * FROM read_audit WHERE "
    newest = " ORDER BY at DESC, id DESC LIMIT 100"
    shapes = (
        ("read_audit_at", listing + "at >= now() - interval '1 day'" + newest),
        ("read_audit_tenant_at", listing + "tenant = 'acme'" + newest),
        ("read_audit_credential_at", listing + "credential_name = 'rag-app'" + newest),
        ("read_audit_at", "EXPLAIN DELETE FROM read_audit WHERE at < now() - interval '90 days'"),
    )
    async with pool.connection() as conn:
        await conn.execute("SET enable_seqscan = off")  # any usable index wins over a scan
        for index, statement in shapes:
            cur = await conn.execute(statement)
            plan = "\n".join(row[0] for row in await cur.fetchall())
            assert index in plan, plan
            assert "Seq Scan" not in plan, plan


# --- the command line --------------------------------------------------------------------


def govindex(settings: Settings, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """One CLI command with GOVINDEX_* settings naming the test's servers and database."""
    given = {
        "GOVINDEX_PG_DSN": settings.pg_dsn,
        "GOVINDEX_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "GOVINDEX_OPENSEARCH_URL": settings.opensearch_url,
        "GOVINDEX_REDIS_URL": settings.redis_url,
        "GOVINDEX_NAMESPACE": settings.namespace,
        "GOVINDEX_STATE_DIR": str(settings.state_dir),
    }
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")}
    environ |= {k: v for k, v in given.items() if v is not None} | env
    return subprocess.run(
        [sys.executable, "-m", "govindex.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=Path(settings.state_dir),
        check=False,
    )


async def test_govindex_audit_lists_the_records_as_json_lines_and_as_a_table(
    runtime: Runtime, settings: Settings
) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    older = entry(tenant, at=NOW - timedelta(hours=2))
    pack = entry(
        tenant,
        endpoint="pack",
        principals=("group:sre", "user:alice"),
        chunk_ids=("a" * 32, "b" * 32, "c" * 32),
        pack_hash="0123456789abcdef" * 4,
        at=NOW - timedelta(hours=1),
    )
    other = entry(f"globex-{uuid.uuid4().hex[:6]}", at=NOW)
    for e in (older, pack, other):
        await runtime.audit.record(e)

    listed = govindex(settings, "audit", "--tenant", tenant, "--json")
    assert listed.returncode == 0, listed.stderr
    lines = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [line["request_hash"] for line in lines] == [pack.request_hash, older.request_hash]
    assert lines[0]["principals"] == ["group:sre", "user:alice"]
    assert lines[0]["pack_hash"] == pack.pack_hash
    assert datetime.fromisoformat(lines[0]["at"]) == pack.at
    assert datetime.fromisoformat(lines[0]["as_of"]) == NOW

    since = (NOW - timedelta(minutes=90)).isoformat()
    narrowed = govindex(
        settings, "audit", "--tenant", tenant, "--since", since, "--endpoint", "pack", "--json"
    )
    assert [json.loads(line)["request_hash"] for line in narrowed.stdout.splitlines()] == [
        pack.request_hash
    ]

    table = govindex(settings, "audit", "--principal", "user:alice")
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0]
    assert header.split() == [
        "TIME",
        "ENDPOINT",
        "STATUS",
        "CREDENTIAL",
        "TENANT",
        "PRINCIPALS",
        "PURPOSE",
        "RETURNED",
        "PACK",
    ]
    (row,) = [line for line in table.stdout.splitlines() if tenant in line]
    assert pack.at is not None
    assert row.split() == [
        pack.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pack",
        "200",
        "rag-app",
        tenant,
        "group:sre,user:alice",
        "support",
        "3",
        "0123456789ab",
    ]

    none = govindex(settings, "audit", "--tenant", f"nobody-{uuid.uuid4().hex[:6]}")
    assert none.returncode == 0 and "no audit records match" in none.stdout


def test_govindex_audit_refuses_an_unknown_endpoint_and_a_naive_time(settings: Settings) -> None:
    endpoint = govindex(settings, "audit", "--endpoint", "healthz")
    assert endpoint.returncode == 2 and "search, pack, chunk, verify, lineage" in endpoint.stderr
    naive = govindex(settings, "audit", "--since", "2025-03-01T00:00:00")
    assert naive.returncode == 2 and "no time zone" in naive.stderr
    backwards = govindex(
        settings, "audit", "--since", "2025-03-02T00:00:00Z", "--until", "2025-03-01T00:00:00Z"
    )
    assert backwards.returncode == 2 and "not after --since" in backwards.stderr
    too_many = govindex(settings, "audit", "--limit", str(AUDIT_LIST_MAX + 1))
    assert too_many.returncode == 2


async def test_govindex_retention_deletes_audit_records_past_the_setting(
    runtime: Runtime, settings: Settings, tmp_path: Path
) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    for days in (45, 20, 0):
        await runtime.audit.record(entry(tenant, at=NOW - timedelta(days=days)))
    manifest = tmp_path / "handbook.yaml"
    manifest.write_text("source_id: handbook\nsource_type: git\n" + MANIFEST_YAML)
    (handbook,) = load_manifests([manifest])
    await runtime.registry.register(handbook)

    narrowed = govindex(settings, "retention", "--source", "handbook")
    assert narrowed.returncode == 0, narrowed.stderr
    assert "audit" not in narrowed.stdout  # the audit belongs to no source
    assert len(await runtime.audit.entries(tenant=tenant)) == 3

    done = govindex(settings, "retention", GOVINDEX_AUDIT_RETENTION_DAYS="30")
    assert done.returncode == 0, done.stderr
    assert "1 audit records older than 30 days deleted" in done.stdout
    assert len(await runtime.audit.entries(tenant=tenant)) == 2
    again = govindex(settings, "retention")  # the default, 90 days
    assert "0 audit records older than 90 days deleted" in again.stdout
