"""Frontmatter, metadata and not a chunk: split off, read by the product's YAML loader (no
aliases) and type-checked field by field (`Frontmatter`) before anything uses it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StrictStr,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from govindex.core import yamlsafe
from govindex.core.errors import InvalidFrontmatter
from govindex.core.inputs import has_control, quote
from govindex.core.records import MAX_EVIDENCE_TYPES, Principal, check_evidence_type

_FRONTMATTER_OPEN = re.compile(r"\A---[ \t]*(?:\r\n|\r|\n)")
_FRONTMATTER_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r\n|\r|\n|\Z)", re.MULTILINE)
FRONTMATTER_NODES = 10_000  # values in a frontmatter block: a few dozen fields at most
LABEL_CHARS = 256  # a title, a type, the name of a service, team or alert
TEXT_CHARS = 1024  # any other field kept as metadata (a summary, a description)
DOC_ID_CHARS = 1024  # a document named by `supersedes` (as long as a doc_id may be)
KEY_CHARS = 64  # a field's name
MAX_FIELDS = 64
MAX_NAMES = 64  # entries of a list of names (services, owners, alerts, superseded ids)
MAX_PRINCIPALS = 256  # entries of `acl`
ZONE_CHARS = 64  # a time zone name (the longest IANA name is about 30)
_FIX = "fix the block between the leading '---' lines"


def split_frontmatter(text: str) -> tuple[dict[str, Any], int]:
    """YAML frontmatter as a dict and the offset where the body starts.

    Frontmatter that is not a YAML mapping is rejected, not ignored: it may carry the ACL,
    and ignoring it would index the document with the wrong access. It is read by the
    product's YAML loader (no anchors or aliases, bounded size and depth); its fields are
    type-checked by `Frontmatter.of` where they are used. Raises InvalidFrontmatter.
    """
    opening = _FRONTMATTER_OPEN.match(text)
    if opening is None:
        return {}, 0
    closing = _FRONTMATTER_CLOSE.search(text, opening.end())
    if closing is None:
        return {}, 0
    raw = text[opening.end() : closing.start()]
    try:
        data = yamlsafe.load(raw, max_nodes=FRONTMATTER_NODES) if raw.strip() else {}
    except yamlsafe.YamlRefused as exc:
        if exc.path:  # refused where it stands: name the field
            line = f" (line {exc.line})" if exc.line else ""
            raise InvalidFrontmatter(
                f"frontmatter field {quote(exc.path)}{line}: {exc.problem}; {_FIX}"
            ) from None
        raise InvalidFrontmatter(f"the YAML frontmatter does not parse: {exc}; {_FIX}") from None
    if not isinstance(data, dict):
        raise InvalidFrontmatter("the frontmatter must be a YAML mapping (key: value lines)")
    return data, closing.end()


# The classifications a source manifest allows (`SourceManifest.classification`).
Classification = Literal["public", "internal", "confidential", "restricted"]


def _one_line(value: str) -> str:
    if has_control(value):
        raise ValueError("holds a line break or a control character; write it on one line")
    return value


def _no_control(value: str) -> str:
    if has_control(value, single_line=False):
        raise ValueError("holds a control character")
    return value


def _listed(limit: int, *, numbers: bool = True) -> BeforeValidator:
    """A field that takes one value or a list of them: one value is a list of one, null an
    empty list, a number a name when `numbers` (`owner: 42`); a list longer than `limit` is
    refused before its items are looked at."""

    def listed(value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str) or (numbers and type(value) is int):
            value = [value]
        if not isinstance(value, list):
            raise ValueError("must be a string or a list of strings")
        if len(value) > limit:
            raise ValueError(f"at most {limit} entries")
        return [str(v) if numbers and type(v) is int else v for v in value]

    return BeforeValidator(listed)


def _not_text(value: Any) -> Any:
    """`title: 1984` or `type: 2` is not a title or a type: left to the heading or the
    path, as it always was (a list or a mapping is refused)."""
    return None if isinstance(value, bool | int | float | date) else value


Label = Annotated[StrictStr, Field(max_length=LABEL_CHARS), AfterValidator(_one_line)]
_Heading = Annotated[Label | None, BeforeValidator(_not_text)]
_DocRef = Annotated[StrictStr, Field(max_length=DOC_ID_CHARS), AfterValidator(_one_line)]
_Principal = Annotated[Principal, Strict(), AfterValidator(_one_line)]
Names = Annotated[tuple[Label, ...], _listed(MAX_NAMES)]
DocRefs = Annotated[tuple[_DocRef, ...], _listed(MAX_NAMES)]
Principals = Annotated[tuple[_Principal, ...], _listed(MAX_PRINCIPALS, numbers=False)]
# Evidence types are refused unless spelled as a pack asks for them (no number, no case).
_EvidenceType = Annotated[StrictStr, Field(max_length=64), AfterValidator(check_evidence_type)]
EvidenceTypes = Annotated[tuple[_EvidenceType, ...], _listed(MAX_EVIDENCE_TYPES, numbers=False)]
Scalar = str | bool | int | float | date | None  # datetime is a date


def _when(value: Any) -> datetime | date | str:
    if isinstance(value, date):
        return value
    if isinstance(value, str) and len(value) <= 64:
        return _one_line(value)
    raise ValueError("must be a date-time with a time zone, e.g. 2025-03-01T00:00:00Z")


def _scalar(value: Any) -> Scalar:
    if isinstance(value, str):
        if len(value) > TEXT_CHARS:
            raise ValueError(f"at most {TEXT_CHARS} characters")
        return _no_control(value)
    if value is None or isinstance(value, bool | int | float | date):
        return value
    raise ValueError("must be text, a number, a boolean or a date")


When = Annotated[datetime | date | str, PlainValidator(_when)]


def _day(value: Any) -> date:
    """`date` says which day a document's bare clock times (`10:02`) are on; a date-time
    says it too, by its date as written (its time is not the day's)."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and len(value) <= 64:
        try:
            return datetime.fromisoformat(value).date()
        except ValueError:
            pass
    raise ValueError("must be a date, e.g. 2025-03-01")


# What an IANA zone name is made of. No dot: the name is a path into the zone database,
# so `..`, a file of the database itself (`zone.tab`) or an absolute path never reach it.
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*")


def _zone(value: str) -> str:
    """A zone the time zone database knows, so that every reader converts times alike."""
    if _ZONE_NAME.fullmatch(value):
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # unknown, a folder, not a zone
            pass
        else:
            return value
    raise ValueError("must be an IANA time zone name, e.g. Europe/Berlin or UTC")


Day = Annotated[date, PlainValidator(_day)]
Zone = Annotated[StrictStr, Field(max_length=ZONE_CHARS), AfterValidator(_zone)]
_AWARE: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)


def _is_container(value: object) -> bool:
    return isinstance(value, dict | list | set | tuple)


class Frontmatter(BaseModel):
    """What a document says about itself, type-checked once: every consumer (stamping,
    graph, metadata) reads these fields, never the raw YAML.

    Known fields have their own types; any other field is kept, as written, when it is a
    scalar (`scalars` holds every scalar field, the known ones included: it is what becomes
    document metadata). A list or mapping under another name is left out, as it always
    was (nothing reads it, and the loader bounded its size); `left_out` names it, so that a
    source whose `valid_time_field` points there is told so rather than ignored.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: _Heading = None
    type: _Heading = None
    classification: Classification | None = None
    acl: Principals | None = None  # None: not said; () said empty, which is refused later
    valid_from: When | None = None
    valid_to: When | None = None
    event_time: When | None = None  # when the business event the document records happened
    date: Day | None = None  # the day its bare clock times (a timeline's `10:02`) are on
    timezone: Zone | None = None  # the IANA zone they are written in
    service: Names = ()
    services: Names = ()
    applies_to: Names = ()
    owner: Names = ()
    alerts: Names = ()
    depends_on: Names = ()  # services the document's service (or the document) calls
    deployed_as: Names = ()  # deployments (ids) of the document's service it records
    supersedes: DocRefs = ()
    evidence: EvidenceTypes = ()  # what every chunk of the document can support
    supports_claims: EvidenceTypes = ()  # the claims it backs, stamped as evidence types
    scalars: dict[str, Annotated[Scalar, PlainValidator(_scalar)]] = Field(default_factory=dict)
    left_out: tuple[str, ...] = ()  # other fields holding a list or a mapping

    @model_validator(mode="before")
    @classmethod
    def _spread(cls, raw: Any) -> Any:
        if not isinstance(raw, Mapping):
            return raw
        if len(raw) > MAX_FIELDS:
            raise ValueError(f"{len(raw)} fields, at most {MAX_FIELDS}")
        fields: dict[str, Any] = {}
        for key, value in raw.items():
            name = str(key)
            if len(name) > KEY_CHARS or has_control(name):
                raise ValueError(
                    f"field name {quote(name, KEY_CHARS)} is not a short one-line name"
                )
            fields[name] = value
        known = {k: v for k, v in fields.items() if k in _KNOWN}
        if "acl" in known and known["acl"] is None:
            known["acl"] = []  # `acl:` with nothing after it says empty, not absent
        scalars = {k: v for k, v in fields.items() if not _is_container(v)}
        left_out = tuple(k for k, v in fields.items() if _is_container(v) and k not in _KNOWN)
        return {**known, "scalars": scalars, "left_out": left_out}

    @model_validator(mode="after")
    def _evidence_bounded(self) -> Frontmatter:
        if len(types := self.evidence_types()) > MAX_EVIDENCE_TYPES:
            raise ValueError(
                f"'evidence' and 'supports_claims' name {len(types)} evidence types, at most "
                f"{MAX_EVIDENCE_TYPES} per document"
            )
        return self

    def evidence_types(self) -> tuple[str, ...]:
        """The evidence types the document says each of its chunks supports, sorted."""
        return tuple(sorted({*self.evidence, *self.supports_claims}))

    @classmethod
    def of(cls, raw: Frontmatter | Mapping[str, Any]) -> Frontmatter:
        """Frontmatter from a parsed mapping (itself if it already is); InvalidFrontmatter
        naming each refused field."""
        if isinstance(raw, Frontmatter):
            return raw
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise _refusal(exc) from None

    def time(self, name: str) -> datetime | None:
        """Field `name` as a time-zone-aware date-time (None when absent or null); a
        source's `valid_time_field` may name any field, so any field may be asked for."""
        if name in self.left_out:
            got = "a list or a mapping"
        else:
            raw: Any = getattr(self, name) if name in _TIMES else self.scalars.get(name)
            if raw is None:
                return None
            try:
                return _AWARE.validate_python(raw if isinstance(raw, datetime) else str(raw))
            except ValidationError:
                got = yamlsafe.shown(raw)
        raise InvalidFrontmatter(
            f"frontmatter field {quote(name)} must be a date-time with a time zone, e.g. "
            f"2025-03-01T00:00:00Z; got {got}"
        )

    def metadata(self) -> dict[str, str]:
        """Scalar fields as document metadata (ACL and dates are stamped apart)."""
        return {
            k: str(v)
            for k, v in self.scalars.items()
            if k not in _STAMPED and isinstance(v, str | int | float | bool)
        }


# What consumers take: the model, or a parsed mapping they check through `Frontmatter.of`.
FrontmatterLike = Frontmatter | Mapping[str, Any]
_KNOWN = frozenset(Frontmatter.model_fields) - {"scalars", "left_out"}
_TIMES = frozenset(("valid_from", "valid_to", "event_time"))
_STAMPED = frozenset(("acl", "valid_from", "valid_to", "event_time"))
_SHOWN_PROBLEMS = 5


def _refusal(exc: ValidationError) -> InvalidFrontmatter:
    """Field and problem for each refusal (the first few), each value quoted short."""
    problems: dict[str, str] = {}  # one per field: a known field is also checked as a scalar
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        if loc[:1] == ["scalars"]:
            loc = loc[1:]
        message = err["msg"].removeprefix("Value error, ")
        if not loc:  # the block as a whole (too many fields, a field name too long)
            problems.setdefault("", message)
            continue
        field = loc[0] + "".join(f"[{p}]" for p in loc[1:])
        got = yamlsafe.shown(err["input"])
        problems.setdefault(loc[0], f"field {quote(field)}: {message} (got {got})")
    shown = list(problems.values())[:_SHOWN_PROBLEMS]
    more = len(problems) - len(shown)
    return InvalidFrontmatter(
        f"frontmatter {'; '.join(shown)}{f'; and {more} more' if more else ''}; {_FIX}"
    )
