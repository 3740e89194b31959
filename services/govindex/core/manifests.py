"""Source manifests from YAML files, with errors that name the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from govindex.core.errors import ManifestError
from govindex.core.records import SourceManifest


def load_manifests(paths: list[Path]) -> list[SourceManifest]:
    """Load every manifest (a file may hold several YAML documents); collect all problems."""
    manifests: list[SourceManifest] = []
    problems: list[str] = []
    for path in paths:
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except FileNotFoundError:
            problems.append(f"{path}: no such file")
            continue
        except yaml.YAMLError as exc:
            problems.append(f"{path}: not valid YAML: {exc}")
            continue
        for number, doc in enumerate(d for d in docs if d is not None):
            where = f"{path}" if len(docs) == 1 else f"{path} (document {number + 1})"
            if not isinstance(doc, dict):
                problems.append(f"{where}: a manifest is a YAML mapping of fields")
                continue
            try:
                manifests.append(SourceManifest.model_validate(doc))
            except ValidationError as exc:
                for err in exc.errors():
                    field = ".".join(str(p) for p in err["loc"]) or "(manifest)"
                    value = "" if err["type"] == "missing" else f" (got {err.get('input')!r})"
                    problems.append(f"{where}: field '{field}': {err['msg']}{value}")
    if problems:
        raise ManifestError("\n".join(problems))
    seen: dict[str, SourceManifest] = {}
    for manifest in manifests:
        if manifest.source_id in seen:
            raise ManifestError(f"source_id {manifest.source_id!r} is defined twice")
        seen[manifest.source_id] = manifest
    return manifests
