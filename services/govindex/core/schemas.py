"""JSON Schemas of every event payload and the source manifest, and the OpenAPI documents of
the APIs, generated from the models and checked for drift."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

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


# --- OpenAPI documents ----------------------------------------------------------------------

OPENAPI_VERSION = "3.1.0"
COMPONENTS_REF = "#/components/schemas/{model}"
Mode = Literal["validation", "serialization"]
# What a document builder gives: the document as a JSON-ready dict.
DocumentBuilder = Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Components:
    """The JSON Schemas of an API's bodies and parameters, keyed as they were asked for, and
    the `components.schemas` their `$ref`s point into (one generation: one name per model)."""

    refs: dict[tuple[str, Mode], dict[str, Any]]
    schemas: dict[str, Any]

    def of(self, key: str, mode: Mode = "validation") -> dict[str, Any]:
        return self.refs[(key, mode)]


def components(types: Mapping[str, tuple[Any, Mode]]) -> Components:
    """Schemas of `types` (name -> (a model, dataclass or annotated type, and whether it is
    read as a request or written as an answer)), their shared definitions under
    `#/components/schemas/`. Every schema comes from pydantic: none is written by hand."""
    inputs = [(name, mode, TypeAdapter(kind)) for name, (kind, mode) in types.items()]
    refs, defs = TypeAdapter.json_schemas(inputs, ref_template=COMPONENTS_REF)
    return Components(
        {(name, mode): dict(schema) for (name, mode), schema in refs.items()},
        {name: _titled(name, schema) for name, schema in defs.get("$defs", {}).items()},
    )


def _titled(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """A model read in requests and written in answers is two schemas, `X-Input` and
    `X-Output`, both titled `X`; client generators name their classes by title, so each
    gets its own (`XInput`, `XOutput`) or the second is dropped as a duplicate."""
    if name.endswith(("-Input", "-Output")):
        return {**schema, "title": name.replace("-", "")}
    return dict(schema)


def render_document(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def write_documents(folder: Path, documents: Mapping[str, DocumentBuilder]) -> list[Path]:
    """Write each document `name` as `name.v1.json` in `folder` (e.g. `openapi.read`)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, build in documents.items():
        path = folder / f"{name}.v1.json"
        path.write_text(render_document(build()))
        written.append(path)
    return written


def check_documents(folder: Path, documents: Mapping[str, DocumentBuilder]) -> list[str]:
    """Names of documents whose committed file differs from what is built (or is missing)."""
    drift = []
    for name, build in documents.items():
        path = folder / f"{name}.v1.json"
        if not path.exists() or path.read_text() != render_document(build()):
            drift.append(path.name)
    return drift
