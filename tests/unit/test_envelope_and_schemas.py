"""CloudEvents wrapping, deterministic ids, manifests and schema drift."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from govindex.cli.index import ALL_MODELS
from govindex.core import events
from govindex.core.envelope import decode, encode
from govindex.core.errors import InvalidEvent, ManifestError
from govindex.core.events import DocumentDeleted
from govindex.core.manifests import load_manifests
from govindex.core.schemas import check_schemas

ROOT = Path(__file__).resolve().parents[2]


def deleted() -> DocumentDeleted:
    return DocumentDeleted(
        tenant_id="t",
        source_id="s",
        doc_id="a.md",
        source_version="v",
        sequence=7,
        deleted_at=datetime(2025, 1, 1, tzinfo=UTC),
    )


def test_binary_mode_round_trip_keeps_attributes_and_payload() -> None:
    payload = deleted()
    record = encode(
        event_type=events.DOCUMENT_DELETED,
        event_id="id-1",
        tenant_id="t",
        source_id="s",
        subject="a.md",
        key=payload.key,
        payload=payload,
        extensions={"sequence": 7},
    )
    headers = dict(record.headers)
    assert headers["ce_type"] == events.DOCUMENT_DELETED.encode()
    assert record.key == b"t/s/a.md"
    envelope = decode(record.key, record.value, record.headers)
    assert (envelope.id, envelope.type, envelope.subject) == (
        "id-1",
        events.DOCUMENT_DELETED,
        "a.md",
    )
    assert envelope.extensions["tenantid"] == "t"
    assert DocumentDeleted.model_validate(envelope.data) == payload


def test_structured_mode_is_accepted() -> None:
    body = {
        "specversion": "1.0",
        "id": "x",
        "type": events.DOCUMENT_DELETED,
        "source": "/s",
        "data": deleted().model_dump(mode="json"),
    }
    envelope = decode(
        None, json.dumps(body).encode(), [("content-type", b"application/cloudevents+json")]
    )
    assert envelope.id == "x" and envelope.data["sequence"] == 7


@pytest.mark.parametrize("value", [None, b"", b"{", b"[]", b'{"no": "attributes"}'])
def test_what_is_not_a_cloudevent_is_an_invalid_event(value: bytes | None) -> None:
    with pytest.raises(InvalidEvent):
        decode(b"k", value, [])


def test_event_ids_are_deterministic_per_change() -> None:
    a = events.event_id("t", "s", "d", "git:1", "updated")
    assert a == events.event_id("t", "s", "d", "git:1", "updated")
    assert a != events.event_id("t", "s", "d", "git:2", "updated")
    assert a != events.event_id("t", "s", "d", "git:1", "deleted")


def test_committed_schemas_match_the_models() -> None:
    assert check_schemas(ROOT / "schemas", ALL_MODELS) == [], "run `govindex schemas --write`"


def test_manifest_errors_name_file_field_and_problem(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("source_id: bad/id\ntenant: t\nsource_type: ftp\n")
    with pytest.raises(ManifestError) as caught:
        load_manifests([path])
    message = str(caught.value)
    assert f"{path}: field 'source_id'" in message
    assert f"{path}: field 'source_type'" in message and "'ftp'" in message
    assert f"{path}: field 'trust_level': Field required" in message


def test_an_empty_default_acl_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "source_id: s\ntenant: t\nsource_type: git\nowner_team: o\nclassification: internal\n"
        "default_acl: []\nallowed_purposes: [x]\ntrust_level: reviewed\n"
    )
    with pytest.raises(ManifestError, match="visible to no one"):
        load_manifests([path])


def test_the_demo_manifest_is_valid() -> None:
    (m,) = load_manifests([ROOT / "services/govindex/devstack/demo/manifests/handbook.yaml"])
    assert m.source_id == "handbook"


@pytest.mark.parametrize("mode", ["structured", "binary"])
def test_data_nested_thousands_deep_is_an_invalid_event_not_a_crash(mode: str) -> None:
    deep = b"[" * 5000 + b"]" * 5000
    attributes = {"specversion": "1.0", "id": "x", "type": events.DOCUMENT_DELETED, "source": "/s"}
    if mode == "structured":
        value = b'{"data": ' + deep + b", " + json.dumps(attributes).encode()[1:]
        headers = [("content-type", b"application/cloudevents+json")]
    else:
        value = deep
        headers = [(f"ce_{k}", v.encode()) for k, v in attributes.items()]
        headers.append(("content-type", b"application/json"))
    with pytest.raises(InvalidEvent):
        decode(b"k", value, headers)
