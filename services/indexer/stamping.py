"""Stamping: turn parser drafts into governed chunk records (pure, no I/O)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from itertools import cycle
from operator import getitem

from govindex.core.errors import InvalidEvent, MissingAcl
from govindex.core.events import DocumentChanged
from govindex.core.hashing import sha256_hex
from govindex.core.records import (
    Access,
    AclPolicy,
    Chunk,
    ChunkDraft,
    ChunkKind,
    SourceManifest,
    TrustLevel,
)
from govindex.core.tokens import HEURISTIC, TokenEstimator
from indexer.frontmatter import Frontmatter, FrontmatterLike
from indexer.timeline import NO_TIMELINE, resolve_timeline


def resolve_access(
    manifest: SourceManifest, event: DocumentChanged, frontmatter: FrontmatterLike
) -> Access:
    """Decide who may see the document; fail closed (MissingAcl) when nobody said.

    Raises InvalidFrontmatter for a field of the wrong type or size (checked even when the
    event's own ACL wins: a document is either valid or refused)."""
    fm = Frontmatter.of(frontmatter)
    document_acl: list[str] | None = event.acl
    if document_acl is None and fm.acl is not None:
        document_acl = list(fm.acl)
        if not document_acl:
            raise MissingAcl(
                "the document's frontmatter 'acl' is empty, which would make it visible to no "
                "one; list principals or remove the field to use the source default"
            )
    if manifest.acl_policy is AclPolicy.MANIFEST_ONLY:
        acl = manifest.default_acl
    elif manifest.acl_policy is AclPolicy.DOCUMENT_ONLY:
        acl = document_acl
    else:
        acl = document_acl or manifest.default_acl
    if not acl:
        raise MissingAcl(
            f"document {event.doc_id!r} has no ACL and source {manifest.source_id!r} has no "
            "default_acl; add 'acl:' to the document's frontmatter or 'default_acl' to the "
            "source manifest. It was not indexed (never indexed as public)."
        )
    return Access(
        acl=tuple(sorted(set(acl))),
        required_scopes=tuple(manifest.required_scopes),
        allowed_purposes=tuple(manifest.allowed_purposes),
        classification=fm.classification or manifest.classification,
    )


def resolve_validity(
    manifest: SourceManifest, event: DocumentChanged, frontmatter: FrontmatterLike
) -> tuple[datetime, datetime | None]:
    """Valid time from the event, else frontmatter, else [the earlier of event_time and
    observed_at, open end): a record of what already happened holds from when it happened,
    one of what is still to come from when it was written.

    See docs/design/records.md.
    """
    fm = Frontmatter.of(frontmatter)
    from_field = manifest.valid_time_field or "valid_from"
    valid_from = event.valid_from or fm.time(from_field)
    valid_to = event.valid_to or fm.time("valid_to")
    happened = fm.time("event_time")
    start = valid_from or min(event.observed_at, happened or event.observed_at)
    if valid_to is not None and valid_to <= start:
        raise InvalidEvent(
            f"valid_to ({valid_to.isoformat()}) is not after valid_from ({start.isoformat()}); "
            "fix the document's validity dates"
        )
    return start, valid_to


# Kinds that are evidence by what they are: an incident's finding supports `finding`
# whatever its document or source says.
KIND_EVIDENCE: Mapping[ChunkKind, str] = {
    kind: kind.value
    for kind in (
        ChunkKind.TIMELINE_ENTRY,
        ChunkKind.FINDING,
        ChunkKind.ROOT_CAUSE,
        ChunkKind.ACTION_ITEM,
        ChunkKind.STEP,
        ChunkKind.CLAUSE,
    )
}


def resolve_evidence(
    manifest: SourceManifest, doc_id: str, document: Iterable[str], kinds: Iterable[ChunkKind]
) -> dict[ChunkKind, tuple[str, ...]]:
    """Each kind's evidence types in a document, sorted and distinct: the document's own
    (frontmatter `evidence`, `supports_claims`), those of the source's evidence_rules whose
    path selects the document and whose kinds hold the kind, and the kind's own.

    A pack request's required_evidence selects chunks by this, so it is computed once per
    document and kind, the same way for a new version, a metadata-only change and a
    reparse."""
    rules = [rule for rule in manifest.evidence_rules if rule.matches(doc_id)]
    own = frozenset(document)
    by_kind: dict[ChunkKind, tuple[str, ...]] = {}
    for kind in dict.fromkeys(kinds):
        types = set(own)
        for rule in rules:
            if rule.kinds is None or kind in rule.kinds:
                types.update(rule.evidence)
        if kind in KIND_EVIDENCE:
            types.add(KIND_EVIDENCE[kind])
        by_kind[kind] = tuple(sorted(types))
    return by_kind


# Text that gives orders to a model or an operator. Stored anyway; the flag lets the read
# path keep it out of model input when the source is not authoritative.
_INSTRUCTION_PATTERNS = re.compile(
    r"ignore (?:all |any )?(?:previous|prior|above) instructions"
    r"|disregard (?:the |all )?(?:previous|prior|above)"
    r"|you are now\b|system prompt|act as (?:an? )?(?:admin|root|assistant)"
    r"|run (?:the )?rollback now|execute (?:this|the following) (?:command|script)",
    re.IGNORECASE,
)


def contains_instructions(text: str, trust_level: TrustLevel) -> bool:
    if trust_level is TrustLevel.AUTHORITATIVE:
        return False
    return _INSTRUCTION_PATTERNS.search(text) is not None


def token_estimate(text: str, tokens: TokenEstimator = HEURISTIC) -> int:
    """The chunk's tokens as `tokens` counts them: the read API packs with the same
    estimator (GOVINDEX_TOKENIZER), so a stamped estimate is what a budget will see."""
    return tokens.count(text)


_WORD = re.compile(r"\w+", re.UNICODE)


def simhash64(text: str) -> int:
    """64-bit SimHash over word trigrams, as a signed int64 (fits a Postgres bigint): bit b
    is set when more than half of the shingles' BLAKE2b-64 hashes have bit b set.

    Counted in C, not per bit in Python: each hash byte is looked up in a table that
    spreads its 8 bits into 8 lanes of a 512-bit integer (one 8-bit lane per bit of the
    hash), and one `sum` over the hashes' bytes adds them all, starting from a bias that
    makes a lane's top bit the verdict (count > n/2); the 64 top bits are then read as one
    binary numeral. Lanes of 8 bits hold up to 255 shingles; longer texts are counted
    with one masked popcount per bit of the hashes laid end to end.

    Texts of up to `_CACHED_CHARS` are cached, 4,096 of them (about 1 MB for chunks of a
    few hundred characters, 32 MB at worst): an updated document's new version repeats
    most of its chunks, and boilerplate repeats across documents.
    """
    return _simhash_cached(text) if len(text) <= _CACHED_CHARS else _simhash(text)


_CACHED_CHARS = 2048


@lru_cache(maxsize=4096)
def _simhash_cached(text: str) -> int:
    return _simhash(text)


def _simhash(text: str) -> int:
    digests = _shingle_hashes(text)
    n = len(digests)
    if n <= _LANE_MAX:
        total = sum(map(getitem, cycle(_SPREAD), b"".join(digests)), (127 - n // 2) * _LANES)
        value = int(((total >> 7) & _LANES).to_bytes(64, "big").translate(_NUMERAL), 2)
    else:
        laid = int.from_bytes(b"".join(digests), "big")
        lowest = _lowest_bits(n)  # bit 0 of each of the n hashes
        value = 0
        for bit in range(64):
            if 2 * (laid & (lowest << bit)).bit_count() > n:
                value |= 1 << bit
    return value - (1 << 64) if value >= 1 << 63 else value


def _spread_tables() -> tuple[tuple[int, ...], ...]:
    """Per byte position j of a big-endian 64-bit hash, each byte value's bits spread to
    the lanes of the hash bits they are: bit k of byte j is hash bit 8 * (7 - j) + k, in
    lane bits [8 * that, 8 * that + 8)."""
    return tuple(
        tuple(
            sum(1 << 8 * (8 * (7 - j) + k) for k in range(8) if value >> k & 1)
            for value in range(256)
        )
        for j in range(8)
    )


_SPREAD = _spread_tables()
_LANES = int.from_bytes(b"\1" * 64, "big")  # 1 in each of the 64 lanes
_LANE_MAX = 255  # a lane counts to 255, and the bias (127 - n // 2) stays >= 0
_NUMERAL = bytes.maketrans(b"\0\1", b"01")


@lru_cache(maxsize=1024)
def _lowest_bits(n: int) -> int:
    return int.from_bytes(b"\0\0\0\0\0\0\0\1" * n, "big")


def _shingle_hashes(text: str) -> list[bytes]:
    """The 8-byte BLAKE2b digest of each word trigram (the words joined by one space; a
    text of fewer than three words is one shingle)."""
    words = [w.encode() for w in _WORD.findall(text.lower())]
    if len(words) < 3:
        shingles = [b" ".join(words)]
    else:
        shingles = [b" ".join(t) for t in zip(words, words[1:], words[2:], strict=False)]
    blake = hashlib.blake2b
    return [blake(s, digest_size=8).digest() for s in shingles]


def _utc(when: datetime | None) -> datetime | None:
    return None if when is None else when.astimezone(UTC)


def chunk_id(
    doc_key: str,
    version_sequence: int,
    parser: str,
    parser_version: str,
    draft: ChunkDraft,
    content_hash: str | None = None,
) -> str:
    """Stable id: the same bytes of the same version, cut by the same parser, get the same id.
    `content_hash`: the draft's `sha256_hex`, when the caller has it already."""
    material = "\x00".join(
        [
            doc_key,
            str(version_sequence),
            parser,
            parser_version,
            str(draft.ordinal),
            content_hash or sha256_hex(draft.text),
        ]
    )
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def version_id(doc_key: str, version_sequence: int) -> str:
    return hashlib.sha256(f"{doc_key}\x00{version_sequence}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class StampContext:
    manifest: SourceManifest
    event: DocumentChanged
    access: Access
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    parser: str
    parser_version: str
    index_generation: int
    version_sequence: int | None = None  # when re-stamping a stored version (reparse)
    event_time: datetime | None = None  # frontmatter `event_time`: when it happened
    # The document's own evidence types (`Frontmatter.evidence_types`); the manifest's
    # rules and the chunks' kinds add theirs when stamping.
    evidence: tuple[str, ...] = ()
    tokens: TokenEstimator = HEURISTIC  # counts `token_estimate` (Runtime.tokens)
    # The document's frontmatter, for what differs by chunk: a timeline entry's own event
    # time (`indexer.timeline`). None: every chunk gets `event_time`.
    frontmatter: Frontmatter | None = None


# Long: every stamped field of a chunk in one constructor call (docs/design/records.md).
def stamp_chunks(ctx: StampContext, drafts: Sequence[ChunkDraft]) -> list[Chunk]:
    """Bind each draft to its source, version, span, time, access, structure and the
    evidence types it can support."""
    event = ctx.event
    key = event.key
    created = ctx.version_sequence or event.sequence
    hashes = [sha256_hex(draft.text) for draft in drafts]
    ids = [
        chunk_id(key, created, ctx.parser, ctx.parser_version, draft, hashes[i])
        for i, draft in enumerate(drafts)
    ]
    version = version_id(key, created)
    by_ordinal = {draft.ordinal: ids[i] for i, draft in enumerate(drafts)}
    where = event.path or event.doc_id
    trust = ctx.manifest.trust_level
    evidence = resolve_evidence(
        ctx.manifest, event.doc_id, ctx.evidence, (draft.kind for draft in drafts)
    )
    timeline = NO_TIMELINE if ctx.frontmatter is None else resolve_timeline(ctx.frontmatter, drafts)
    # In UTC, as Postgres gives them back: the projection may send a first version's
    # chunks as stamped, and they must read as the stored rows do.
    valid_from, valid_to = _utc(ctx.valid_from), _utc(ctx.valid_to)
    recorded_at, observed_at = ctx.recorded_at.astimezone(UTC), event.observed_at.astimezone(UTC)
    chunks: list[Chunk] = []
    for i, draft in enumerate(drafts):
        if draft.anchor:
            locator = f"{where}#{draft.anchor}"
        else:
            locator = f"{where}#L{draft.span.line_start}-L{draft.span.line_end}"
        parent = draft.parent_ordinal
        chunks.append(
            Chunk(
                chunk_id=ids[i],
                version_id=version,
                tenant_id=event.tenant_id,
                source_id=event.source_id,
                doc_id=event.doc_id,
                source_version=event.source_version,
                sequence=event.sequence,
                version_sequence=created,
                content_hash=hashes[i],
                text=draft.text,
                valid_from=valid_from,
                valid_to=valid_to,
                event_time=_utc(timeline.event_time(draft.ordinal, ctx.event_time)),
                recorded_at=recorded_at,
                superseded_at=None,
                observed_at=observed_at,
                indexed_at=recorded_at,
                acl=ctx.access.acl,
                required_scopes=ctx.access.required_scopes,
                allowed_purposes=ctx.access.allowed_purposes,
                classification=ctx.access.classification,
                parser=ctx.parser,
                parser_version=ctx.parser_version,
                locator=locator,
                char_start=draft.span.char_start,
                char_end=draft.span.char_end,
                line_start=draft.span.line_start,
                line_end=draft.span.line_end,
                heading_path=draft.heading_path,
                labels=timeline.labels(draft.ordinal, draft.labels),
                evidence=evidence[draft.kind],
                context=draft.context,
                parent_id=by_ordinal.get(parent) if parent is not None else None,
                prev_id=ids[i - 1] if i > 0 else None,
                next_id=ids[i + 1] if i + 1 < len(ids) else None,
                ordinal=draft.ordinal,
                kind=draft.kind.value,
                trust_level=trust.value,
                contains_instructions=contains_instructions(draft.text, trust),
                token_estimate=token_estimate(draft.text, ctx.tokens),
                simhash=simhash64(draft.text),
                index_generation=ctx.index_generation,
            )
        )
    return chunks
