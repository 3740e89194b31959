"""JSON Schemas of every event payload and the source manifest, generated from the models."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from govindex.core.events import PAYLOAD_MODELS
from govindex.core.records import SourceManifest

MODELS: dict[str, type[BaseModel]] = {**PAYLOAD_MODELS, "source.manifest": SourceManifest}


def render(model: type[BaseModel], name: str) -> str:
    schema = model.model_json_schema(mode="validation")
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:govindex:schema:{name}:v1",
        **schema,
    }
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(folder: Path, models: dict[str, type[BaseModel]] | None = None) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in (models or MODELS).items():
        path = folder / f"{name}.v1.json"
        path.write_text(render(model, name))
        written.append(path)
    return written


def check_schemas(folder: Path, models: dict[str, type[BaseModel]] | None = None) -> list[str]:
    """Names of schemas whose committed file differs from the model (or is missing)."""
    drift = []
    for name, model in (models or MODELS).items():
        path = folder / f"{name}.v1.json"
        if not path.exists() or path.read_text() != render(model, name):
            drift.append(path.name)
    return drift
