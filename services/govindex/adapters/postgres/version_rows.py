"""The rows a batch of new versions writes, set-based: what was current is superseded, the
version rows are copied, older validity ends, graph edges and vectors are added."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb

from govindex.adapters.postgres.arrays import int_array, text_array, time_array
from govindex.adapters.postgres.document_keys import key_columns
from govindex.adapters.postgres.vectors import copy_vectors
from govindex.core.ports import VersionPlan


async def supersede_current(conn: AsyncConnection[Any], plans: Sequence[VersionPlan]) -> None:
    """Whatever was current in each plan's document stops being current (system time); its
    chunks move to the plan's sequence, so the projection re-reads them."""
    keys = key_columns([p.key for p in plans])
    at = time_array(p.recorded_at for p in plans)
    seq = int_array(p.sequence for p in plans)
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
            " observed_at, recorded_at, parser, parser_version, raw_content) FROM STDIN"
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
                    plan.raw_content,
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
        text_array(keep or p.version_id for p in plans),
        time_array(p.valid_from for p in plans),
        int_array(p.sequence for p in plans),
    )
    for table, extra, only in (
        ("document_versions", "", ""),
        ("chunks", ", sequence = u.q", ""),  # the projection re-reads chunks by sequence
        ("graph_edges", "", " AND NOT x.own_time"),  # an entry's own window stays its own
    ):
        await conn.execute(
            sql.SQL("UPDATE {} x SET valid_to = u.vf").format(sql.Identifier(table))
            + sql.SQL(extra)
            + sql.SQL(
                " FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], "
                " %s::timestamptz[], %s::bigint[]) AS u(t, s, d, v, vf, q) "
                "WHERE x.tenant_id = u.t AND x.source_id = u.s AND x.doc_id = u.d "
                " AND x.version_id <> u.v AND (x.valid_to IS NULL OR x.valid_to > u.vf)"
            )
            + sql.SQL(only),
            params,
        )


async def insert_plan_vectors(conn: AsyncConnection[Any], plans: Sequence[VersionPlan]) -> None:
    """The chunks' vectors, one insert per model that made them; the chunks a model could
    not embed now are queued for it."""
    models = {model for p in plans for model in p.vectors}
    for model in sorted(models):
        same = [p for p in plans if p.vectors.get(model)]
        await copy_vectors(
            conn,
            [c.chunk_id for p in same for c in p.chunks],
            [v for p in same for v in p.vectors[model]],
            model,
            len(same[0].vectors[model][0]) // 4,
        )
    pending = [c.chunk_id for p in plans if p.embed_pending for c in p.chunks]
    if pending:
        await conn.execute(
            "INSERT INTO embedding_backlog (chunk_id) SELECT unnest(%s::text[]) "
            "ON CONFLICT (chunk_id) DO NOTHING",
            (pending,),
        )


# Long: one row tuple per edge, every column beside the others.
async def insert_edges(conn: AsyncConnection[Any], plans: Sequence[VersionPlan]) -> None:
    """The plans' graph edges, and their entities (aliases merged; an entity a fact entry
    declares is marked declared, and stays so)."""
    entities: dict[tuple[str, str], tuple[set[str], bool]] = {}

    def entity(tenant: str, entity_id: str, aliases: Sequence[str], declared: bool) -> None:
        names, was = entities.setdefault((tenant, entity_id), (set(), False))
        names.update(a for a in aliases if a)
        entities[(tenant, entity_id)] = (names, was or declared)

    edges: list[tuple[Any, ...]] = []
    for plan in plans:
        by_ordinal = {c.ordinal: c for c in plan.chunks}
        for declared in plan.entities:
            entity(plan.tenant_id, declared.entity_id, declared.aliases, True)
        for edge in plan.edges:
            entity(plan.tenant_id, edge.subject, (edge.subject_alias,), False)
            entity(plan.tenant_id, edge.object, (edge.object_alias,), False)
            chunk = by_ordinal.get(edge.evidence if edge.evidence is not None else -1)
            if chunk is None:
                chunk = plan.chunks[0] if plan.chunks else None
            own = edge.evidence is not None or edge.own_time
            material = "\x00".join(
                [edge.subject, edge.relation, edge.object, plan.version_id]
                + ([str(edge.evidence), str(edge.valid_from), str(edge.valid_to)] if own else [])
            )
            edges.append(
                (
                    hashlib.sha256(material.encode()).hexdigest()[:32],
                    plan.tenant_id,
                    edge.subject,
                    edge.relation,
                    edge.object,
                    plan.source_id,
                    plan.doc_id,
                    plan.version_id,
                    plan.sequence,
                    plan.source_version,
                    chunk.chunk_id if chunk else None,
                    edge.valid_from if own and edge.valid_from else plan.valid_from,
                    edge.valid_to if own else plan.valid_to,
                    plan.recorded_at,
                    edge.event_time,
                    edge.method,
                    edge.confidence,
                    chunk.ordinal if chunk else None,
                    edge.own_time,
                )
            )
    if not entities:
        return
    async with conn.cursor() as cur:
        await cur.executemany(  # sorted: concurrent batches lock entity rows in one order
            "INSERT INTO graph_entities (tenant_id, entity_id, kind, aliases, declared) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, entity_id) DO UPDATE "
            "SET aliases = (SELECT array_agg(DISTINCT a) FROM unnest("
            " graph_entities.aliases || EXCLUDED.aliases) a), "
            " declared = graph_entities.declared OR EXCLUDED.declared",
            [
                (tenant, entity_id, entity_id.split(":", 1)[0], sorted(aliases), declared)
                for (tenant, entity_id), (aliases, declared) in sorted(entities.items())
            ],
        )
        if edges:
            await cur.executemany(
                "INSERT INTO graph_edges (edge_id, tenant_id, subject, relation, object, "
                " source_id, doc_id, version_id, version_sequence, source_version, "
                " evidence_chunk_id, valid_from, valid_to, recorded_at, event_time, method, "
                " confidence, evidence_ordinal, own_time) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (edge_id) DO NOTHING",
                edges,
            )


async def continue_restated(conn: AsyncConnection[Any], plans: Sequence[VersionPlan]) -> None:
    """A chunk or edge a new version restates unchanged (same text; same edge and event
    time) continues its previous copy rather than overlapping it: it holds from the new
    version's valid_from, where the previous copy now ends. Without this, a row that
    happened before its first commit (event_time) would be stated twice for every later
    version over the stretch between its event and the new commit."""
    params = (
        text_array(p.version_id for p in plans),
        time_array(p.valid_from for p in plans),
        time_array(p.recorded_at for p in plans),
    )
    await conn.execute(
        "UPDATE chunks n SET valid_from = u.vf FROM unnest(%s::text[], %s::timestamptz[], "
        " %s::timestamptz[]) AS u(v, vf, at) WHERE n.version_id = u.v AND n.valid_from < u.vf "
        " AND EXISTS (SELECT 1 FROM chunks o WHERE o.tenant_id = n.tenant_id AND "
        "  o.source_id = n.source_id AND o.doc_id = n.doc_id AND o.superseded_at = u.at "
        "  AND o.version_id <> n.version_id AND o.content_hash = n.content_hash)",
        params,
    )
    await conn.execute(
        "UPDATE graph_edges n SET valid_from = u.vf FROM unnest(%s::text[], "
        " %s::timestamptz[], %s::timestamptz[]) AS u(v, vf, at) WHERE n.version_id = u.v "
        " AND NOT n.own_time AND n.valid_from < u.vf AND EXISTS (SELECT 1 FROM graph_edges o "
        "  WHERE o.tenant_id = n.tenant_id AND o.source_id = n.source_id AND "
        "  o.doc_id = n.doc_id AND o.superseded_at = u.at AND o.version_id <> n.version_id "
        "  AND o.subject = n.subject AND o.relation = n.relation AND o.object = n.object "
        "  AND o.event_time IS NOT DISTINCT FROM n.event_time AND NOT o.own_time)",
        params,
    )
