"""Read-only figures for `govindex status`: the server's version, counts, pending work."""

from __future__ import annotations

from typing import Any

import psycopg

from govindex.adapters.postgres.pool import read_in_utc
from govindex.adapters.postgres.tx import PostgresAdapter
from govindex.core.jobs import SELF_HEAL


def postgres_summary(dsn: str) -> dict[str, Any]:
    """One short synchronous connection (status must answer even when workers are down).

    Raises psycopg.Error when the server cannot be reached; the caller reports it as down.
    """
    with psycopg.connect(dsn, connect_timeout=3) as conn:
        read_in_utc(conn)  # the times it shows, as every other read gives them
        version = conn.execute("SHOW server_version").fetchone()
        pending = conn.execute(
            "SELECT tenant_id, source_id, doc_id, sequence, deletion_mode, recorded_at, "
            " purge_attempts, purge_error FROM tombstones WHERE purge_state <> 'purged' "
            "ORDER BY recorded_at"
        ).fetchall()
        outbox = conn.execute("SELECT count(*) FROM outbox WHERE published_at IS NULL").fetchone()
        emitted = conn.execute(
            "SELECT coalesce(source_id, '(none)'), awaits, count(*), "
            " extract(epoch FROM now() - min(created_at)), "
            " count(*) FILTER (WHERE publish_count > 1), max(republished_at) "
            "FROM outbox WHERE awaits IS NOT NULL AND settled_at IS NULL "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM sources), (SELECT count(*) FROM documents "
            "WHERE state = 'active'), (SELECT count(*) FROM chunks), "
            "(SELECT count(*) FROM embedding_backlog)"
        ).fetchone()
        feeds = conn.execute(
            "SELECT source_id, manifest->'cdc'->>'topic' FROM sources WHERE enabled AND "
            "manifest->'cdc' IS NOT NULL AND manifest->'cdc' <> 'null'::jsonb ORDER BY source_id"
        ).fetchall()
        generations = conn.execute(
            "SELECT embedder, embedder_version, dims, state FROM vector_generations "
            "WHERE state <> 'retired' ORDER BY state DESC, embedder"
        ).fetchall()
        healing = conn.execute(
            "SELECT runner, healing FROM worker_heartbeats WHERE healing IS NOT NULL "
            "AND beat_at > now() - interval '60 seconds' ORDER BY runner"
        ).fetchall()
        rebuilds = conn.execute(
            "SELECT id, done, total FROM jobs WHERE kind = 'reindex' AND state = 'running' "
            "AND requested_by = %s ORDER BY id",
            (SELF_HEAL,),
        ).fetchall()
    assert counts is not None
    return {
        "version": version[0] if version else "?",
        "sources": counts[0],
        "active_documents": counts[1],
        "chunks": counts[2],
        "embedding_backlog": counts[3],
        "cdc_feeds": [{"source": f[0], "topic": f[1]} for f in feeds if f[1]],
        "vector_generations": [
            {"model": f"{g[0]}/{g[1]}", "dims": g[2], "state": g[3]} for g in generations
        ],
        "outbox_pending": outbox[0] if outbox else None,
        "healing": [{"runner": r[0], "what": r[1]} for r in healing],
        "rebuilds": [{"job": r[0], "done": r[1], "total": r[2]} for r in rebuilds],
        "pending_events": [
            {
                "source": r[0],
                "awaits": r[1],
                "pending": r[2],
                "oldest_s": round(float(r[3]), 1),
                "republished": r[4],
                "last_republished": r[5],
            }
            for r in emitted
        ],
        "pending_purges": [
            {
                "doc": f"{r[0]}/{r[1]}/{r[2]}",
                "sequence": r[3],
                "mode": r[4],
                "since": r[5],
                "attempts": r[6],
                "last_error": r[7],
            }
            for r in pending
        ],
    }


class PostgresGauges(PostgresAdapter):
    """What the metrics collector samples from Postgres, in one round trip each."""

    async def sample(self) -> dict[str, Any]:
        row = await self._row(
            "SELECT "
            " (SELECT count(*) FROM outbox WHERE awaits IS NOT NULL AND settled_at IS NULL), "
            " (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM outbox "
            "  WHERE awaits IS NOT NULL AND settled_at IS NULL), "
            " (SELECT count(*) FROM outbox WHERE published_at IS NULL), "
            " (SELECT count(*) FROM tombstones WHERE purge_state <> 'purged'), "
            " (SELECT coalesce(extract(epoch FROM now() - min(recorded_at)), 0) FROM tombstones "
            "  WHERE purge_state <> 'purged'), "
            " (SELECT count(*) FROM embedding_backlog), "
            " (SELECT coalesce(extract(epoch FROM now() - min(queued_at)), 0) "
            "  FROM embedding_backlog)"
        )
        assert row is not None
        jobs = await self._rows(
            "SELECT kind, state, count(*), sum(done) FILTER (WHERE state = 'running'), "
            " sum(total) FILTER (WHERE state = 'running') FROM jobs GROUP BY kind, state"
        )
        fresh = await self._row(
            "SELECT coalesce(extract(epoch FROM now() - min(last_synced_at)), 0), "
            " count(*) FILTER (WHERE last_synced_at < now() - (manifest ->> 'refresh_sla')"
            "  ::interval) FROM sources WHERE last_synced_at IS NOT NULL AND enabled"
        )
        assert fresh is not None
        return {
            "source_freshness_s": float(fresh[0]),
            "sources_stale": int(fresh[1]),
            "outbox_pending": int(row[0]),
            "outbox_oldest_s": float(row[1]),
            "outbox_unsent": int(row[2]),
            "purges_pending": int(row[3]),
            "purges_oldest_s": float(row[4]),
            "embedding_backlog": int(row[5]),
            "embedding_backlog_oldest_s": float(row[6]),
            "jobs": [(str(k), str(s), int(n), int(d or 0), int(t or 0)) for k, s, n, d, t in jobs],
        }
