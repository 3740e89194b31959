"""Debezium change events → document events (pure, no I/O).

Accepts the JSON converter's output with and without the `schema`/`payload` wrapper, and
Debezium's CloudEvents converter output. Operations: `c`, `u`, `r` (snapshot read) become
created / updated; `d` and a null-value Kafka tombstone become deleted (a delete whose
tombstone never arrives is still a delete); `t` (truncate) deletes every document of the
table. The per-document sequence is the source position: the PostgreSQL LSN, or the MySQL
binlog file and position, else `ts_ms`; so an update that arrives after a newer one or
after the delete is refused by the indexer's order guard.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from govindex.core.errors import InvalidEvent
from govindex.core.facts import FactMapping
from govindex.core.records import CdcSettings

Op = Literal["upsert", "delete", "truncate"]


@dataclass(frozen=True)
class RowChange:
    op: Op
    doc_id: str | None  # None for a truncate
    sequence: int
    source_version: str
    observed_at: datetime
    text: str | None = None
    acl: list[str] | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    metadata: Mapping[str, str] | None = None
    snapshot: bool = False


def unwrap(value: bytes) -> dict[str, Any]:
    """The Debezium envelope (before, after, source, op, ts_ms) from any of the encodings."""
    try:
        data = json.loads(value)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested thousands deep
        raise InvalidEvent(f"change event is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidEvent("change event is not a JSON object")
    if "specversion" in data and "data" in data:  # Debezium's CloudEvents converter
        inner = data["data"]
        inner = inner.get("payload", inner) if isinstance(inner, dict) else inner
        if not isinstance(inner, dict):
            raise InvalidEvent("CloudEvents change event without a data object")
        source = {k[len("iodebezium") :]: v for k, v in data.items() if k.startswith("iodebezium")}
        return {
            "before": inner.get("before"),
            "after": inner.get("after"),
            "op": data.get("iodebeziumop") or inner.get("op"),
            "source": inner.get("source") or {**source, "ts_ms": source.get("tsms")},
            "ts_ms": data.get("iodebeziumtsms") or inner.get("ts_ms"),
        }
    if "payload" in data and "schema" in data:
        payload = data["payload"]
        if not isinstance(payload, dict):
            raise InvalidEvent("change event payload is not an object")
        return payload
    return data


def position(source: Mapping[str, Any], ts_ms: Any) -> int:
    """A strictly increasing source position: LSN, binlog file+pos, or ts_ms in microseconds."""
    lsn = source.get("lsn")
    if isinstance(lsn, int | str) and str(lsn).isdigit():
        return int(lsn)
    binlog = source.get("file")
    pos = source.get("pos")
    if isinstance(binlog, str) and isinstance(pos, int):
        number = re.search(r"(\d+)$", binlog)
        return (int(number.group(1)) if number else 0) * 2**32 + pos
    stamp = source.get("ts_ms", ts_ms)
    if isinstance(stamp, int):
        return stamp * 1000
    raise InvalidEvent("change event has no source position (lsn, file/pos or ts_ms)")


def when(value: Any) -> datetime | None:
    """Debezium time columns: epoch micros/millis/seconds, or ISO 8601 strings."""
    if value is None:
        return None
    if isinstance(value, int | float):
        magnitude = abs(value)
        seconds = value / 1e6 if magnitude > 1e14 else value / 1e3 if magnitude > 1e11 else value
        return datetime.fromtimestamp(seconds, UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidEvent(f"not a timestamp: {value!r}") from exc
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise InvalidEvent(f"not a timestamp: {value!r}")


def doc_id_of(row: Mapping[str, Any], cdc: CdcSettings) -> str:
    missing = [c for c in cdc.id_columns if row.get(c) is None]
    if missing:
        raise InvalidEvent(f"row has no value for id column(s) {', '.join(missing)}")
    return f"{cdc.table}/" + "/".join(str(row[c]) for c in cdc.id_columns)


def text_of(row: Mapping[str, Any], cdc: CdcSettings) -> str:
    values: defaultdict[str, str] = defaultdict(
        str, {k: "" if v is None else str(v) for k, v in row.items()}
    )
    if cdc.text_template:
        return cdc.text_template.format_map(values)
    return "\n\n".join(values[c] for c in cdc.text_columns if values[c])


def acl_of(row: Mapping[str, Any], cdc: CdcSettings) -> list[str] | None:
    if not cdc.acl_column:
        return None
    raw = row.get(cdc.acl_column)
    if raw is None:
        return None
    items = raw if isinstance(raw, list) else re.split(r"[,\s]+", str(raw))
    return [str(i).strip() for i in items if str(i).strip()] or None


def fact_columns(row: Mapping[str, Any], facts: FactMapping) -> dict[str, str]:
    """The columns a fact mapping reads, as the event's metadata carries them: times in
    ISO 8601 (Debezium writes epoch micros), lists comma-separated, the rest as text."""
    times = facts.time_fields()
    out: dict[str, str] = {}
    for name in sorted(facts.fields()):
        value = row.get(name)
        if value is None:
            continue
        if name in times:
            instant = when(value)
            out[name] = instant.isoformat() if instant else ""
        elif isinstance(value, list):
            out[name] = ",".join(str(v) for v in value)
        else:
            out[name] = str(value)
    return out


def translate(
    key: bytes | None, value: bytes | None, cdc: CdcSettings, facts: FactMapping | None = None
) -> RowChange | None:
    """One Kafka record of a Debezium topic → one row change (None: nothing to do); the
    columns a fact mapping of the table reads travel in its metadata."""
    if value is None:  # the Kafka tombstone that follows a delete
        if key is None:
            return None
        try:
            raw_key = json.loads(key)
        except (ValueError, RecursionError) as exc:
            raise InvalidEvent(f"tombstone key is not JSON: {exc}") from exc
        row = raw_key.get("payload", raw_key) if isinstance(raw_key, dict) else {}
        if not isinstance(row, dict):
            raise InvalidEvent("tombstone key is not an object")
        return RowChange("delete", doc_id_of(row, cdc), 0, "debezium:tombstone", datetime.now(UTC))
    envelope = unwrap(value)
    op = envelope.get("op")
    source = envelope.get("source") or {}
    seq = position(source, envelope.get("ts_ms"))
    observed = when(source.get("ts_ms") or envelope.get("ts_ms")) or datetime.now(UTC)
    version = f"lsn:{seq}" if source.get("lsn") is not None else f"pos:{seq}"
    if op == "t":
        return RowChange("truncate", None, seq, version, observed)
    if op == "d":
        before = envelope.get("before")
        if not isinstance(before, dict):
            raise InvalidEvent(
                "delete without a before image: set REPLICA IDENTITY to include the key columns"
            )
        return RowChange("delete", doc_id_of(before, cdc), seq, version, observed)
    if op not in ("c", "u", "r"):
        raise InvalidEvent(f"unknown Debezium operation {op!r}")
    after = envelope.get("after")
    if not isinstance(after, dict):
        raise InvalidEvent(f"operation {op!r} without an after image")
    return RowChange(
        "upsert",
        doc_id_of(after, cdc),
        seq,
        version,
        observed,
        text=text_of(after, cdc),
        acl=acl_of(after, cdc),
        valid_from=when(after.get(cdc.valid_from_column)) if cdc.valid_from_column else None,
        valid_to=when(after.get(cdc.valid_to_column)) if cdc.valid_to_column else None,
        metadata={
            **{c: str(after[c]) for c in cdc.metadata_columns if after.get(c) is not None},
            **(fact_columns(after, facts) if facts else {}),
        },
        snapshot=op == "r",
    )
