"""Timeline entries at full timestamps: the document's day and zone make `- 10:02` an
instant; what cannot be resolved says why; hostile zone names are refused short."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from govindex.core.errors import InvalidFrontmatter
from govindex.core.records import ChunkKind
from indexer.frontmatter import Frontmatter
from indexer.parsers.markdown import MarkdownParser
from indexer.planning import plan_version
from indexer.timeline import resolve_timeline
from tests.support.builders import change_payload, manifest

OBSERVED = datetime(2025, 12, 1, tzinfo=UTC)


def incident(frontmatter: str, *entries: str) -> str:
    lines = "".join(f"- {e}\n" for e in entries)
    head = f"---\n{frontmatter}\n---\n" if frontmatter else ""
    return f"{head}# Checkout outage\n\nWhat happened.\n\n## Timeline\n\n{lines}"


def resolved(text: str) -> list[datetime | str]:
    """Each timeline entry's instant, or its reason, in document order."""
    parsed = MarkdownParser().parse(text)
    timeline = resolve_timeline(parsed.frontmatter, parsed.chunks)
    out: list[datetime | str] = []
    for draft in parsed.chunks:
        if draft.kind is ChunkKind.TIMELINE_ENTRY:
            entry = timeline.entries[draft.ordinal]
            out.append(entry.at if entry.at is not None else f"unresolved:{entry.reason}")
    return out


def at(year: int, month: int, day: int, hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_bare_times_are_on_the_documents_day_in_its_zone() -> None:
    text = incident("date: 2025-03-01\ntimezone: UTC", "10:02 deploy", "10:15:30 errors")
    assert resolved(text) == [at(2025, 3, 1, 10, 2), at(2025, 3, 1, 10, 15, 30)]


def test_a_zone_with_daylight_saving_time_gives_the_offset_of_that_day() -> None:
    summer = incident("date: 2025-07-01\ntimezone: Europe/Berlin", "10:02 deploy")
    winter = incident("date: 2025-01-15\ntimezone: Europe/Berlin", "10:02 deploy")
    assert resolved(summer) == [at(2025, 7, 1, 8, 2)]  # CEST, UTC+2
    assert resolved(winter) == [at(2025, 1, 15, 9, 2)]  # CET, UTC+1


def test_a_time_the_zone_skips_is_not_guessed_and_a_repeated_one_keeps_the_order() -> None:
    gap = incident("date: 2025-03-30\ntimezone: Europe/Berlin", "02:30 in the gap")
    assert resolved(gap) == ["unresolved:nonexistent_time"]
    fall = incident(
        "date: 2025-10-26\ntimezone: Europe/Berlin", "02:50 summer time", "02:10 winter time"
    )
    assert resolved(fall) == [at(2025, 10, 26, 0, 50), at(2025, 10, 26, 1, 10)]


def test_a_timeline_that_crosses_midnight_goes_on_the_next_day() -> None:
    text = incident(
        "date: 2025-03-01\ntimezone: UTC", "23:50 alert", "00:10 rollback", "00:05 noted late"
    )
    assert resolved(text) == [
        at(2025, 3, 1, 23, 50),
        at(2025, 3, 2, 0, 10),
        at(2025, 3, 2, 0, 5),  # minutes back is an entry out of order, not a day later
    ]


def test_an_entry_that_writes_its_own_date_time_and_zone_needs_no_frontmatter() -> None:
    text = incident(
        "",
        "2025-03-01T10:02Z deploy",
        "2025-03-01 10:05 UTC paged",
        "**2025-03-01T10:07:30+05:30** escalated",
        "2025-03-01 10:09 page",  # a date and a time, but no zone anywhere
    )
    assert resolved(text) == [
        at(2025, 3, 1, 10, 2),
        at(2025, 3, 1, 10, 5),
        at(2025, 3, 1, 4, 37, 30),
        "unresolved:no_timezone",
    ]


def test_an_entry_that_writes_a_date_sets_the_day_of_the_bare_times_after_it() -> None:
    text = incident(
        "date: 2025-03-01\ntimezone: Europe/Berlin",
        "10:02 deploy",
        "2025-03-03 day three",
        "09:00 follow-up",
    )
    assert resolved(text) == [at(2025, 3, 1, 9, 2), "unresolved:no_time", at(2025, 3, 3, 8, 0)]


def test_a_zone_written_after_a_bare_time_is_its_own_and_a_range_is_not_a_zone() -> None:
    text = incident(
        "date: 2025-07-01\ntimezone: Europe/Berlin",
        "10:02 UTC deploy",
        "10:05Z paged",
        "10:10-10:20 outage",
        "10:30 GMT+3 noted",
    )
    assert resolved(text) == [
        at(2025, 7, 1, 10, 2),
        at(2025, 7, 1, 10, 5),
        at(2025, 7, 1, 8, 10),
        at(2025, 7, 1, 7, 30),
    ]


def test_without_date_or_zone_the_frontmatter_event_time_says_the_day_and_offset() -> None:
    text = incident("event_time: 2025-03-01T23:30:00-05:00", "22:10 deploy")
    assert resolved(text) == [at(2025, 3, 2, 3, 10)]
    zoned = incident("event_time: 2025-03-01T23:30:00Z\ntimezone: Europe/Berlin", "08:00 x")
    assert resolved(zoned) == [at(2025, 3, 2, 7, 0)]  # its day in Berlin is 2 March


def test_what_cannot_be_resolved_is_labelled_and_keeps_the_documents_event_time() -> None:
    assert resolved(incident("", "10:02 deploy")) == ["unresolved:no_date"]
    assert resolved(incident("date: 2025-03-01", "10:02 deploy")) == ["unresolved:no_timezone"]
    bad = incident("date: 2025-03-01\ntimezone: UTC", "25:00 deploy", "later on", "2025-02-30 x")
    assert resolved(bad) == [
        "unresolved:invalid_time",
        "unresolved:no_time",
        "unresolved:invalid_date",
    ]

    text = incident("date: 2025-03-01", "10:02 deploy")
    plan = plan_version(
        change_payload("t", "s", "incidents/a.md", 1, text, observed_at=OBSERVED),
        text,
        manifest("s", "t"),
        generation=1,
        now=OBSERVED,
    )
    (entry,) = [c for c in plan.chunks if c.kind == ChunkKind.TIMELINE_ENTRY.value]
    assert entry.labels == ("at:10:02", "event_time:unresolved:no_timezone")
    assert entry.event_time is None


def test_stamping_gives_entries_their_instant_and_every_other_chunk_the_documents() -> None:
    happened = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    text = incident(
        f"event_time: {happened.isoformat()}\ndate: 2025-03-01\ntimezone: Europe/Berlin",
        "10:02 deploy started",
        "11:30 rolled back",
        "no time written",
    )
    plan = plan_version(
        change_payload("t", "s", "incidents/a.md", 1, text, observed_at=OBSERVED),
        text,
        manifest("s", "t"),
        generation=1,
        now=OBSERVED,
    )
    stamped = [(c.kind, c.event_time, c.labels) for c in plan.chunks]
    entries = [(t, labels) for kind, t, labels in stamped if kind == "timeline_entry"]
    assert entries == [
        (at(2025, 3, 1, 9, 2), ("at:10:02",)),
        (at(2025, 3, 1, 10, 30), ("at:11:30",)),
        (happened, ("event_time:unresolved:no_time",)),
    ]
    assert {t for kind, t, _ in stamped if kind != "timeline_entry"} == {happened}
    assert {c.valid_from for c in plan.chunks} == {happened}  # valid time stays the document's


def test_every_part_of_a_long_entry_has_the_entrys_time() -> None:
    text = incident("date: 2025-03-01\ntimezone: UTC", "10:02 " + "words of the entry " * 300)
    parsed = MarkdownParser().parse(text)
    parts = [d for d in parsed.chunks if d.kind is ChunkKind.TIMELINE_ENTRY]
    assert len(parts) > 1
    timeline = resolve_timeline(parsed.frontmatter, parsed.chunks)
    assert {timeline.event_time(d.ordinal, None) for d in parts} == {at(2025, 3, 1, 10, 2)}


def test_a_document_without_a_timeline_resolves_nothing() -> None:
    parsed = MarkdownParser().parse("---\ntimezone: UTC\n---\n# Runbook\n\n1. Step.\n")
    assert resolve_timeline(parsed.frontmatter, parsed.chunks).entries == {}


def test_date_and_timezone_are_type_checked() -> None:
    fm = Frontmatter.of({"date": datetime(2025, 3, 1, 23, 0, tzinfo=timezone(-timedelta(hours=5)))})
    assert fm.date is not None and fm.date.isoformat() == "2025-03-01"  # its date as written
    assert Frontmatter.of({"date": "2025-03-01", "timezone": "UTC"}).timezone == "UTC"
    with pytest.raises(InvalidFrontmatter, match="field 'date': must be a date"):
        Frontmatter.of({"date": "next tuesday"})


@pytest.mark.parametrize(
    "zone",
    ["x" * 10_000, "../../etc/passwd", "/etc/localtime", "America", "zone.tab", "Mars/Olympus"],
)
def test_a_hostile_or_unknown_timezone_is_refused_with_a_short_message(zone: str) -> None:
    with pytest.raises(InvalidFrontmatter) as caught:
        Frontmatter.of({"timezone": zone})
    message = str(caught.value)
    assert caught.value.reason == "invalid_frontmatter"
    assert "field 'timezone'" in message and len(message) < 400
    text = incident(f"date: 2025-03-01\ntimezone: '{zone}'", "10:02 deploy")
    with pytest.raises(InvalidFrontmatter, match="field 'timezone'"):
        plan_version(
            change_payload("t", "s", "incidents/a.md", 1, text),
            text,
            manifest("s", "t"),
            generation=1,
            now=OBSERVED,
        )
