"""Source manifests from YAML files, with errors that name the file, the field and the fix.

Every message is short whatever the file holds: YAML is read by the product's loader (no
anchors or aliases, bounded size and depth), and a value is quoted, never printed whole.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from govindex.core import yamlsafe
from govindex.core.errors import ManifestError
from govindex.core.inputs import quote
from govindex.core.records import SourceManifest

MESSAGE_LIMIT = 200  # characters of a validator's message kept (it may quote the value)
SHOWN_PROBLEMS = 20  # problems listed per document; the rest are counted


def load_manifests(paths: list[Path]) -> list[SourceManifest]:
    """Load every manifest (a file may hold several YAML documents); collect all problems."""
    manifests: list[SourceManifest] = []
    problems: list[str] = []
    for path in paths:
        try:
            docs = yamlsafe.load_all(path.read_text())
        except FileNotFoundError:
            problems.append(f"{path}: no such file")
            continue
        except yamlsafe.YamlRefused as exc:
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
                problems += [f"{where}: {problem}" for problem in _problems(exc)]
    if problems:
        raise ManifestError("\n".join(problems))
    seen: dict[str, SourceManifest] = {}
    for manifest in manifests:
        if manifest.source_id in seen:
            raise ManifestError(f"source_id {quote(manifest.source_id)} is defined twice")
        seen[manifest.source_id] = manifest
    return manifests


def _problems(exc: ValidationError) -> list[str]:
    """Field and problem for each error, the value quoted short (pydantic's own text would
    print the whole input)."""
    errors = exc.errors(include_url=False)
    problems = []
    for err in errors[:SHOWN_PROBLEMS]:
        field = ".".join(str(p) for p in err["loc"]) or "(manifest)"
        message = err["msg"]
        if len(message) > MESSAGE_LIMIT:
            message = f"{message[:MESSAGE_LIMIT]}… ({len(message)} chars)"
        value = "" if err["type"] == "missing" else f" (got {yamlsafe.shown(err.get('input'))})"
        problems.append(f"field {quote(field)}: {message}{value}")
    if len(errors) > SHOWN_PROBLEMS:
        problems.append(f"and {len(errors) - SHOWN_PROBLEMS} more problems")
    return problems
