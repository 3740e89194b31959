"""Planning: from events and document states to plans, pure.

See docs/design/guarantees.md, docs/design/code-map.md.

A create/update is parsed, chunked and stamped into a `VersionPlan`, a delete becomes a
`TombstonePlan`; then, round by round, the facts a transaction read (which events it
claimed, what each document holds) decide the steps its unit of work executes. The
decisions themselves are `indexer.decisions`. Nothing here reads or writes a server.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime

from govindex.core.envelope import Envelope
from govindex.core.events import DocumentChanged, DocumentDeleted
from govindex.core.facts import FactMapping
from govindex.core.hashing import sha256_hex
from govindex.core.ports import (
    DocumentKey,
    DocumentState,
    GraphEdge,
    Outcome,
    TombstonePlan,
    VersionPlan,
)
from govindex.core.records import AclPolicy, Chunk, DeletionMode, SourceManifest
from govindex.core.tokens import HEURISTIC, TokenEstimator
from indexer.decisions import Incoming, decide_change, decide_deletion
from indexer.extractors import Box, Extracted, Page
from indexer.extractors.regions import cut
from indexer.facts import PARSER as FACTS_PARSER
from indexer.facts import VERSION as FACTS_VERSION
from indexer.facts import Facts, parse_facts
from indexer.frontmatter import Frontmatter
from indexer.graph import extract_edges
from indexer.parsers import PARSERS, ParsedDocument, Parser, parse, parser_for
from indexer.stamping import (
    StampContext,
    resolve_access,
    resolve_validity,
    stamp_chunks,
    version_id,
)

SOURCE_LEVEL_REASONS = frozenset({"source_deleted", "source_disabled"})


@dataclass(frozen=True)
class PlannedEvent:
    """One event of a batch, ready for the transaction: parsed, chunked and stamped."""

    position: int
    envelope: Envelope
    payload: DocumentChanged | DocumentDeleted
    plan: VersionPlan | TombstonePlan | None  # None: its content was purged, stale at best
    incoming: Incoming | None = None

    @property
    def key(self) -> DocumentKey:
        p = self.payload
        return DocumentKey(p.tenant_id, p.source_id, p.doc_id)


def plan_change(
    position: int,
    envelope: Envelope,
    payload: DocumentChanged,
    content: str | None,
    manifest: SourceManifest,
    *,
    generation: int,
    now: datetime,
    tokens: TokenEstimator = HEURISTIC,
    extracted: Extracted | None = None,
) -> PlannedEvent:
    """A create/update with its version plan; without one when its content is gone (it was
    deleted and purged at a later sequence: stale at best)."""
    if content is None:
        return PlannedEvent(position, envelope, payload, None)
    plan = plan_version(
        payload,
        content,
        manifest,
        generation=generation,
        now=now,
        tokens=tokens,
        extracted=extracted,
    )
    incoming = Incoming(
        sequence=plan.sequence,
        content_hash=plan.content_hash,
        parser=plan.parser,
        parser_version=plan.parser_version,
        acl=tuple(sorted({p for chunk in plan.chunks for p in chunk.acl})),
        has_chunks=bool(plan.chunks),
        restampable=plan.parser != FACTS_PARSER and "+facts." not in plan.parser_version,
    )
    return PlannedEvent(position, envelope, payload, plan, incoming)


def plan_deletion(
    position: int,
    envelope: Envelope,
    payload: DocumentDeleted,
    manifest: SourceManifest,
    *,
    now: datetime,
) -> PlannedEvent:
    """A delete with its tombstone plan."""
    tombstone = TombstonePlan(
        **payload.identity(),
        event_id=envelope.id,
        reason=payload.reason,
        deletion_mode=_deletion_mode(manifest, payload),
        deleted_at=payload.deleted_at,
        recorded_at=now,
    )
    return PlannedEvent(position, envelope, payload, tombstone)


def plan_version(
    payload: DocumentChanged,
    content: str,
    manifest: SourceManifest,
    *,
    generation: int,
    now: datetime,
    tokens: TokenEstimator = HEURISTIC,
    extracted: Extracted | None = None,
) -> VersionPlan:
    """Parse, chunk and stamp a new version (pure; fails with InvalidEvent, of which
    InvalidFrontmatter, or MissingAcl). `tokens` counts each chunk's `token_estimate`.

    `extracted`: the canonical text an extractor made of the file (a PDF, a Word file, an
    HTML page); it is the version's text, cut by the parser the extractor names, and the
    event's own content stays as the version's raw content."""
    where = payload.path or payload.doc_id
    raw: str | None = None
    if extracted is not None:
        raw, content = content, extracted.text
    mapping = manifest.fact_mapping(where) if extracted is None else None
    parser = PARSERS[extracted.parser] if extracted else parser_for(manifest.parser, where)
    # A mapped file is cut by its entries, not by its format's parser (a CDC row by both).
    if extracted is not None:
        parsed: ParsedDocument | None = cut(extracted)
    else:
        parsed = parse(parser, content) if mapping is None or mapping.table else None
    frontmatter = Frontmatter.of(parsed.frontmatter if parsed else {})  # InvalidFrontmatter
    valid_from, valid_to = resolve_validity(manifest, payload, frontmatter)
    facts = None
    if mapping is not None:
        facts = parse_facts(
            mapping,
            where,
            content,
            metadata=payload.metadata,
            document_from=valid_from,
            document_to=valid_to,
            parsed=parsed,
        )
        parsed = facts.parsed
    assert parsed is not None
    parser_name, parser_version = facts_parser(mapping, parser)
    if extracted is not None:  # a new extractor version is a new version of the chunks
        parser_version = f"{parser_version}+{extracted.extractor}"
    ctx = StampContext(
        manifest=manifest,
        event=payload,
        access=resolve_access(manifest, payload, frontmatter),
        valid_from=valid_from,
        valid_to=valid_to,
        recorded_at=now,
        parser=parser_name,
        parser_version=parser_version,
        index_generation=generation,
        evidence=frontmatter.evidence_types(),
        tokens=tokens,
        event_time=frontmatter.time("event_time"),
        frontmatter=frontmatter,  # a timeline entry's own event time
    )
    chunks = stamp_chunks(ctx, parsed.chunks)
    if extracted is not None and extracted.pages:
        chunks = on_pages(chunks, extracted.pages, where, extracted.boxes)
    if facts is not None:
        chunks = stamp_entries(chunks, facts, manifest)
    return VersionPlan(
        **payload.identity(),
        content_hash=payload.content_hash,
        content=content,
        media_type=payload.media_type,
        title=payload.title or _title(frontmatter, chunks),
        path=payload.path,
        metadata={**payload.metadata, **frontmatter.metadata()},
        valid_from=valid_from,
        valid_to=valid_to,
        observed_at=payload.observed_at,
        recorded_at=now,
        parser=parser_name,
        parser_version=parser_version,
        chunks=chunks,
        version_id=version_id(payload.key, payload.sequence),
        edges=[
            *(
                GraphEdge(
                    e.subject,
                    e.relation,
                    e.object,
                    e.subject_alias,
                    e.object_alias,
                    event_time=ctx.event_time,  # the document's, whatever its entries say
                )
                for e in extract_edges(payload.source_id, payload.doc_id, frontmatter)
            ),
            *(facts.edges if facts else ()),
        ],
        entities=facts.entities if facts else (),
        raw_content=raw,
    )


class PageLocator:
    """Where a span of a paged file's canonical text was printed: the page its text begins
    on, and where the file says where text was printed (a PDF), the rectangle, in points
    from the page's top-left corner, around the span's text on that page."""

    def __init__(self, pages: Sequence[Page], boxes: Sequence[Box] = ()) -> None:
        self.pages = pages
        self.starts = [p.start for p in pages]
        self.boxes = boxes
        self.ends = [b.end for b in boxes]  # boxes are in text order and do not overlap

    def page(self, start: int) -> int:
        at = bisect.bisect_right(self.starts, start) - 1
        return self.pages[max(0, at)].number

    def labels(self, start: int, end: int) -> list[str]:
        """`page:N`, and `bbox:LEFT,TOP,RIGHT,BOTTOM` where the boxes say."""
        number = self.page(start)
        left = top = float("inf")
        right = bottom = float("-inf")
        k = bisect.bisect_right(self.ends, start)
        while k < len(self.boxes) and self.boxes[k].start < end:
            box = self.boxes[k]
            if box.page == number:
                left, top = min(left, box.left), min(top, box.top)
                right, bottom = max(right, box.right), max(bottom, box.bottom)
            k += 1
        found = [f"page:{number}"]
        if left != float("inf"):
            found.append(f"bbox:{left:g},{top:g},{right:g},{bottom:g}")
        return found


def on_pages(
    chunks: Sequence[Chunk], pages: Sequence[Page], where: str, boxes: Sequence[Box] = ()
) -> list[Chunk]:
    """Each chunk of a paged file located by the page its text begins on: the locator
    `file.pdf#page=N` a viewer opens and the `PageLocator` labels."""
    locator = PageLocator(pages, boxes)
    return [
        chunk.model_copy(
            update={
                "locator": f"{where}#page={locator.page(chunk.char_start)}",
                "labels": (*chunk.labels, *locator.labels(chunk.char_start, chunk.char_end)),
            }
        )
        for chunk in chunks
    ]


def facts_parser(mapping: FactMapping | None, parser: Parser) -> tuple[str, str]:
    """The parser a version records: a mapped file's is `facts`, and a mapped version's
    carries the mapping's digest, so a changed mapping makes the next event a new version
    (never a metadata-only re-stamp of facts the old mapping made)."""
    if mapping is None:
        return parser.name, parser.version
    digest = sha256_hex(mapping.model_dump_json())[:12]
    if mapping.table is not None:
        return parser.name, f"{parser.version}+facts.{digest}"
    return FACTS_PARSER, f"{FACTS_VERSION}+{digest}"


def stamp_entries(chunks: Sequence[Chunk], facts: Facts, manifest: SourceManifest) -> list[Chunk]:
    """Each entry's own time and ACL on its chunks (a source whose acl_policy is
    manifest_only keeps its default ACL on every entry)."""
    own_acl = manifest.acl_policy is not AclPolicy.MANIFEST_ONLY
    out = []
    for chunk in chunks:
        stamp = facts.stamps.get(chunk.ordinal)
        if stamp is None:
            out.append(chunk)
            continue
        update: dict[str, object] = {"valid_from": stamp.valid_from or chunk.valid_from}
        if stamp.event_time is not None:
            update["event_time"] = stamp.event_time
        if stamp.acl and own_acl:
            update["acl"] = stamp.acl
        out.append(chunk.model_copy(update=update))
    return out


# --- the steps of a unit of work --------------------------------------------------------


@dataclass(frozen=True)
class Settle:
    """Nothing to write: a duplicate, or a stale event."""

    event: PlannedEvent
    outcome: Outcome


@dataclass(frozen=True)
class RecordTombstone:
    event: PlannedEvent
    plan: TombstonePlan


@dataclass(frozen=True)
class ApplyChange:
    """A new version (`keep_version` None) or a metadata-only re-stamp of `keep_version`;
    `lost_principals` lose every version first (a revocation)."""

    event: PlannedEvent
    plan: VersionPlan
    keep_version: str | None
    lost_principals: tuple[str, ...]


Step = Settle | RecordTombstone | ApplyChange


def rounds(events: Sequence[PlannedEvent]) -> list[list[PlannedEvent]]:
    """The batch in rounds: round r holds each document's r-th event in delivery order
    (documents in order of first appearance; round 0 holds every document once).

    Exactly what one event at a time would decide: an older version delivered after a
    newer one is stale, never history. A document is at most once per round, so a round's
    writes are set-based.
    """
    by_key: dict[DocumentKey, list[PlannedEvent]] = {}
    for event in events:
        by_key.setdefault(event.key, []).append(event)
    depth = max((len(q) for q in by_key.values()), default=0)
    return [[q[r] for q in by_key.values() if len(q) > r] for r in range(depth)]


def first_claims(by_round: Sequence[Sequence[PlannedEvent]], fresh: Set[str]) -> frozenset[int]:
    """The positions of the events that hold their claim: the first copy, in round order,
    of an id the consumer had not processed (a second copy in the batch is a duplicate)."""
    unclaimed = set(fresh)
    claimed: set[int] = set()
    for batch in by_round:
        for event in batch:
            if event.envelope.id in unclaimed:
                unclaimed.discard(event.envelope.id)
                claimed.add(event.position)
    return frozenset(claimed)


def plan_round(
    batch: Sequence[PlannedEvent],
    claimed: Set[int],
    states: Mapping[DocumentKey, DocumentState],
) -> list[Step]:
    """The steps of one round, in delivery order, from the states its documents hold."""
    steps: list[Step] = []
    for event in batch:
        holds = event.position in claimed
        steps.append(_step(event, holds, states.get(event.key) if holds else None))
    return steps


def _step(event: PlannedEvent, claimed: bool, state: DocumentState | None) -> Step:
    plan = event.plan
    if isinstance(plan, TombstonePlan):
        outcome = decide_deletion(claimed, state, plan.sequence)
        if outcome != "tombstoned":
            return Settle(event, outcome)
        return RecordTombstone(event, plan)
    if plan is None or event.incoming is None:  # claimed, so its emission settles
        return Settle(event, "stale" if claimed else "duplicate")
    decision = decide_change(claimed, state, event.incoming)
    if decision.outcome in ("duplicate", "stale"):
        return Settle(event, decision.outcome)
    return ApplyChange(event, plan, decision.keep_version, decision.lost_principals)


def purged_next(event: PlannedEvent) -> bool:
    """A purge-mode tombstone: the deletion lane purges its chunks right after."""
    plan = event.plan
    return (
        isinstance(plan, TombstonePlan)
        and plan.deletion_mode == DeletionMode.TOMBSTONE_AND_PURGE.value
    )


def _title(frontmatter: Frontmatter, chunks: Sequence[Chunk]) -> str | None:
    if frontmatter.title is not None:
        return frontmatter.title
    for chunk in chunks:
        if chunk.heading_path:
            return chunk.heading_path[0]
    return None


def _deletion_mode(manifest: SourceManifest, payload: DocumentDeleted) -> str:
    """A source that is deleted or disabled loses its content whatever its deletion_mode."""
    if payload.reason in SOURCE_LEVEL_REASONS:
        return DeletionMode.TOMBSTONE_AND_PURGE.value
    return manifest.deletion_mode.value
