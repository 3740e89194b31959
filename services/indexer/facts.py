"""Facts from structured documents (pure): a mapped file or CDC row as one fact chunk per
entry, with the entities each entry declares and the edges it states.

An entry is a CSV row, a YAML document or list item, a JSON array item, or a CDC row (its
mapped columns travel as the event's metadata). Each becomes a chunk at its exact span,
and every edge it states names that chunk as evidence: an edge is as visible as its row.

Time, per entry: the chunk holds from the earliest of the document's valid_from and the
entry's own valid_from and event_time (a deployment that finished before its commit is
visible in between) until the document's next version. An edge holds over its entry's
validity fields when the mapping names them (`own_time`: the window is the row's, and a
later version's rows replace it) and otherwise like its document; its event time is the
entry's. Ids are business ids as written (`service:payment-api`), never slugs of names:
names go to aliases, and two spellings are never merged.

A value that cannot be what its field says (a time that is not one) refuses the document
with the mapping, entry and field named: nothing half-mapped is stored.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import PurePosixPath
from typing import Any

from govindex.core import yamlsafe
from govindex.core.errors import InvalidEvent
from govindex.core.facts import EntityRef, FactMapping
from govindex.core.inputs import has_control, quote
from govindex.core.ports import EntityDecl, GraphEdge
from govindex.core.records import ChunkKind
from govindex_client._types import INVERSES, RELATIONS
from indexer.parsers.base import LineIndex, ParsedDocument, Segment, SizePolicy, finalize

PARSER = "facts"
VERSION = "1.0.0"
MAX_ENTRIES = 50_000  # entries of one document; a larger table is refused, not cut
MAX_VALUES = 64  # ids one field of one entry may list (dependsOn: [...])
ID_CHARS = 256
_REF = re.compile(r"^(?:[^:/]+:)?(?:[^/]+/)?(?P<name>[^/]+)$")
_SUFFIX = {".csv": "csv", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}


@dataclass(frozen=True)
class Entry:
    """One entry: where it is written ([start, end) of the text) and its fields."""

    start: int
    end: int
    fields: Mapping[str, Any]
    number: int  # 1-based, in document order: what a refusal names


@dataclass(frozen=True)
class EntryStamp:
    """What one entry's chunk holds apart from its document."""

    valid_from: datetime | None = None  # the earliest time the entry speaks of
    event_time: datetime | None = None
    acl: tuple[str, ...] = ()  # empty: the document's


@dataclass
class Facts:
    """A mapped document: its chunks' drafts, each entry's stamp (by draft ordinal), and
    the entities and edges its entries state (edge evidence: an index into the drafts)."""

    parsed: ParsedDocument
    stamps: dict[int, EntryStamp] = field(default_factory=dict)
    entities: list[EntityDecl] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)


def parse_facts(
    mapping: FactMapping,
    path: str,
    text: str,
    *,
    metadata: Mapping[str, Any] | None = None,
    document_from: datetime,
    document_to: datetime | None,
    parsed: ParsedDocument | None = None,
    policy: SizePolicy | None = None,
) -> Facts:
    """The facts of a mapped document. A CDC row is one entry whose fields are the event's
    `metadata`, over the chunks `parsed` already cut from its text (the first is the
    evidence); a file is cut into one chunk per entry here."""
    if mapping.table is not None:
        if parsed is None:
            raise ValueError("a CDC row's facts need its parsed chunks")
        entries = [Entry(0, len(text), dict(metadata or {}), 1)]
        first = {0: 0} if parsed.chunks else {}
    else:
        entries = _entries(mapping, path, text)
        segments = [
            Segment(
                e.start,
                e.end,
                ChunkKind.FACT,
                labels=(f"fact:{mapping.name}", f"entry:{e.number}"),
                atomic=True,
            )
            for e in entries
        ]
        parsed = finalize(text, segments, policy=policy or SizePolicy())
        at = {d.span.char_start: d.ordinal for d in parsed.chunks}
        first = {i: at[e.start] for i, e in enumerate(entries) if e.start in at}
    parts = _parts(parsed, entries) if mapping.table is None else {}
    facts = Facts(parsed)
    declared: dict[str, set[str]] = {}
    for i, entry in enumerate(entries):
        ordinal = first.get(i)
        if ordinal is None:  # nothing but whitespace: no chunk, so nothing it can state
            continue
        stamp, edges = _entry_facts(mapping, entry, ordinal, document_from, document_to)
        facts.stamps[ordinal] = stamp
        for part in parts.get(i, ()):  # an entry too long for one chunk: every part
            facts.stamps[part] = stamp
        facts.edges += edges
        for rule in mapping.entities:
            for entity_id, _ in _ids(rule, entry):
                names = declared.setdefault(entity_id, set())
                for alias_field in rule.aliases:
                    names.update(_names(_field(entry.fields, alias_field)))
    facts.entities = [EntityDecl(e, tuple(sorted(a))) for e, a in sorted(declared.items())]
    facts.edges = list(dict.fromkeys(facts.edges))
    return facts


def _parts(parsed: ParsedDocument, entries: list[Entry]) -> dict[int, list[int]]:
    """The ordinals of the chunks each entry was cut into (by span, in one pass)."""
    parts: dict[int, list[int]] = {}
    i = 0
    for draft in parsed.chunks:
        while i < len(entries) and entries[i].end <= draft.span.char_start:
            i += 1
        if i < len(entries) and entries[i].start <= draft.span.char_start:
            parts.setdefault(i, []).append(draft.ordinal)
    return parts


def _entry_facts(
    mapping: FactMapping,
    entry: Entry,
    ordinal: int,
    document_from: datetime,
    document_to: datetime | None,
) -> tuple[EntryStamp, list[GraphEdge]]:
    happened = _time(mapping, entry, mapping.event_time)
    holds_from = _time(mapping, entry, mapping.valid_from)
    holds_to = _time(mapping, entry, mapping.valid_to)
    starts = [t for t in (document_from, holds_from, happened) if t is not None]
    stamp = EntryStamp(min(starts), happened, _acl(mapping, entry))
    edges: list[GraphEdge] = []
    for rule in mapping.relations:
        event_time = _time(mapping, entry, rule.event_time) if rule.event_time else happened
        own_from = _time(mapping, entry, rule.valid_from) if rule.valid_from else holds_from
        own_to = _time(mapping, entry, rule.valid_to) if rule.valid_to else holds_to
        own = bool(rule.valid_from or rule.valid_to or mapping.valid_from or mapping.valid_to)
        start = own_from or min(document_from, event_time or document_from)
        end = own_to if own else document_to
        if end is not None and end <= start:
            raise _refused(
                mapping,
                entry,
                rule.valid_to or mapping.valid_to or "valid_to",
                f"ends ({end.isoformat()}) before it starts ({start.isoformat()})",
            )
        relation, backwards = _stored(rule.relation)
        for subject, subject_alias in _ids(rule.subject, entry):
            for obj, object_alias in _ids(rule.object, entry):
                if backwards:
                    subject, obj = obj, subject
                    subject_alias, object_alias = object_alias, subject_alias
                edges.append(
                    GraphEdge(
                        subject,
                        relation,
                        obj,
                        subject_alias,
                        object_alias,
                        own_time=own,
                        valid_from=start,
                        valid_to=end,
                        event_time=event_time,
                        evidence=ordinal,
                        confidence=rule.confidence,
                        method=f"facts:{mapping.name}",
                    )
                )
    return stamp, edges


def _stored(name: str) -> tuple[str, bool]:
    """The stored relation a rule names (an inverse is stored the other way round); a
    relation the source declared is stored as written."""
    if name in INVERSES and name not in RELATIONS:
        return INVERSES[name], True
    return name, False


# --- entries ------------------------------------------------------------------------------


def _entries(mapping: FactMapping, path: str, text: str) -> list[Entry]:
    fmt: str = mapping.format
    if fmt == "auto":
        fmt = _SUFFIX.get(PurePosixPath(path).suffix.lower(), "")
        if not fmt:
            raise InvalidEvent(
                f"fact mapping {mapping.name!r} selects {quote(path)}, whose format it cannot "
                "tell from the name; set the mapping's `format` to csv, yaml or json"
            )
    items = tuple(mapping.items.split(".")) if mapping.items else ()
    if fmt == "csv":
        found = list(_csv_entries(text))
    elif fmt == "json":
        found = _json_entries(mapping, text, items)
    else:
        try:
            loaded = yamlsafe.load_entries(text, items)
        except yamlsafe.YamlRefused as exc:
            raise InvalidEvent(
                f"fact mapping {mapping.name!r}: not YAML it can read: {exc}"
            ) from None
        found = [Entry(s, e, v, n) for n, (v, s, e) in enumerate(loaded, 1)]
    if len(found) > MAX_ENTRIES:
        raise InvalidEvent(
            f"fact mapping {mapping.name!r}: {len(found)} entries in one document, at most "
            f"{MAX_ENTRIES}; split the file"
        )
    out = []
    for entry in found:
        if not isinstance(entry.fields, Mapping):
            raise _refused(mapping, entry, "", "is not a mapping of fields")
        end = entry.start + len(text[entry.start : entry.end].rstrip())
        out.append(Entry(entry.start, end, entry.fields, entry.number))
    return out


def _csv_entries(text: str) -> Iterator[Entry]:
    """A header row, then one entry per record at its exact lines (quoted newlines kept)."""
    lines = LineIndex(text)
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    previous = 0
    number = 0
    for row in reader:
        first, last = previous + 1, reader.line_num
        previous = last
        if not row:
            continue
        if header is None:
            header = [cell.strip() for cell in row]
            continue
        number += 1
        if number > MAX_ENTRIES:  # counted, not kept: the caller refuses the document
            yield Entry(0, 0, {}, number)
            return
        fields = {name: value for name, value in zip(header, row, strict=False) if name}
        yield Entry(lines.offset_of_line(first), lines.offset_of_line(last + 1), fields, number)


def _json_entries(mapping: FactMapping, text: str, items: tuple[str, ...]) -> list[Entry]:
    """Entries of a JSON text at their exact spans: the items of the list at `items` (or of
    a top-level list), else the top-level object as one entry."""
    decoder = json.JSONDecoder()
    try:
        json.loads(text)  # the whole text is JSON (RecursionError: nested thousands deep)
        position = _space(text, 0)
        for key in items:
            position = _member(decoder, text, position, key)
            if position < 0:
                return []
        if position < len(text) and text[position] == "[":
            return _array(decoder, text, position)
        value, end = decoder.raw_decode(text, position)
    except (ValueError, RecursionError) as exc:
        raise InvalidEvent(
            f"fact mapping {mapping.name!r}: not JSON it can read ({quote(str(exc))})"
        ) from None
    return [Entry(position, end, value, 1)] if not items else []


def _space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _member(decoder: json.JSONDecoder, text: str, at: int, key: str) -> int:
    """Where the value of `key` in the object at `at` starts (-1: no such member)."""
    if at >= len(text) or text[at] != "{":
        return -1
    at = _space(text, at + 1)
    while at < len(text) and text[at] != "}":
        name, at = decoder.raw_decode(text, at)
        at = _space(text, at)
        at = _space(text, at + 1)  # the colon
        if name == key:
            return at
        _, at = decoder.raw_decode(text, at)
        at = _space(text, at)
        if at < len(text) and text[at] == ",":
            at = _space(text, at + 1)
    return -1


def _array(decoder: json.JSONDecoder, text: str, at: int) -> list[Entry]:
    entries: list[Entry] = []
    at = _space(text, at + 1)
    while at < len(text) and text[at] != "]":
        value, end = decoder.raw_decode(text, at)
        entries.append(Entry(at, end, value, len(entries) + 1))
        if len(entries) > MAX_ENTRIES:
            break
        at = _space(text, end)
        if at < len(text) and text[at] == ",":
            at = _space(text, at + 1)
    return entries


# --- fields -------------------------------------------------------------------------------


def _field(fields: Mapping[str, Any], name: str) -> Any:
    """A column, or the value at a dotted path (a column named with dots wins)."""
    if name in fields:
        return fields[name]
    value: Any = fields
    for key in name.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _names(value: Any) -> list[str]:
    """The non-empty one-line names a field holds (one, or each of a list)."""
    values = value if isinstance(value, list) else [value]
    out = []
    for item in values[:MAX_VALUES]:
        if item is None or isinstance(item, Mapping | list | bool):
            continue
        name = str(item).strip()
        if name and len(name) <= ID_CHARS and not has_control(name):
            out.append(name)
    return out


def _ids(ref: EntityRef, entry: Entry) -> list[tuple[str, str]]:
    """(entity id, the value as written) for each id the entry's field holds."""
    out = []
    for written in _names(_field(entry.fields, ref.id)):
        name = written
        if ref.ref == "entity_ref" and (found := _REF.match(written)):
            name = found.group("name")
        out.append((f"{ref.type}:{name}", written))
    return out


def _time(mapping: FactMapping, entry: Entry, name: str | None) -> datetime | None:
    """The field as an instant; a time without a zone is UTC, a date is its midnight UTC."""
    if name is None:
        return None
    value = _field(entry.fields, name)
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str) and len(value) <= 64:
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise _refused(
        mapping,
        entry,
        name,
        f"is not a time (got {yamlsafe.shown(value)}); write ISO 8601, e.g. 2025-03-01T02:01:22Z",
    )


def _acl(mapping: FactMapping, entry: Entry) -> tuple[str, ...]:
    if mapping.acl is None:
        return ()
    value = _field(entry.fields, mapping.acl)
    if isinstance(value, str):
        value = [p for p in re.split(r"[,\s]+", value) if p]
    return tuple(sorted(set(_names(value))))


def _refused(mapping: FactMapping, entry: Entry, name: str, problem: str) -> InvalidEvent:
    where = f"field {quote(name)} " if name else ""
    return InvalidEvent(
        f"fact mapping {mapping.name!r}, entry {entry.number}: {where}{problem}; fix the "
        "entry or the mapping"
    )
