"""The rows a batch of new versions writes, set-based: what was current is superseded, the
version rows are copied, older validity ends, graph edges and vectors are added."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb

from govindex.adapters.postgres.chunks import insert_vectors
from govindex.adapters.postgres.document_keys import key_columns
from govindex.core.ports import VersionPlan


async def supersede_current(conn: AsyncConnection[Any], plans: Sequence[VersionPlan]) -> None:
    """Whatever was current in each plan's document stops being current (system time); its
    chunks move to the plan's sequence, so the projection re-reads them."""
    keys = key_columns([p.key for p in plans])
    at = [p.recorded_at for p in plans]
    seq = [p.sequence for p in plans]
    await conn.execute(
        "UPDATE document_versions x SET superseded_at = u.at FROM unnest(%s::text[], "
        " %s::text[], %s::text[], %s::timestamptz[]) AS u(t, s, d, at) "
        "WHERE x.tenant_id = u.t AND x.source_id = u.s AND x.doc_id = u.d "
        " AND x.superseded_at IS NULL",
        (*keys, at),
    )
    await conn.execute(
        "UPDATE chunks x SET superseded_at = u.at, sequence = u.q FROM unnest(%s::text[], "
        " %s::text[], %s::text[], %s::timestamptz[], %s::bigint[]) AS u(t, s, d, at, q) "
        "WHERE x.tenant_id = u.t AND x.source_id = u.s AND x.doc_id = u.d "
        " AND x.superseded_at IS NULL",
        (*keys, at, seq),
    )
    await conn.execute(
        "UPDATE graph_edges x SET superseded_at = u.at FROM unnest(%s::text[], "
        " %s::text[], %s::text[], %s::timestamptz[]) AS u(t, s, d, at) "
        "WHERE x.tenant_id = u.t AND x.source_id = u.s AND x.doc_id = u.d "
        " AND x.superseded_at IS NULL",
        (*keys, at),
    )


async def copy_versions(conn: AsyncConnection[Any], plans: Sequence[VersionPlan]) -> None:
    """The version rows, with COPY: one stream for the batch."""
    async with (
        conn.cursor() as cur,
        cur.copy(
            "COPY document_versions (version_id, tenant_id, source_id, doc_id, "
            " version_sequence, sequence, source_version, content_hash, content, "
            " media_type, title, metadata, declared_valid_to, valid_from, valid_to, "
            " observed_at, recorded_at, parser, parser_version) FROM STDIN"
        ) as copy,
    ):
        for plan in plans:
            await copy.write_row(
                (
                    plan.version_id,
                    plan.tenant_id,
                    plan.source_id,
                    plan.doc_id,
                    plan.sequence,
                    plan.sequence,
                    plan.source_version,
                    plan.content_hash,
                    plan.content,
                    plan.media_type,
                    plan.title,
                    Jsonb(plan.metadata),
                    plan.valid_to,
                    plan.valid_from,
                    plan.valid_to,
                    plan.observed_at,
                    plan.recorded_at,
                    plan.parser,
                    plan.parser_version,
                )
            )


async def end_older_validity(
    conn: AsyncConnection[Any], plans: Sequence[VersionPlan], *, keep: str | None = None
) -> None:
    """A newer version ends older ones' validity at its valid_from (docs/design/records.md).

    `keep`: the version a metadata-only change re-stamps (otherwise each plan's own).
    """
    params = (
        *key_columns([p.key for p in plans]),
        [keep or p.version_id for p in plans],
        [p.valid_from for p in plans],
        [p.sequence for p in plans],
    )
    for table, extra in (
        ("document_versions", ""),
        ("chunks", ", sequence = u.q"),  # the projection re-reads chunks by sequence
        ("graph_edges", ""),
    ):
        await conn.execute(
            sql.SQL("UPDATE {} x SET valid_to = u.vf").format(sql.Identifier(table))
            + sql.SQL(extra)
            + sql.SQL(
                " FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], "
                " %s::timestamptz[], %s::bigint[]) AS u(t, s, d, v, vf, q) "
                "WHERE x.tenant_id = u.t AND x.source_id = u.s AND x.doc_id = u.d "
                " AND x.version_id <> u.v AND (x.valid_to IS NULL OR x.valid_to > u.vf)"
            ),
            params,
        )


async def insert_plan_vectors(conn: AsyncConnection[Any], plans: Sequence[VersionPlan]) -> None:
    """The chunks' vectors, one insert per model that made them."""
    embedded = [p for p in plans if p.embedder is not None and p.vectors]
    for embedder in {p.embedder for p in embedded}:
        assert embedder is not None
        same = [p for p in embedded if p.embedder == embedder]
        await insert_vectors(
            conn,
            [c.chunk_id for p in same for c in p.chunks],
            [v for p in same for v in p.vectors],
            embedder,
            len(same[0].vectors[0]) // 4,
        )


async def insert_edges(conn: AsyncConnection[Any], plans: Sequence[VersionPlan]) -> None:
    """The plans' graph edges, and their entities (aliases merged)."""
    entities: dict[tuple[str, str], set[str]] = {}
    edges: list[tuple[Any, ...]] = []
    for plan in plans:
        evidence = plan.chunks[0].chunk_id if plan.chunks else None
        happened = plan.chunks[0].event_time if plan.chunks else None  # the document's
        for edge in plan.edges:
            for entity_id, alias in (
                (edge.subject, edge.subject_alias),
                (edge.object, edge.object_alias),
            ):
                entities.setdefault((plan.tenant_id, entity_id), set()).add(alias)
            edge_id = hashlib.sha256(
                f"{edge.subject}\x00{edge.relation}\x00{edge.object}\x00{plan.version_id}".encode()
            ).hexdigest()[:32]
            edges.append(
                (
                    edge_id,
                    plan.tenant_id,
                    edge.subject,
                    edge.relation,
                    edge.object,
                    plan.source_id,
                    plan.doc_id,
                    plan.version_id,
                    plan.sequence,
                    plan.source_version,
                    evidence,
                    plan.valid_from,
                    plan.valid_to,
                    plan.recorded_at,
                    happened,
                )
            )
    if not edges:
        return
    async with conn.cursor() as cur:
        await cur.executemany(  # sorted: concurrent batches lock entity rows in one order
            "INSERT INTO graph_entities (tenant_id, entity_id, kind, aliases) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, entity_id) DO UPDATE "
            "SET aliases = (SELECT array_agg(DISTINCT a) FROM unnest("
            " graph_entities.aliases || EXCLUDED.aliases) a)",
            [
                (tenant, entity, entity.split(":", 1)[0], sorted(aliases))
                for (tenant, entity), aliases in sorted(entities.items())
            ],
        )
        await cur.executemany(
            "INSERT INTO graph_edges (edge_id, tenant_id, subject, relation, object, "
            " source_id, doc_id, version_id, version_sequence, source_version, "
            " evidence_chunk_id, valid_from, valid_to, recorded_at, event_time) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (edge_id) DO NOTHING",
            edges,
        )
