"""Source manifests for `govindex source apply` and `source init`: every file checked before
it is parsed, every problem in plain words naming the file and the field, and the
commented manifest `source init` writes.

The loader is the product's (`govindex.core.manifests`); this only rephrases what it says
where a library's words would leak through (a duration "day identifier", a regex, YAML's
`<unicode string>`), and refuses what it would not read (a folder, a file that is not
UTF-8) with the reason instead of a traceback.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from govindex.cli.common import Failure

if TYPE_CHECKING:
    from pydantic import BaseModel

    from govindex.core.records import SourceManifest

MANIFEST_DOCS = "docs/reference/manifest.md"
DURATION = (
    "expected a duration: ISO 8601 like PT1H, PT30M, P1D or P365D, or hours:minutes:seconds "
    "like 1:00:00"
)
# What pydantic says (left) and what a person reads (right); the rest of a message is kept.
_PLAIN: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^Input should be a valid timedelta(?:,.*)?$"), DURATION),
    (re.compile(r"^Value error, "), ""),
    (re.compile(r"^Input should be a valid list$"), "should be a list, e.g. [a, b]"),
    (re.compile(r"^Input should be a valid boolean.*$"), "should be true or false"),
    (re.compile(r"^Input should be a valid string$"), "should be text"),
    (
        re.compile(r"^Input should be a valid (?:integer|number).*$"),
        "should be a number",
    ),
    (re.compile(r"^Input should be a valid dictionary.*$"), "should be a mapping of fields"),
    (re.compile(r"^String should have at least 1 character$"), "should not be empty"),
    (
        re.compile(r"^List should have at least 1 item after validation, not 0$"),
        "should list at least one item",
    ),
    (
        re.compile(r"^String should match pattern '\^\[A-Za-z0-9\]\[A-Za-z0-9\._-\]\{0,127\}\$'$"),
        "should be an id: letters, digits, '.', '_' or '-', at most 128 characters, "
        "starting with a letter or a digit",
    ),
    (
        re.compile(r"^String should match pattern '\^\[\^\\s,.*$"),
        "should be a principal such as group:eng or user:dana (no spaces, commas or "
        "control characters)",
    ),
    (
        re.compile(r"^String should match pattern '\^\[A-Z_\]\[A-Z0-9_\]\*\$'$"),
        "should be the name of an environment variable (A-Z, 0-9 and _)",
    ),
    (re.compile(r"^Input should be "), "should be "),  # 'git', 'folder' or 'cdc'; 1; ...
)
_PROBLEM = re.compile(r"^field '(?P<field>[^']*)': (?P<message>.*?)(?P<got> \(got .*\))?$")
_YAML_POSITION = re.compile(r' in "<unicode string>", position (?P<at>\d+)')


def load(files: list[Path]) -> list[SourceManifest]:
    """The manifests of `files`, or a Failure listing every problem of every file."""
    from govindex.core.errors import ManifestError
    from govindex.core.manifests import load_manifests

    found: list[tuple[int, str]] = []  # (the file's position, the problem)
    texts: dict[str, str] = {}
    readable: list[Path] = []
    for position, path in enumerate(files):
        text, problem = _read(path)
        if problem is not None:
            found.append((position, f"{path}: {problem}"))
        else:
            texts[str(path)] = text
            readable.append(path)
    manifests: list[SourceManifest] = []
    try:
        manifests = load_manifests(readable) if readable else []
    except ManifestError as exc:
        order = {str(path): n for n, path in enumerate(files)}
        for line in str(exc).splitlines():
            where = _file_of(line, texts)
            found.append((order.get(where, len(files)), plain_problem(line, texts)))
    problems = [problem for _, problem in sorted(found, key=lambda item: item[0])]
    if problems:
        if any("Field required" in p for p in problems):
            problems.append(
                "(`govindex source init --type git|folder|cdc FILE` writes a manifest with every "
                f"required field; {MANIFEST_DOCS} describes each)"
            )
        raise Failure("\n".join(problems))
    return manifests


def _read(path: Path) -> tuple[str, str | None]:
    """The file's text, or why it cannot be a manifest (None: the loader says it)."""
    if path.is_dir():
        return "", f"is a folder; give the manifest files in it, e.g. {path}/*.yaml"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return "", "no such file"
    except OSError as exc:
        return "", f"cannot be read ({exc.strerror or exc.__class__.__name__})"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return "", f"is not UTF-8 text (line {line}, byte {exc.start + 1}); save it as UTF-8"
    if not text.strip():
        return "", "is empty; `govindex source init FILE` writes a manifest to start from"
    return text, None


def _file_of(line: str, texts: dict[str, str]) -> str:
    """The file a problem of the loader names first ("" when it names none)."""
    return max((name for name in texts if line.startswith(name)), key=len, default="")


def plain_problem(line: str, texts: dict[str, str]) -> str:
    """One problem of the loader (`FILE: field 'f': message (got V)`) in plain words."""
    where = _file_of(line, texts)
    rest = line[len(where) :]
    if where and (position := _YAML_POSITION.search(rest)):
        text = texts[where]
        at = min(int(position["at"]), len(text))
        line_no = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        rest = rest.replace(position.group(0), f" (line {line_no}, column {column})")
    rest = rest.replace('"<unicode string>"', "the file")
    label, sep, problem = rest.partition(": ")
    found = _PROBLEM.match(problem) if sep else None
    if found is None:
        return f"{where}{rest}"
    message = plain_message(found["message"], found["field"])
    return f"{where}{label}{sep}field '{found['field']}': {message}{found['got'] or ''}"


def plain_message(message: str, field: str) -> str:
    """A validator's message in plain words (the first rule that matches rewrites it)."""
    if message == "Extra inputs are not permitted":
        return _unknown_field(field)
    for pattern, replacement in _PLAIN:
        if pattern.search(message):
            return pattern.sub(replacement, message)
    return message


def _unknown_field(field: str) -> str:
    """Why a field is refused, with the closest field of its section when one is close."""
    section, _, name = field.rpartition(".")
    model = _section_model(section)
    known = list(model.model_fields) if model is not None else []
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    suggestion = f"; did you mean {close[0]!r}?" if close else ""
    of = f"its `{section}` section" if section else "a manifest"
    return f"not a field of {of}{suggestion} ({MANIFEST_DOCS} lists every field)"


def _section_model(section: str) -> type[BaseModel] | None:
    from govindex.core.records import CdcSettings, FolderSettings, GitSettings, SourceManifest

    models: dict[str, type[BaseModel]] = {
        "": SourceManifest,
        "git": GitSettings,
        "folder": FolderSettings,
        "cdc": CdcSettings,
    }
    return models.get(section)


# --- `govindex source init` -------------------------------------------------------------

TYPES = ("git", "folder", "cdc")
DEFAULT_IDS = {"git": "handbook", "folder": "notes", "cdc": "runbooks-db"}

_HEAD = """\
# A govindex source manifest: where documents come from, who owns them, who may see them,
# for which purposes, how far their text is trusted and what a deletion does.
# Every field: {docs}. Lines marked CHANGE need a value of your own.
#   check it:    govindex source apply --check {file}
#   register it: govindex source apply {file}
source_id: {source_id}{pad_id}# unique per tenant; part of every document key
tenant: {tenant}{pad_tenant}# CHANGE: the tenant the documents belong to
source_type: {source_type}{pad_type}# {how}
owner_team: platform                 # CHANGE: the team that owns these documents
classification: internal             # public, internal, confidential or restricted
# Who may see a document that names no ACL of its own (in its frontmatter or row); without
# it such a document is refused, never indexed as public.
default_acl: ["group:eng"]           # CHANGE: principals, e.g. group:sre or user:dana
allowed_purposes: [support]          # a read's --purpose must be one of these
trust_level: reviewed                # authoritative, reviewed or untrusted
deletion_mode: tombstone_and_purge   # or tombstone: keep history for as_of questions
refresh_sla: PT24H                   # how often to reconcile: PT1H, P1D (ISO 8601 durations)
history_retention: P365D             # how long superseded versions keep their text
parser: {parser}{pad_parser}# auto: by file type; or markdown, text, csv, yaml, ...
"""

_TAILS = {
    "git": """\
# Where the repository lives, for webhooks and `govindex reconcile` (`govindex ingest git`
# does not need it): uncomment, and CHANGE the provider's full name (org/repo), the clone
# URL (or a local path) and the branch. `include` takes .gitignore-style patterns (default:
# every type govindex reads).
# git:
#   repository: acme/{source_id}
#   remote_url: https://git.example.com/acme/{source_id}.git
#   branch: main
#   include: ["*.md"]
""",
    "folder": """\
# Where the folder lives, so `govindex reconcile` and `govindex up` can read it again
# (`govindex ingest path` does not need it): uncomment, and CHANGE the path (absolute, or
# relative to where the workers run). `include` takes .gitignore-style patterns (default:
# every type govindex reads).
# folder:
#   path: /srv/{source_id}
#   include: ["*.md"]
""",
    "cdc": """\
# The table whose rows become documents, as Debezium publishes its changes
# (docs/sources/debezium.md). Every value below is a placeholder: CHANGE them all.
cdc:
  topic: dbserver1.public.runbooks     # CHANGE: the Debezium topic of the table
  table: public.runbooks               # CHANGE: schema.table
  id_columns: [id]                     # CHANGE: the primary key column(s)
  text_columns: [title, body]          # CHANGE: the columns that hold the text
  text_template: "# {{title}}\\n\\n{{body}}"  # CHANGE: or leave it out to join text_columns
  # acl_column: readers                # a column listing each row's principals
  # valid_from_column: published_at    # a column holding when a row becomes valid
""",
}
_HOW = {
    "git": "ingest: govindex ingest git REPO --source {source_id}",
    "folder": "ingest: govindex ingest path DIR --source {source_id}",
    "cdc": "fed by Debezium change events (docs/sources/debezium.md)",
}


def _pad(value: str, width: int) -> str:
    """Spaces after a value so that the comments after it line up."""
    return " " * max(1, width - len(value))


def template(source_type: str, source_id: str, tenant: str, file: str) -> str:
    """The commented manifest of a new source; it passes `source apply --check` as it is."""
    head = _HEAD.format(
        docs=MANIFEST_DOCS,
        file=file,
        source_id=source_id,
        pad_id=_pad(source_id, 26),
        tenant=tenant,
        pad_tenant=_pad(tenant, 29),
        source_type=source_type,
        pad_type=_pad(source_type, 24),
        how=_HOW[source_type].format(source_id=source_id),
        parser="markdown" if source_type == "cdc" else "auto",
        pad_parser=_pad("markdown" if source_type == "cdc" else "auto", 29),
    )
    return head + _TAILS[source_type].format(source_id=source_id)


def check_template(text: str) -> SourceManifest:
    """The manifest a template describes, validated as `source apply --check` would."""
    from pydantic import ValidationError

    from govindex.core import yamlsafe
    from govindex.core.records import SourceManifest

    try:
        return SourceManifest.model_validate(yamlsafe.load(text))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"])
        option = {"source_id": "--id", "tenant": "--tenant"}.get(field, field)
        raise Failure(f"{option}: {plain_message(first['msg'], field)}") from None
