"""The dense channel in pgvector, against exact search and the in-process ranking it replaced.

On the embedded PostgreSQL alone (pgvector from its wheel), for each corpus size (runbook
chunks embedded with WordLlama, bench/dense_corpus.py): the HNSW index build
(`PostgresVectorStore.ensure_generation`); Recall@10 of `PostgresReadSnapshot.dense`, the
real channel at min_similarity -1, against exact search over the admissible vectors, per
filter (a subject holding group:all, p50, p10 or p1) and hnsw.ef_search, at max_scan_tuples
20,000 and, while recall stays under 0.95, larger; p50/p95 per query against the BASELINE
(`BaselineCache`, same queries, both warm); the RSS of a fresh reader process querying with
each; and the plan PostgreSQL chose (EXPLAIN ANALYZE of the channel's own statement, and
its estimate of the admission predicate's access test against the rows it admits). Every
answer is leak-checked: no returned chunk may lack the subject's principal.

    make bench-dense                     # 100,000 and 500,000 chunks
    .venv/bin/python bench/dense.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import psycopg
from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool

import dense_corpus as dc
from govindex.adapters.embedder import WordLlamaEmbedder
from govindex.adapters.postgres.admission import ACCESS, admission_params
from govindex.adapters.postgres.pool import migrate
from govindex.adapters.postgres.reads import DENSE_OVERFETCH, Dense, PostgresReadStore
from govindex.adapters.postgres.tx import transaction
from govindex.adapters.postgres.vectors import Generation, PostgresVectorStore
from govindex.core.logs import configure_logging
from govindex.devstack.embedded import EmbeddedStack

TARGET = 0.95
DEFAULT_EF, DEFAULT_SCAN = Dense.ef_search, Dense.max_scan_tuples
DSN_ENV = "BENCH_DENSE_DSN"  # the child's DSN (it holds a password: never in argv)
NOTICES: list[str] = []  # the server's notices (the index build says when it spills)


# --- the channel ------------------------------------------------------------------------


class Recording(psycopg.AsyncCursor[Any]):
    """Keeps the statements run through it, when on: EXPLAIN replays the channel's own."""

    on: ClassVar[bool] = False
    statements: ClassVar[list[tuple[Any, Any]]] = []

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if Recording.on:
            Recording.statements.append((query, params))
        return await super().execute(query, params, **kwargs)


def channel(embedder: WordLlamaEmbedder, ef: int = DEFAULT_EF, scan: int = DEFAULT_SCAN) -> Dense:
    return Dense((embedder,), min_similarity=-1.0, ef_search=ef, max_scan_tuples=scan)


async def dense_pass(pool: AsyncConnectionPool, dense: Dense, queries: list[Any]) -> dc.Run:
    """The real channel, `PostgresReadSnapshot.dense`: one snapshot per query."""
    store, run = PostgresReadStore(pool, dense), dc.Run()
    for access, filters, text in queries:
        started = time.perf_counter()
        async with store.snapshot() as snap:
            run.answers.append(await snap.dense(access, filters, text, dc.LIMIT))
        run.seconds.append(time.perf_counter() - started)
    return run


async def explain(pool: AsyncConnectionPool, dense: Dense, query: Any, analyze: bool) -> list[str]:
    """The plan of the statement `dense` ran, after the settings it made, in one snapshot."""
    Recording.statements.clear()
    Recording.on = True
    try:
        await dense_pass(pool, dense, [query])
    finally:
        Recording.on = False
    *before, (statement, params) = Recording.statements
    head = "EXPLAIN (ANALYZE, BUFFERS) " if analyze else "EXPLAIN "
    async with transaction(pool) as conn:
        for q, p in before:
            await conn.execute(q, p)
        text = statement.as_string(conn) if isinstance(statement, sql.Composable) else statement
        cur = await conn.execute(head + text, params)
        return [re.sub(r"'\[[^']*\]'", "'[…]'", str(row[0])) for row in await cur.fetchall()]


def plan_kind(plan: list[str]) -> str:
    return "HNSW" if any("chunk_vectors_hnsw_" in line for line in plan) else "exact"


def condensed(plan: list[str]) -> list[str]:
    """The plan's nodes (no filters, buffers or sort keys) and its times."""
    keep = [plan[0]] + [line for line in plan[1:] if "->" in line or "Time:" in line]
    return [
        re.sub(r"\(cost=\S+ (rows=\d+) width=\d+\) \(actual", r"(estimated \1) (actual", x)
        for x in keep
    ]


# --- a reader in a fresh process ---------------------------------------------------------


def status_mb(name: str) -> float:
    """VmRSS or VmHWM of this process, MB. Not getrusage's ru_maxrss: on Linux a process
    started by subprocess keeps its parent's peak from exec on, here the bench's."""
    found = re.search(rf"^{name}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    assert found is not None
    return int(found.group(1)) / 1024


async def child(mode: str, queries: int) -> None:
    """Every filter's queries with one ranking; prints the RSS once started (model loaded,
    pool open) and the peak while querying (the high-water mark is reset in between)."""
    embedder = WordLlamaEmbedder()
    embedder.embed(["warm the model"])
    texts, now = dc.query_texts(dc.material(), queries), datetime.now(UTC)
    pool = AsyncConnectionPool(os.environ[DSN_ENV], min_size=1, max_size=1, open=False)
    await pool.open()
    cache = dc.BaselineCache(embedder)
    await asyncio.to_thread(Path("/proc/self/clear_refs").write_text, "5")  # peak := now
    start = status_mb("VmRSS")
    try:
        for principal in dc.FILTERS:
            batch = dc.accesses(principal, texts, now)
            if mode == "dense":
                await dense_pass(pool, channel(embedder), batch)
            else:
                await dc.baseline_pass(pool, cache, batch)
    finally:
        await pool.close()
    peak, cached = status_mb("VmHWM"), len(cache.vectors)
    print(json.dumps({"start_mb": start, "peak_mb": peak, "cached": cached}))


def child_rss(dsn: str, mode: str, queries: int) -> dict[str, float]:
    argv, env = [sys.executable, __file__, "--child", mode, "--queries", str(queries)], os.environ
    done = subprocess.run(argv, env={**env, DSN_ENV: dsn}, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the {mode} child failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- one corpus size ---------------------------------------------------------------------


@dataclass
class Row:
    principal: str
    ef: int
    scan: int
    plan: str
    recall: float
    short: int  # answers with fewer than 10 chunks
    p50: float
    p95: float
    note: str = ""


@dataclass
class Size:
    size: int
    facts: dict[str, float] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    baseline: dict[str, dc.Run] = field(default_factory=dict)
    plans: dict[str, list[str]] = field(default_factory=dict)
    rss: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class Bench:
    dsn: str
    args: argparse.Namespace
    pool: AsyncConnectionPool
    corpus: dc.Corpus
    texts: list[str]  # the queries
    embedder: WordLlamaEmbedder = field(default_factory=WordLlamaEmbedder)

    async def build(self, store: PostgresVectorStore, index: str) -> float:
        """The timed step: `ensure_generation`, as start-up makes the index (none before)."""
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
        e, started = self.embedder, time.perf_counter()
        made = await store.ensure_generation(e.name, e.version, e.dims)
        assert made.state == "live"
        return time.perf_counter() - started

    async def load_and_build(self, out: Size) -> None:
        e, corpus, f = self.embedder, self.corpus, out.facts
        index = Generation(e.name, e.version, e.dims).index_name
        load_s, embed_s = corpus.load_s, corpus.embed_s
        async with self.pool.connection() as conn:  # rows go in faster without the graph
            await conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
            await dc.grow(conn, corpus, dc.material(), e, out.size)
        f.update(load_s=corpus.load_s - load_s, embed_s=corpus.embed_s - embed_s)
        print(f"[{out.size:,}] loaded in {f['load_s']:.0f} s; building the index", flush=True)
        NOTICES.clear()
        if self.args.compare_build_memory:  # first with that memory, then as shipped
            other = PostgresVectorStore(self.pool, build_memory=self.args.compare_build_memory)
            f["compare_build_s"] = await self.build(other, index)
        f["build_s"] = await self.build(PostgresVectorStore(self.pool), index)
        out.notices = list(dict.fromkeys(NOTICES))
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            await conn.execute("VACUUM ANALYZE")
            cur = await conn.execute(
                "SELECT pg_relation_size(%s::regclass), pg_total_relation_size('chunk_vectors')",
                (index,),
            )
            index_b, table_b = await cur.fetchone() or (0, 0)
            # The planner's estimate of who may see: for group:all, every row.
            access = dc.accesses("group:all", self.texts[:1], datetime.now(UTC))[0]
            cur = await conn.execute(
                sql.SQL("EXPLAIN SELECT 1 FROM chunks c WHERE ") + sql.SQL(ACCESS),
                admission_params(access[0], access[1]),
            )
            estimate = re.search(r"rows=(\d+)", str((await cur.fetchone() or ("",))[0]))
        f.update(index_mb=index_b / 2**20, table_mb=table_b / 2**20)
        f["access_estimate"] = int(estimate.group(1)) if estimate else -1

    async def measure(self, out: Size) -> None:
        exact, now = self.corpus.exact(dc.embed(self.embedder, self.texts)), datetime.now(UTC)
        for principal in dc.FILTERS:
            batch = dc.accesses(principal, self.texts, now)
            await dense_pass(self.pool, channel(self.embedder), batch[: self.args.warm])  # warm
            await self.sweep(out, batch, exact[principal])
            out.plans[principal] = await explain(self.pool, channel(self.embedder), batch[0], True)
            print(f"[{out.size:,}] channel, {principal}: measured", flush=True)
        cache = dc.BaselineCache(self.embedder)
        for principal in dc.FILTERS if self.args.baseline else ():
            batch = dc.accesses(principal, self.texts, now)
            await dc.baseline_pass(self.pool, cache, batch[: self.args.warm])  # warm
            out.baseline[principal] = run = await dc.baseline_pass(self.pool, cache, batch)
            self.corpus.check_no_leak(run.answers, principal)
            print(f"[{out.size:,}] baseline, {principal}: measured", flush=True)

    async def sweep(self, out: Size, batch: list[Any], exact: list[Any]) -> None:
        """Each ef_search, at max_scan_tuples 20,000 and larger while recall is short."""
        a, e, principal = self.args, self.embedder, batch[0][0].principals[0]
        ladder = [
            DEFAULT_SCAN,
            *(int(v) for v in a.scan_ladder.split(",") if int(v) > DEFAULT_SCAN),
        ]
        done: Row | None = None  # the exact plan's row: ef_search plays no part in it
        for ef in [int(v) for v in a.ef.split(",")]:
            kind = plan_kind(await explain(self.pool, channel(e, ef), batch[0], False))
            if kind == "exact" and done:
                out.rows.append(replace(done, ef=ef, note=f"same plan as ef_search {done.ef}"))
                continue
            before = -1.0
            for scan in ladder:
                run = await dense_pass(self.pool, channel(e, ef, scan), batch)
                self.corpus.check_no_leak(run.answers, principal)
                pairs = zip(run.answers, exact, strict=True)
                got = float(np.mean([len(set(x) & y) / dc.LIMIT for x, y in pairs]))
                short = sum(len(x) < dc.LIMIT for x in run.answers)
                row = Row(principal, ef, scan, kind, got, short, run.pct(50), run.pct(95))
                out.rows.append(row)
                done = row if kind == "exact" else done
                if kind == "exact" or got >= TARGET or got <= before:
                    break  # met, or a longer scan does not help (ef_search is what does)
                before = got


# --- reporting ---------------------------------------------------------------------------


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> None:
    """A markdown table; the first `left` columns aligned left, the others right."""
    print("\n| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if i < left else "---:" for i in range(len(head))) + "|")
    for row in rows:
        print("| " + " | ".join(str(v) for v in row) + " |")


def report(r: Size, compare: str | None) -> None:
    f = r.facts
    other = f", {f['compare_build_s']:.1f} s at {compare}" if compare else ""
    print(
        f"\n### {r.size:,} chunks\n\nLoad {f['load_s']:.0f} s (embedding {f['embed_s']:.0f} s "
        f"of it, in a thread beside the COPY); HNSW build (ensure_generation) "
        f"{f['build_s']:.1f} s{other}; index {f['index_mb']:.0f} MB, chunk_vectors "
        f"{f['table_mb']:.0f} MB. The planner estimates the access test (tenant, ACL, scopes, "
        f"purpose) for group:all at {int(f['access_estimate']):,} rows; all {r.size:,} pass."
    )
    for notice in r.notices:
        print(f"Server notice during the builds: {notice}")
    rows = [
        (x.principal, f"{dc.FILTERS[x.principal]:.0%}", x.ef, f"{x.scan:,}", x.plan,
         f"{x.recall:.3f}" + ("" if x.recall >= TARGET else " (< 0.95)"), x.short,
         f"{x.p50:.1f}", f"{x.p95:.1f}", x.note)
        for x in r.rows
    ]  # fmt: skip
    head = ["filter", "admits", "ef_search", "max_scan_tuples", "plan", "Recall@10"]
    table([*head, "short answers", "p50 ms", "p95 ms", "note"], rows)
    if r.baseline:
        print(
            f"\nAgainst the BASELINE: the channel at ef_search {DEFAULT_EF}, max_scan_tuples "
            f"{DEFAULT_SCAN:,}; both warm, the same {len(r.baseline['group:all'].seconds)} "
            "queries; ratio = baseline / channel."
        )
        against = []
        for p, b in r.baseline.items():
            key = (p, DEFAULT_EF, DEFAULT_SCAN)
            d = next(x for x in r.rows if (x.principal, x.ef, x.scan) == key)
            cells = [p, f"{b.pct(50):.1f}", f"{b.pct(95):.1f}", d.plan, f"{d.p50:.1f}"]
            cells += [f"{d.p95:.1f}", f"{b.pct(50) / d.p50:.1f} x", f"{b.pct(95) / d.p95:.1f} x"]
            against.append(cells)
        head = ["filter", "baseline p50 ms", "p95 ms", "channel: plan", "p50 ms", "p95 ms"]
        table([*head, "ratio p50", "ratio p95"], against)
    for p, plan in r.plans.items():
        print(f"\nEXPLAIN ANALYZE, {p}, {r.size:,} chunks (nodes only):\n```text")
        print("\n".join(condensed(plan)) + "\n```")


async def describe(pool: AsyncConnectionPool) -> str:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT current_setting('server_version'), (SELECT extversion FROM pg_extension "
            "WHERE extname = 'vector'), current_setting('shared_buffers'), "
            "current_setting('work_mem'), current_setting('maintenance_work_mem')"
        )
        v = await cur.fetchone() or ()
    cpu = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())  # noqa: ASYNC240 - once
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{datetime.now(UTC):%Y-%m-%d}; {os.cpu_count()} cores "
        f"({cpu.group(1) if cpu else platform.processor()}), {ram:.0f} GB RAM; PostgreSQL "
        f"{v[0]}, pgvector {v[1]}; shared_buffers {v[2]}, work_mem {v[3]}, maintenance_work_mem "
        f"{v[4]} (an index build sets its own)"
    )


async def bench(dsn: str, args: argparse.Namespace) -> None:
    await migrate(dsn)
    sizes = sorted(int(s) for s in args.sizes.split(","))

    async def configure(conn: AsyncConnection[Any]) -> None:
        conn.add_notice_handler(lambda d: NOTICES.append(d.message_primary or ""))

    kwargs = {"cursor_factory": Recording}
    async with AsyncConnectionPool(
        dsn, min_size=1, max_size=2, open=False, configure=configure, kwargs=kwargs
    ) as pool:
        texts = dc.query_texts(dc.material(), args.queries)
        b = Bench(dsn, args, pool, dc.Corpus(max(sizes)), texts)
        print(
            f"{await describe(pool)}\n{args.queries} queries; the channel, asked for "
            f"{dc.LIMIT}, fetches at least {DENSE_OVERFETCH} and re-sorts them (hnsw.ef_search is "
            f"at least that)",
            flush=True,
        )
        results = []
        for size in sizes:
            out = Size(size)
            await b.load_and_build(out)
            assert not {hash(t) for t in texts} & b.corpus.text_hashes, "a query is a chunk"
            await b.measure(out)
            modes = ("dense", "baseline") if args.baseline else ("dense",)
            out.rss = {m: child_rss(dsn, m, args.child_queries) for m in modes}
            results.append(out)
            report(out, args.compare_build_memory)
        print(f"\n### Reader RSS ({args.child_queries} queries per filter, a fresh process)")
        rows = [
            (f"{r.size:,}", m, f"{v['start_mb']:.0f} MB", f"{v['peak_mb']:.0f} MB",
             f"{v['peak_mb'] - v['start_mb']:+.0f} MB", f"{int(v['cached']):,}")
            for r in results for m, v in r.rss.items()
        ]  # fmt: skip
        table(["chunks", "ranking", "started", "peak querying", "growth", "vectors held"], rows, 2)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--sizes", default="100000,500000", help="corpus sizes, in chunks")
    p.add_argument("--quick", action="store_true", help="a smoke run: 20,000 chunks")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--ef", default="40,100,200", help="hnsw.ef_search values (Dense.ef_search)")
    p.add_argument("--scan-ladder", default="50000,100000,200000,500000", help="then these")
    p.add_argument("--warm", type=int, default=10, help="warm-up queries per filter")
    p.add_argument("--child-queries", type=int, default=20, help="per filter, RSS children")
    p.add_argument("--compare-build-memory", help="also time a build with this, e.g. 64MB")
    p.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--child", choices=("dense", "baseline"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.sizes = "20000"
    return args


def main() -> int:
    args = parse()
    if args.child:
        asyncio.run(child(args.child, args.queries))
        return 0
    configure_logging(level="WARNING")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleans up as Ctrl-C does
    with tempfile.TemporaryDirectory(prefix="govindex-dense-") as tmp:
        # Only PostgreSQL: the channel needs nothing else. durable=False: fsync off, and its
        # data (outside the temp dir when running as root) is removed on stop.
        stack = EmbeddedStack(Path(tmp) / "state", namespace="dense", durable=False)
        try:
            (stack.state_dir / "logs").mkdir(parents=True)
            print("starting the embedded PostgreSQL ...", flush=True)
            stack._start_postgres()
            asyncio.run(bench(stack.addresses["pg_dsn"], args))
        finally:
            stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
