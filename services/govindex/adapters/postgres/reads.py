"""The read service's view of Postgres: one read-only snapshot per request.

Every channel query carries the same admission predicate (`admission.ADMISSIBLE`), so nothing
is filtered after ranking. The read service then re-checks every candidate, and every chunk
it hydrates a pack item with, from `facts` and `facts_around` (integrity included) in the
same snapshot.

(Over 450 lines on purpose: every statement a read runs, each beside the others that carry
the same admission predicate, so a change to one is seen against all.)
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, LiteralString

from psycopg import AsyncConnection, sql
from psycopg.errors import QueryCanceled
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from govindex.adapters.postgres.admission import (
    ACCESS,
    ADMISSIBLE,
    EDGE_HELD,
    HELD,
    VALID_AT,
    WHERE_ADMISSIBLE,
    WHERE_OUTSIDE_VALID_TIME,
    admission_params,
)
from govindex.adapters.postgres.chunks import CHUNK_COLUMNS
from govindex.adapters.postgres.tx import transaction
from govindex.adapters.postgres.vectors import live_generation, vector_literal
from govindex.core.graph_templates import GraphRoute, GraphWalkStopped
from govindex.core.ports import (
    ChunkFacts,
    EdgeFact,
    EdgeRow,
    Embedder,
    GraphReach,
    ReadAccess,
    ReadFilters,
)
from govindex.core.records import Chunk

# What the gates need besides the chunk, read in the same statement.
_FACTS: LiteralString = """
    SELECT {columns},
        EXISTS (SELECT 1 FROM sources s WHERE s.tenant_id = c.tenant_id
                AND s.source_id = c.source_id AND s.enabled) AS source_enabled,
        EXISTS (SELECT 1 FROM tombstones t WHERE t.tenant_id = c.tenant_id
                AND t.source_id = c.source_id AND t.doc_id = c.doc_id
                AND t.deletion_mode = 'tombstone_and_purge'
                AND t.sequence > c.version_sequence) AS purge_tombstoned,
        EXISTS (SELECT 1 FROM tombstones t WHERE t.tenant_id = c.tenant_id
                AND t.source_id = c.source_id AND t.doc_id = c.doc_id
                AND t.sequence > c.version_sequence) AS tombstoned,
        NOT EXISTS (SELECT 1 FROM document_versions v WHERE v.version_id = c.version_id
                AND v.content_purged_at IS NULL) AS content_purged,
        (c.superseded_at IS NOT NULL) AS superseded,
        (SELECT v.title FROM document_versions v WHERE v.version_id = c.version_id) AS title,
        (SELECT s.manifest ->> 'web_url' FROM sources s WHERE s.tenant_id = c.tenant_id
                AND s.source_id = c.source_id) AS web_url,
        EXISTS (SELECT 1 FROM sources s WHERE s.tenant_id = c.tenant_id
                AND s.source_id = c.source_id AND s.last_synced_at
                < now() - (s.manifest ->> 'refresh_sla')::interval) AS stale_source
    FROM chunks c
"""
_FACT_FLAGS = (
    "source_enabled",
    "purge_tombstoned",
    "tombstoned",
    "content_purged",
    "superseded",
    "title",
    "web_url",
    "stale_source",
)

# Every chunk the seeds may be hydrated with: their parents, and `neighbours` steps along
# their previous and next links. The walk does not stop at a chunk the gates would refuse
# (the caller stops there), so it reads at most 1 + 2 * neighbours chunks per seed.
_AROUND: LiteralString = """
    WITH RECURSIVE seed AS (
        SELECT c.parent_id, c.prev_id, c.next_id FROM chunks c
        WHERE c.chunk_id = ANY (%(ids)s::text[])
    ), walk (chunk_id, toward, step) AS (
        SELECT l.chunk_id, l.toward, 1 FROM seed
        CROSS JOIN LATERAL (VALUES (seed.prev_id, 'previous'), (seed.next_id, 'next'))
            AS l (chunk_id, toward)
        WHERE l.chunk_id IS NOT NULL AND %(neighbours)s::int >= 1
        UNION ALL
        SELECT CASE w.toward WHEN 'previous' THEN c.prev_id ELSE c.next_id END, w.toward,
            w.step + 1
        FROM walk w JOIN chunks c ON c.chunk_id = w.chunk_id
        WHERE w.step < %(neighbours)s::int
            AND CASE w.toward WHEN 'previous' THEN c.prev_id ELSE c.next_id END IS NOT NULL
    ), around AS (
        SELECT parent_id AS chunk_id FROM seed WHERE %(parent)s AND parent_id IS NOT NULL
        UNION SELECT chunk_id FROM walk
    )
"""


class PostgresReadSnapshot:
    """Implements ReadSnapshot on one REPEATABLE READ, READ ONLY transaction."""

    def __init__(self, conn: AsyncConnection[Any], dense: Dense | None) -> None:
        self._conn = conn
        self._dense = dense

    async def _ids(self, query: LiteralString, params: dict[str, Any]) -> list[str]:
        cur = await self._conn.execute(query, params)
        return [row[0] for row in await cur.fetchall()]

    async def fulltext(
        self, access: ReadAccess, filters: ReadFilters, text: str, limit: int
    ) -> list[str]:
        """Postgres full text (`simple` configuration, OR of the query's words), ts_rank_cd."""
        return await self._fulltext(WHERE_ADMISSIBLE, access, filters, text, limit)

    async def outside_valid_time(
        self, access: ReadAccess, filters: ReadFilters, text: str, limit: int
    ) -> list[str]:
        """The fulltext channel without its valid-time predicate, and only what it drops:
        chunks the subject may see that match the query but are not valid at as_of."""
        return await self._fulltext(WHERE_OUTSIDE_VALID_TIME, access, filters, text, limit)

    async def _fulltext(
        self,
        where: LiteralString,
        access: ReadAccess,
        filters: ReadFilters,
        text: str,
        limit: int,
    ) -> list[str]:
        words = [w for w in _words(text) if len(w) > 1][:32]
        if not words:
            return []
        query = " | ".join(f"'{w}'" for w in words)
        return await self._ids(
            "SELECT c.chunk_id FROM chunks c" + where + " AND c.tsv @@ to_tsquery('simple', "
            "%(q)s) ORDER BY ts_rank_cd(c.tsv, to_tsquery('simple', %(q)s)) DESC, c.chunk_id "
            "LIMIT %(limit)s",
            admission_params(access, filters, q=query, limit=limit),
        )

    async def relations(
        self,
        access: ReadAccess,
        entity: str,
        relation: str | None,
        outgoing: bool,
        incoming: bool,
        limit: int,
        other_type: str | None = None,
    ) -> list[EdgeRow]:
        """The entity's edges (as subject when `outgoing`, as object when `incoming`) valid
        at as_of and held at known_at, whose evidence chunk the subject may see."""
        cur = await self._conn.execute(
            "SELECT e.edge_id, e.subject, e.relation, e.object, e.valid_from, e.valid_to, "
            " e.recorded_at, e.source_version, e.evidence_chunk_id, e.event_time, "
            " e.confidence, e.method, NOT coalesce(other.declared, false) "
            "FROM graph_edges e "
            "JOIN chunks c ON c.chunk_id = e.evidence_chunk_id "
            "LEFT JOIN graph_entities other ON other.tenant_id = e.tenant_id AND "
            " other.entity_id = CASE WHEN e.subject = %(entity)s THEN e.object "
            " ELSE e.subject END "
            "WHERE e.tenant_id = %(tenant)s AND ((%(outgoing)s AND e.subject = %(entity)s) "
            " OR (%(incoming)s AND e.object = %(entity)s)) "
            " AND (%(relation)s::text IS NULL OR e.relation = %(relation)s) "
            " AND (%(other_type)s::text IS NULL OR split_part(CASE WHEN e.subject = "
            "  %(entity)s THEN e.object ELSE e.subject END, ':', 1) = %(other_type)s) "
            " AND " + EDGE_HELD + " AND " + ADMISSIBLE + " ORDER BY e.relation, e.valid_from, "
            " e.edge_id LIMIT %(limit)s",
            admission_params(
                access,
                ReadFilters(),
                entity=entity,
                relation=relation,
                outgoing=outgoing,
                incoming=incoming,
                other_type=other_type,
                limit=limit,
            ),
        )
        return [EdgeRow(*row) for row in await cur.fetchall()]

    async def with_evidence(
        self, access: ReadAccess, filters: ReadFilters, text: str, kinds: Sequence[str], limit: int
    ) -> dict[str, list[str]]:
        """For each evidence type, admissible chunks that can support it: those matching the
        query's words first (ts_rank_cd), then the most recently recorded."""
        words = [w for w in _words(text) if len(w) > 1][:32]
        query = " | ".join(f"'{w}'" for w in words) if words else None
        found: dict[str, list[str]] = {}
        for kind in dict.fromkeys(kinds):
            found[kind] = await self._ids(
                "SELECT c.chunk_id FROM chunks c"
                + WHERE_ADMISSIBLE
                + " AND c.evidence @> ARRAY[%(kind)s]::text[] ORDER BY "
                " (%(q)s::text IS NOT NULL AND c.tsv @@ to_tsquery('simple', coalesce(%(q)s, ''))) "
                " DESC, ts_rank_cd(c.tsv, to_tsquery('simple', coalesce(%(q)s, ''))) DESC, "
                " c.recorded_at DESC, c.chunk_id LIMIT %(limit)s",
                admission_params(access, filters, kind=kind, q=query, limit=limit),
            )
        return found

    async def replacements(
        self, access: ReadAccess, left_out: Sequence[Chunk]
    ) -> dict[str, ChunkFacts]:
        """For each chunk left out for time (by chunk id): the chunk of another version of
        its document the subject may see, the version valid at as_of first, else the newest
        later one; at the same locator when that version has it. Nothing for a document with
        no such version."""
        if not left_out:
            return {}
        wanted = {
            "ids": [c.chunk_id for c in left_out],
            "sources": [c.source_id for c in left_out],
            "docs": [c.doc_id for c in left_out],
            "versions": [c.version_id for c in left_out],
            "sequences": [c.version_sequence for c in left_out],
            "locators": [c.locator for c in left_out],
        }
        cur = await self._conn.execute(
            "SELECT w.id, r.chunk_id FROM unnest(%(ids)s::text[], %(sources)s::text[], "
            " %(docs)s::text[], %(versions)s::text[], %(sequences)s::bigint[], "
            " %(locators)s::text[]) AS w(id, source_id, doc_id, version_id, seq, locator) "
            "CROSS JOIN LATERAL (SELECT c.chunk_id FROM chunks c WHERE c.source_id = "
            " w.source_id AND c.doc_id = w.doc_id AND c.version_id <> w.version_id AND "
            + ACCESS
            + HELD
            + " AND (("
            + VALID_AT
            + ") OR c.version_sequence > w.seq) ORDER BY ("
            + VALID_AT
            + ") DESC, c.version_sequence DESC, (c.locator = w.locator) DESC, c.ordinal "
            " LIMIT 1) r",
            admission_params(access, ReadFilters(), **wanted),
        )
        chosen = {str(row[0]): str(row[1]) for row in await cur.fetchall()}
        found = await self.facts(sorted(set(chosen.values())))
        return {left: found[c] for left, c in chosen.items() if c in found}

    async def structured(
        self, access: ReadAccess, filters: ReadFilters, keys: Sequence[str], limit: int
    ) -> list[str]:
        """Exact keys: a chunk id, a doc id, a locator, a label (`key:PAY-4097`, or the bare
        value of any label), or an identifier that occurs as a whole word in the text."""
        keys = [k for k in dict.fromkeys(keys) if k][:32]
        if not keys:
            return []
        lowered = [k.lower() for k in keys]
        lexemes = [k for k in lowered if _WORD.fullmatch(k)]
        return await self._ids(
            "SELECT c.chunk_id FROM chunks c" + WHERE_ADMISSIBLE + " AND ("
            " c.chunk_id = ANY (%(keys)s) OR c.doc_id = ANY (%(keys)s) OR c.locator = ANY "
            " (%(keys)s) OR c.labels && %(keys)s::text[] OR EXISTS (SELECT 1 FROM unnest("
            " c.labels) l WHERE lower(split_part(l, ':', 2)) = ANY (%(lowered)s))"
            " OR c.tsv @@ (SELECT coalesce(string_agg(quote_literal(k), ' | ')::tsquery, "
            "   ''::tsquery) FROM unnest(%(lexemes)s::text[]) k)) "
            "ORDER BY (c.doc_id = ANY (%(keys)s) OR c.labels && %(keys)s::text[]) DESC, "
            " c.ordinal, c.chunk_id LIMIT %(limit)s",
            admission_params(
                access, filters, keys=keys, lowered=lowered, lexemes=lexemes, limit=limit
            ),
        )

    async def dense(
        self, access: ReadAccess, filters: ReadFilters, text: str, limit: int
    ) -> list[str]:
        """The nearest admissible chunks of the live model generation, by pgvector's HNSW
        index in the same statement as the admission predicate: a chunk the subject may not
        see is never ranked, let alone returned. Iterative index scans keep a selective
        filter from starving the result (the scan goes on past ef_search until `limit`
        admissible chunks are found or max_scan_tuples are read)."""
        dense = self._dense
        if dense is None or not text.strip():
            return []
        # The relaxed-order scan's first `limit` are not quite the nearest `limit`: it is
        # asked for at least DENSE_OVERFETCH, which re-sorted hold them (docs/benchmarks).
        fetch = max(limit, DENSE_OVERFETCH)
        # One round trip: the live generation, and this transaction's HNSW search settings.
        live = await live_generation(
            self._conn, ef_search=max(dense.ef_search, fetch), max_scan=dense.max_scan_tuples
        )
        embedder = next(
            (
                e
                for e in dense.embedders
                if live is not None and (e.name, e.version) == (live.embedder, live.version)
            ),
            None,
        )
        if live is None or embedder is None:
            # Reads never rank one model's query against another's vectors.
            return []
        (made,) = await asyncio.to_thread(embedder.embed, [text])  # not on the event loop
        query = vector_literal(made)
        distance = sql.SQL("{} <#> {}").format(
            live.cast(sql.Identifier("cv", "embedding")), live.cast(sql.Placeholder("query"))
        )
        statement = sql.Composed(
            [
                sql.SQL("SELECT chunk_id, similarity FROM (SELECT c.chunk_id, -("),
                distance,
                sql.SQL(") AS similarity FROM chunks c JOIN chunk_vectors cv USING (chunk_id)"),
                sql.SQL(WHERE_ADMISSIBLE),
                sql.SQL(" AND "),
                live.rows("cv"),
                sql.SQL(" ORDER BY "),
                distance,
                sql.SQL(" LIMIT %(fetch)s) AS near ORDER BY similarity DESC, chunk_id"),
                sql.SQL(" LIMIT %(limit)s"),
            ]
        )
        cur = await self._conn.execute(
            statement, admission_params(access, filters, query=query, fetch=fetch, limit=limit)
        )
        # Below the floor a static model's neighbours are noise, not paraphrases.
        return [row[0] for row in await cur.fetchall() if row[1] >= dense.min_similarity]

    async def graph(
        self,
        access: ReadAccess,
        filters: ReadFilters,
        seeds: Sequence[str],
        routes: Sequence[GraphRoute],
        limit: int,
        *,
        statement_timeout_ms: int | None = None,
    ) -> list[GraphReach]:
        """Walk only the routes' steps from the entities matching the seeds (`_walk`); an
        edge is walked only if its evidence chunk is admissible. The evidence of each walked
        edge, and the admissible chunks of each document reached (a seed that is a document
        too), are what the walk reaches, each with its path.

        The walk runs in a savepoint, each statement under `statement_timeout_ms`: past it,
        the savepoint is rolled back (the timeout with it) and GraphWalkStopped raised, so
        the snapshot's other statements run as if the walk had not."""
        if not seeds or not routes:
            return []
        params = admission_params(access, filters)
        try:
            async with self._conn.transaction():
                before = None
                if statement_timeout_ms is not None:
                    cur = await self._conn.execute(
                        "SELECT current_setting('statement_timeout'), "
                        "set_config('statement_timeout', %s, true)",
                        (str(statement_timeout_ms),),
                    )
                    row = await cur.fetchone()
                    before = None if row is None else str(row[0])
                found = await self._reach(params, await self._seed_entities(access, seeds), routes)
                if before is not None:  # the snapshot's other statements: as they were
                    await self._conn.execute(
                        "SELECT set_config('statement_timeout', %s, true)", (before,)
                    )
        except QueryCanceled as exc:
            if "statement timeout" not in (exc.diag.message_primary or ""):
                raise
            raise GraphWalkStopped(
                f"the graph walk was stopped by the statement timeout ({statement_timeout_ms} "
                "ms); the graph channel contributes nothing to this read"
            ) from exc
        return found[:limit]

    async def _reach(
        self, params: dict[str, Any], seeds: set[str], routes: Sequence[GraphRoute]
    ) -> list[GraphReach]:
        reached, paths = await self._walk(params, seeds, routes)
        documents = sorted(e for e in paths if e.startswith("document:"))
        if documents:
            cur = await self._conn.execute(
                "SELECT c.chunk_id, 'document:' || c.source_id || '/' || c.doc_id AS entity "
                "FROM chunks c" + WHERE_ADMISSIBLE + " AND ('document:' || c.source_id || '/' || "
                "c.doc_id) = ANY (%(docs)s) ORDER BY c.ordinal, c.chunk_id",
                {**params, "docs": documents},
            )
            for chunk_id, entity in await cur.fetchall():
                reached.setdefault(chunk_id, paths[entity])
        admitted = set(
            await self._ids(
                "SELECT c.chunk_id FROM chunks c"
                + WHERE_ADMISSIBLE
                + " AND c.chunk_id = ANY (%(ids)s)",
                {**params, "ids": list(reached)},
            )
        )
        ordered = sorted(
            (r for r in reached.items() if r[0] in admitted), key=lambda r: (len(r[1]), r[0])
        )
        return [GraphReach(chunk_id, path) for chunk_id, path in ordered]

    async def _walk(
        self, params: dict[str, Any], seeds: set[str], routes: Sequence[GraphRoute]
    ) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
        """Each route's steps in turn: its first from the seeds, its second from what its
        first reached, each edge only in its move's direction (from the object when
        backwards), only to its move's entity type, valid at as_of, held at known_at, and
        with admissible evidence; a path never comes back to an entity it passed. The path
        to each walked edge's evidence chunk, and to every entity reached (the seeds
        included): (entity, relation, entity, ...), the relation as stored, shortest first."""
        reached: dict[str, tuple[str, ...]] = {}  # evidence chunk id -> path
        paths: dict[str, tuple[str, ...]] = {entity: (entity,) for entity in seeds}
        # What each route has reached by its last step: entity -> the path it took there.
        fronts: list[dict[str, tuple[str, ...]]] = [dict(paths) for _ in routes]
        for step in range(max((len(r.steps) for r in routes), default=0)):
            moves = [
                (i, entity, move)
                for i, route in enumerate(routes)
                if step < len(route.steps)
                for entity in sorted(fronts[i])
                for move in route.steps[step]
            ]
            if not moves:
                break
            cur = await self._conn.execute(
                "WITH m (ord, entity, relation, backwards, reach) AS (SELECT * FROM unnest("
                " %(ords)s::int[], %(entities)s::text[], %(relations)s::text[], "
                " %(backwards)s::bool[], %(reach)s::text[])), "
                "hop AS (SELECT m.ord, m.reach, e.object AS there, e.edge_id, e.subject, "
                "  e.relation, e.object, e.evidence_chunk_id, e.valid_from, e.valid_to, "
                "  e.recorded_at, e.superseded_at, e.own_time FROM m JOIN graph_edges e ON "
                "  e.tenant_id = %(tenant)s AND e.subject = m.entity AND e.relation = "
                "  m.relation WHERE NOT m.backwards "
                " UNION ALL SELECT m.ord, m.reach, e.subject, e.edge_id, e.subject, "
                "  e.relation, e.object, e.evidence_chunk_id, e.valid_from, e.valid_to, "
                "  e.recorded_at, e.superseded_at, e.own_time FROM m JOIN graph_edges e ON "
                "  e.tenant_id = %(tenant)s AND e.object = m.entity AND e.relation = "
                "  m.relation WHERE m.backwards) "
                "SELECT e.ord, e.subject, e.relation, e.object, e.evidence_chunk_id FROM hop e "
                "JOIN chunks c ON c.chunk_id = e.evidence_chunk_id "
                "WHERE (e.reach IS NULL OR split_part(e.there, ':', 1) = e.reach) "
                " AND " + EDGE_HELD + " AND " + ADMISSIBLE + " ORDER BY e.ord, e.edge_id",
                {
                    **params,
                    "ords": list(range(len(moves))),
                    "entities": [entity for _, entity, _ in moves],
                    "relations": [move.relation for _, _, move in moves],
                    "backwards": [move.backwards for _, _, move in moves],
                    "reach": [move.reach for _, _, move in moves],
                },
            )
            following: list[dict[str, tuple[str, ...]]] = [{} for _ in routes]
            for ordinal, subject, relation, obj, evidence in await cur.fetchall():
                i, here, move = moves[ordinal]
                there = subject if move.backwards else obj
                trail = fronts[i][here]
                if there in trail[::2]:
                    continue
                path = (*trail, relation, there)
                reached.setdefault(evidence, path)
                paths.setdefault(there, path)
                following[i].setdefault(there, path)
            fronts = following
        return reached, paths

    async def _seed_entities(self, access: ReadAccess, seeds: Sequence[str]) -> set[str]:
        lowered = [s.lower() for s in seeds]
        cur = await self._conn.execute(
            "SELECT entity_id FROM graph_entities WHERE tenant_id = %s AND (entity_id = ANY (%s) "
            " OR split_part(entity_id, ':', 2) = ANY (%s) OR EXISTS (SELECT 1 FROM "
            " unnest(aliases) a WHERE lower(a) = ANY (%s)))",
            (access.tenant_id, list(seeds), lowered, lowered),
        )
        return {row[0] for row in await cur.fetchall()}

    async def facts(self, chunk_ids: Sequence[str]) -> dict[str, ChunkFacts]:
        if not chunk_ids:
            return {}
        where: LiteralString = " WHERE c.chunk_id = ANY (%(ids)s::text[])"
        return await self._facts(_FACTS + where, {"ids": list(dict.fromkeys(chunk_ids))})

    async def facts_around(
        self, chunk_ids: Sequence[str], *, parent: bool, neighbours: int
    ) -> dict[str, ChunkFacts]:
        if not chunk_ids or (not parent and neighbours < 1):
            return {}
        where: LiteralString = " WHERE c.chunk_id IN (SELECT chunk_id FROM around)"
        params = {"ids": list(dict.fromkeys(chunk_ids)), "parent": parent, "neighbours": neighbours}
        return await self._facts(_AROUND + _FACTS + where, params)

    async def _facts(
        self, statement: LiteralString, params: dict[str, Any]
    ) -> dict[str, ChunkFacts]:
        columns = sql.SQL(", ").join(sql.SQL("c.") + sql.Identifier(n) for n in CHUNK_COLUMNS)
        cur = self._conn.cursor(row_factory=dict_row)
        await cur.execute(sql.SQL(statement).format(columns=columns), params)
        found: dict[str, ChunkFacts] = {}
        for row in await cur.fetchall():
            flags = {k: row.pop(k) for k in _FACT_FLAGS}
            chunk = Chunk.model_validate(row)
            found[chunk.chunk_id] = ChunkFacts(chunk=chunk, **flags)
        return found

    async def edges_about(self, access: ReadAccess, doc_keys: Sequence[str]) -> list[EdgeFact]:
        """Edges valid at as_of that touch these documents or the services they govern,
        each with admissible evidence (conflict flags list only what the subject may see)."""
        if not doc_keys:
            return []
        entities = [f"document:{k.split('/', 1)[1]}" for k in doc_keys if k.count("/") >= 2]
        cur = await self._conn.execute(
            "WITH touched AS (SELECT unnest(%(entities)s::text[]) AS entity UNION "
            " SELECT e.object FROM graph_edges e WHERE e.tenant_id = %(tenant)s AND "
            " e.subject = ANY (%(entities)s)) "
            "SELECT e.subject, e.relation, e.object, c.tenant_id || '/' || c.source_id || '/' "
            " || c.doc_id, e.evidence_chunk_id FROM graph_edges e "
            "JOIN chunks c ON c.chunk_id = e.evidence_chunk_id "
            "WHERE e.tenant_id = %(tenant)s AND (e.subject IN (SELECT entity FROM touched) OR "
            " e.object IN (SELECT entity FROM touched)) "
            " AND " + EDGE_HELD + " AND " + ADMISSIBLE + " ORDER BY e.edge_id",
            admission_params(access, ReadFilters(), entities=entities),
        )
        return [EdgeFact(*row) for row in await cur.fetchall()]

    async def doc_sequences(self, doc_keys: Sequence[str]) -> dict[str, int]:
        if not doc_keys:
            return {}
        cur = await self._conn.execute(
            "SELECT d.tenant_id || '/' || d.source_id || '/' || d.doc_id, d.last_sequence "
            "FROM unnest(%s::text[], %s::text[], %s::text[]) AS k(t, s, d) JOIN documents d "
            "ON d.tenant_id = k.t AND d.source_id = k.s AND d.doc_id = k.d",
            _split(doc_keys),
        )
        return {row[0]: int(row[1]) for row in await cur.fetchall()}

    async def generation(self) -> int | None:
        cur = await self._conn.execute(
            "SELECT max(generation) FROM index_generations WHERE state = 'live'"
        )
        row = await cur.fetchone()
        return None if row is None or row[0] is None else int(row[0])


DENSE_OVERFETCH = 50  # candidates the HNSW scan returns at least, before the exact re-sort


@dataclass(frozen=True)
class Dense:
    """What the dense channel needs: the models that may embed a query (the one whose
    generation is live in a request's snapshot does) and how it searches."""

    embedders: tuple[Embedder, ...]
    min_similarity: float = 0.3
    ef_search: int = 100  # candidates HNSW keeps per step: recall against latency
    max_scan_tuples: int = 20_000  # how far an iterative scan goes for a selective filter


class PostgresReadStore:
    """Implements ReadStore: each snapshot is one repeatable-read, read-only transaction."""

    def __init__(self, pool: AsyncConnectionPool, dense: Dense | None = None) -> None:
        self._pool = pool
        self._dense = dense

    async def still_current(self, doc_sequences: Mapping[str, int]) -> bool:
        if not doc_sequences:
            return True
        keys = list(doc_sequences)
        async with transaction(self._pool) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) "
                "AS k(t, s, d, seq) JOIN documents d ON d.tenant_id = k.t AND d.source_id = k.s "
                "AND d.doc_id = k.d JOIN sources src ON src.tenant_id = d.tenant_id AND "
                "src.source_id = d.source_id "
                "WHERE d.last_sequence = k.seq AND d.state = 'active' AND src.enabled",
                (*_split(keys), [doc_sequences[k] for k in keys]),
            )
            row = await cur.fetchone()
        return row is not None and int(row[0]) == len(keys)

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[PostgresReadSnapshot]:
        async with transaction(self._pool) as conn:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield PostgresReadSnapshot(conn, self._dense)


def _split(doc_keys: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """`tenant/source/doc` keys as three arrays (doc ids may hold slashes)."""
    parts = [key.split("/", 2) for key in doc_keys]
    return [p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts]


_WORD = re.compile(r"[\w.-]+")


def _words(text: str) -> list[str]:
    return [w.strip(".-") for w in _WORD.findall(text.lower()) if w.strip(".-")]
