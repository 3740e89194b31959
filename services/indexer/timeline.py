"""When each timeline entry happened (pure, no I/O).

An incident's `- 10:02 deploy started` says a clock time, not an instant: the document
says the rest. Its frontmatter `date` is the day the bare times are on and `timezone` the
IANA zone they are written in; without them, a frontmatter `event_time` gives its date
(in `timezone` when there is one) and its offset. An entry that writes its own date, time
and zone (`2025-03-01T10:02Z`, `2025-03-01 10:02 UTC`) needs neither.

Read in document order, so that a timeline crossing midnight (`23:50`, then `00:10`)
lands on the next day: a bare time more than 12 hours before the entry resolved before it
is taken on the day after. An entry that writes a date (with or without a time) sets the
day the bare times after it are on. A local time that the zone skips (a daylight saving
gap) is not guessed; one it repeats is the earlier occurrence, unless only the later one
keeps the timeline in order.

An entry that cannot be resolved says why in a label, `event_time:unresolved:<reason>`,
and keeps the document's own event time (which may be none): `no_time` (it writes no
clock time), `invalid_time` / `invalid_date` (no calendar has it), `no_date` (nothing
says the day), `no_timezone` (nothing says the zone), `nonexistent_time` (the zone
skips it). A resolved entry's event time is its instant, in UTC.

Only each entry's first line is read, a bounded prefix of it: the work is linear in the
number of entries. Valid time stays the document's (`stamping.resolve_validity`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

from govindex.core.records import ChunkDraft, ChunkKind
from indexer.frontmatter import Frontmatter, FrontmatterLike

UNRESOLVED = "event_time:unresolved:"  # the label prefix; the reason follows
ROLLOVER = timedelta(hours=12)  # a bare time this far before the last one is on the next day
_PREFIX = 160  # characters of an entry read: a marker, emphasis and a time fit many times
_BAD_DAY = "invalid_date"

_MARKER = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](?=\d)|(?!\w))")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,6}))?)?(?!\d|:\d)")
# A zone written after a time: `Z` or an offset right after it, or `UTC` / `GMT` (with an
# offset of their own) as a word of their own. Abbreviations such as CET are not read. A
# bare offset is read only after a date: after a bare time, `10:02-10:15` is a range.
_ZONE = re.compile(
    r"(Z|[+-]\d{2}:?\d{2})(?![\w:])"
    r"|[ \t]?(?:UTC|GMT)(?:([+-])(\d{1,2})(?::?(\d{2}))?)?(?![\w:+-])"
)


@dataclass(frozen=True, slots=True)
class EntryTime:
    """One timeline entry's instant, or why it has none."""

    at: datetime | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Timeline:
    """Each timeline entry's resolution, by draft ordinal; other drafts are not in it and
    keep the document's event time."""

    entries: Mapping[int, EntryTime] = field(default_factory=dict)

    def event_time(self, ordinal: int, document: datetime | None) -> datetime | None:
        """The draft's event time: its entry's instant, else the document's."""
        entry = self.entries.get(ordinal)
        return entry.at if entry is not None and entry.at is not None else document

    def labels(self, ordinal: int, labels: tuple[str, ...]) -> tuple[str, ...]:
        """The draft's labels, with the reason its entry is unresolved when it is."""
        entry = self.entries.get(ordinal)
        if entry is None or entry.reason is None:
            return labels
        return (*labels, UNRESOLVED + entry.reason)


NO_TIMELINE = Timeline()


@dataclass(frozen=True, slots=True)
class _Written:
    """What an entry's first line writes: a date, a clock time, a zone, each if any."""

    day: date | None = None
    clock: time | None = None
    zone: tzinfo | None = None
    invalid: str | None = None  # `invalid_date` or `invalid_time`


def resolve_timeline(frontmatter: FrontmatterLike, drafts: Sequence[ChunkDraft]) -> Timeline:
    """Each timeline entry's event time, or its reason (see the module's rules).

    Raises InvalidFrontmatter for an `event_time` without a time zone (as stamping does)."""
    if not any(d.kind is ChunkKind.TIMELINE_ENTRY for d in drafts):
        return NO_TIMELINE
    fm = Frontmatter.of(frontmatter)
    zone: tzinfo | None = ZoneInfo(fm.timezone) if fm.timezone else None
    day = fm.date
    happened = fm.time("event_time")
    if happened is not None:
        zone = zone if zone is not None else happened.tzinfo
        day = day if day is not None else happened.astimezone(zone).date()
    entries: dict[int, EntryTime] = {}
    last: EntryTime | None = None
    previous: datetime | None = None  # the last resolved instant, in UTC
    for draft in drafts:
        if draft.kind is not ChunkKind.TIMELINE_ENTRY:
            continue
        if last is not None and _continues(draft):  # a later part of the same entry
            entries[draft.ordinal] = last
            continue
        written = _written(draft.text)
        if written.invalid is None and written.day is not None:
            day = _day_of(written, zone)  # the bare times after it are on its day
            if written.clock is None:
                previous = None  # a new day begins: nothing to roll over from
        last = _resolve(written, day, zone, previous)
        if _rolls_over(written, last, previous):
            day = _next(day)
            last = _resolve(written, day, zone, previous) if day else EntryTime(reason=_BAD_DAY)
        if last.at is not None:
            previous = last.at
        entries[draft.ordinal] = last
    return Timeline(entries)


def _rolls_over(written: _Written, entry: EntryTime, previous: datetime | None) -> bool:
    """A bare time far enough before the last resolved one to be on the next day."""
    return (
        written.day is None
        and entry.at is not None
        and previous is not None
        and entry.at < previous - ROLLOVER
    )


def _resolve(
    written: _Written, day: date | None, zone: tzinfo | None, previous: datetime | None
) -> EntryTime:
    if written.invalid is not None:
        return EntryTime(reason=written.invalid)
    if written.clock is None:
        return EntryTime(reason="no_time")
    on = written.day if written.day is not None else day
    if on is None:
        return EntryTime(reason="no_date")
    at_zone = written.zone if written.zone is not None else zone
    if at_zone is None:
        return EntryTime(reason="no_timezone")
    try:
        local = datetime.combine(on, written.clock, tzinfo=at_zone)
        earlier = local.astimezone(UTC)
        if earlier.astimezone(at_zone).replace(tzinfo=None) != local.replace(tzinfo=None):
            return EntryTime(reason="nonexistent_time")
        later = local.replace(fold=1).astimezone(UTC)
    except OverflowError:  # the first or last day a datetime holds, off by an offset
        return EntryTime(reason=_BAD_DAY)
    if previous is not None and earlier < previous <= later:
        return EntryTime(at=later)  # a repeated hour, the second time round
    return EntryTime(at=earlier)


def _written(text: str) -> _Written:
    line = text[:_PREFIX].split("\n", 1)[0].rstrip("\r")
    marker = _MARKER.match(line)
    rest = line[marker.end() :] if marker else line.lstrip()
    rest = rest.removeprefix("**")
    day: date | None = None
    if found := _DATE.match(rest):
        try:
            day = date(int(found[1]), int(found[2]), int(found[3]))
        except ValueError:
            return _Written(invalid=_BAD_DAY)
        rest = rest[found.end() :]
    clock = _CLOCK.match(rest)
    if clock is None:
        return _Written(day=day)
    hour, minute, second = int(clock[1]), int(clock[2]), int(clock[3] or 0)
    if hour > 23 or minute > 59 or second > 59:
        return _Written(day=day, invalid="invalid_time")
    micro = int((clock[4] or "0").ljust(6, "0"))
    zone = _zone(rest[clock.end() :], offset=day is not None)
    return _Written(day, time(hour, minute, second, micro), zone)


def _zone(rest: str, *, offset: bool) -> tzinfo | None:
    """The zone written right after a time, if one is (a bare offset only when `offset`)."""
    found = _ZONE.match(rest)
    if found is None:
        return None
    if found[1] == "Z":
        return UTC
    if found[1]:
        if not offset:
            return None
        sign, digits = found[1][0], found[1][1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
    elif found[2]:
        sign, hours, minutes = found[2], int(found[3]), int(found[4] or 0)
    else:
        return UTC
    if hours > 23 or minutes > 59:
        return None
    east = timedelta(hours=hours, minutes=minutes)
    return timezone(-east if sign == "-" else east)


def _day_of(written: _Written, zone: tzinfo | None) -> date | None:
    """The day the bare times after an entry that writes a date are on: its own date, or,
    when it also writes its own zone, that instant's date in the document's zone."""
    assert written.day is not None
    if written.clock is None or written.zone is None or zone is None:
        return written.day
    try:
        return datetime.combine(written.day, written.clock, written.zone).astimezone(zone).date()
    except OverflowError:
        return written.day


def _next(day: date | None) -> date | None:
    try:
        return day + timedelta(days=1) if day is not None else None
    except OverflowError:
        return None


def _continues(draft: ChunkDraft) -> bool:
    """A second or later part of an entry cut in parts (`part:2/3`)."""
    return any(
        label.startswith("part:") and not label.startswith("part:1/") for label in draft.labels
    )
