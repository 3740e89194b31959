"""Re-chunk stored content when a parser changes, and re-extract a file's raw content when
its extractor changes (no re-fetch from the source)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from govindex.core import formats
from govindex.core.errors import PermanentError
from govindex.core.events import DocumentChanged
from govindex.core.ports import ChunkStore, SearchIndex, SourceRegistry, StoredVersion, VersionStore
from govindex.core.records import Access, Chunk, SourceManifest
from govindex.core.tokens import HEURISTIC, TokenEstimator
from indexer.extractors import Extracted, extractor_for
from indexer.extractors.regions import cut
from indexer.frontmatter import Frontmatter
from indexer.parsers import PARSERS, Parser, parse, parser_for
from indexer.planning import on_pages
from indexer.preparing import extracted_text
from indexer.stamping import StampContext, resolve_access, stamp_chunks

log = structlog.get_logger(__name__)


@dataclass
class ReparseReport:
    reparsed: list[str] = field(default_factory=list)
    unchanged: int = 0
    changed_meanwhile: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


async def reparse(
    *,
    versions: VersionStore,
    chunks: ChunkStore,
    registry: SourceRegistry,
    index: SearchIndex,
    source_id: str | None = None,
    parser_name: str | None = None,
    generation: int,
    progress: Callable[[int, int, str], None] | None = None,
    tokens: TokenEstimator = HEURISTIC,
) -> ReparseReport:
    """Re-chunk current versions whose parser (or its version) is not today's.

    Access, validity and sequences are kept as they are: only the cut changes, and evidence
    is stamped as a new version's would be (frontmatter, today's manifest rules, kinds), as
    are the event times of timeline entries.
    Postgres is swapped first under the document's row lock, then OpenSearch gets the new
    chunks and loses the replaced ones. `tokens` counts the new chunks' `token_estimate`.
    """
    report = ReparseReport()
    rows = await versions.current_versions(source_id, parser_name)
    for done, row in enumerate(rows, start=1):
        key = f"{row.tenant_id}/{row.source_id}/{row.doc_id}"
        if progress:
            progress(done, len(rows), key)
        manifest = await registry.get(row.tenant_id, row.source_id)
        if manifest is None:
            report.failed.append((key, "source no longer registered"))
            continue
        where = row.path or row.doc_id
        extractor = extractor_for(where)
        made = extractor and f"{extractor.name}-{extractor.version}"
        if extractor is not None:  # re-extracted from the raw content when its extractor moved
            if row.raw_content is None or row.parser_version.endswith(f"+{made}"):
                report.unchanged += 1
                continue
            try:
                extracted = await asyncio.to_thread(_reextract, row, where)
            except PermanentError as exc:
                report.failed.append((key, str(exc)))
                continue
            parser = PARSERS[extracted.parser]
        else:
            extracted = None
            parser = parser_for(manifest.parser, where)
        if extracted is None and (row.parser, row.parser_version) == (
            parser.name,
            parser.version,
        ):
            report.unchanged += 1
            continue
        if manifest.fact_mapping(where) is not None:
            # Facts are cut by their entries and state edges per entry: a re-chunk would
            # lose both. They change with the document's next version (or a replay).
            report.unchanged += 1
            continue
        try:
            new = await _restamp(chunks, row, manifest, parser, generation, tokens, extracted)
        except PermanentError as exc:
            report.failed.append((key, str(exc)))
            continue
        replaced = await versions.replace_version_chunks(
            row.version_id,
            (row.parser, row.parser_version),
            new,
            content=extracted.text if extracted else None,
        )
        if replaced is None:
            report.changed_meanwhile.append(key)
            continue
        await index.upsert(new)
        await index.delete_chunks(sorted(set(replaced) - {c.chunk_id for c in new}))
        report.reparsed.append(key)
        log.info(
            "document.reparsed",
            doc_key=key,
            parser=f"{parser.name}@{parser.version}",
            chunks=len(new),
            replaced=len(replaced),
        )
    return report


async def _restamp(
    chunks: ChunkStore,
    row: StoredVersion,
    manifest: SourceManifest,
    parser: Parser,
    generation: int,
    tokens: TokenEstimator,
    extracted: Extracted | None = None,
) -> list[Chunk]:
    text = extracted.text if extracted else row.content
    event = DocumentChanged(
        tenant_id=row.tenant_id,
        source_id=row.source_id,
        doc_id=row.doc_id,
        source_version=row.source_version,
        sequence=row.sequence,
        observed_at=row.observed_at,
        content_hash=row.content_hash,
        content=text,
        media_type=row.media_type,
        path=row.path,
    )
    parsed = cut(extracted) if extracted else parse(parser, text)
    frontmatter = Frontmatter.of(parsed.frontmatter)  # refused: reported failed, chunks kept
    existing = await chunks.chunks_of_version(row.version_id)
    if existing:  # keep the access the document was indexed with (it may have come from CDC)
        first = existing[0]
        access = Access(
            acl=first.acl,
            required_scopes=first.required_scopes,
            allowed_purposes=first.allowed_purposes,
            classification=first.classification,
        )
    else:
        access = resolve_access(manifest, event, frontmatter)
    ctx = StampContext(
        manifest=manifest,
        event=event,
        access=access,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
        recorded_at=row.recorded_at,
        parser=parser.name,
        parser_version=f"{parser.version}+{extracted.extractor}" if extracted else parser.version,
        index_generation=generation,
        version_sequence=row.version_sequence,
        evidence=frontmatter.evidence_types(),  # with today's rules: as a new version would
        tokens=tokens,
        event_time=frontmatter.time("event_time"),
        frontmatter=frontmatter,  # a timeline entry's own event time
    )
    now = datetime.now(UTC)
    stamped = stamp_chunks(ctx, parsed.chunks)
    if extracted is not None and extracted.pages:
        stamped = on_pages(stamped, extracted.pages, row.path or row.doc_id, extracted.boxes)
    return [c.model_copy(update={"indexed_at": now}) for c in stamped]


def _reextract(row: StoredVersion, where: str) -> Extracted:
    """The canonical text a version's raw content gives today's extractor."""
    assert row.raw_content is not None
    payload = DocumentChanged(
        tenant_id=row.tenant_id,
        source_id=row.source_id,
        doc_id=row.doc_id,
        source_version=row.source_version,
        sequence=row.sequence,
        observed_at=row.observed_at,
        content_hash=row.content_hash,
        content=row.raw_content,
        media_type=row.media_type,
        content_encoding=formats.BASE64 if formats.is_binary(where) else "utf-8",
        path=row.path,
    )
    found = extracted_text(payload, row.raw_content)
    assert found is not None
    return found
