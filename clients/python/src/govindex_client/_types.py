"""The value rules the read API's wire models share with the server: identifiers, principals,
chunk kinds, and refusing control characters (with a bounded quote of the value refused).

The server validates with these very definitions (`reader.models` re-exports the models
built on them), so a value the client accepts is one the server accepts.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

# Identifiers end up in Kafka keys (`tenant/source/doc`), index ids and URLs: no slashes in
# tenant and source ids, no control characters anywhere.
SLUG = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
Slug = Annotated[str, Field(pattern=SLUG)]
# No whitespace, commas or control characters (NUL would reach Postgres text and fail there).
PRINCIPAL = r"^[^\s,\x00-\x1f\x7f-\x9f]+$"
Principal = Annotated[str, Field(min_length=1, max_length=256, pattern=PRINCIPAL)]


class ChunkKind(StrEnum):
    """What part of a document's structure a chunk is."""

    PREAMBLE = "preamble"
    SECTION = "section"
    STEP = "step"
    CLAUSE = "clause"
    TIMELINE_ENTRY = "timeline_entry"
    FINDING = "finding"
    ROOT_CAUSE = "root_cause"
    ACTION_ITEM = "action_item"
    ROW_GROUP = "row_group"
    FUNCTION = "function"
    CLASS = "class"
    MODULE = "module"
    KEY = "key"
    RESOURCE = "resource"
    BLOCK = "block"
    PARAGRAPH = "paragraph"
    FACT = "fact"  # one entry of a structured source a fact mapping reads


# An evidence type a chunk can support (deployment_record, root_cause, …): one rule for the
# chunks' stamps and the requests that ask for them.
EVIDENCE_TYPE = r"[a-z][a-z0-9_-]{0,63}"

QUOTE_LIMIT = 120

# C0 controls (NUL included) but tab, newline and carriage return; DEL; C1 controls.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Identifiers, principals, labels: one line, so no line breaks or tabs either.
CONTROL_OR_BREAK = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """`repr` of a value, cut to about `limit` characters with the full length said.

    Builds at most `limit` characters of the value's text: a huge string is never copied
    whole into a message (a container is `repr`-ed, which its own size bounds).
    """
    if isinstance(value, str):
        text = value if len(value) <= limit else value[:limit]
        shown = repr(text)
        return shown if len(value) <= limit else f"{shown[:-1]}…{shown[-1]} ({len(value)} chars)"
    shown = repr(value)
    return shown if len(shown) <= limit else f"{shown[:limit]}… ({len(shown)} chars)"


def has_control(value: str, *, single_line: bool = True) -> bool:
    """Whether `value` holds a control character (also a line break when `single_line`)."""
    return control_at(value, single_line=single_line) is not None


def control_at(value: str, *, single_line: bool = True) -> int | None:
    """Where the first control character of `value` is (see `has_control`), or None."""
    found = (CONTROL_OR_BREAK if single_line else CONTROL).search(value)
    return None if found is None else found.start()


def _refuse_control(value: str, single_line: bool) -> str:
    at = control_at(value, single_line=single_line)
    if at is None:
        return value
    what = "a control character or line break" if single_line else "a control character"
    # The reason is passed as context, not as the template: braces in a value stay text.
    raise PydanticCustomError(
        "control_character",
        "{reason}",
        {"reason": f"{what} (U+{ord(value[at]):04X}) at position {at} of {quote(value)}"},
    )


def _one_line(value: str) -> str:
    return _refuse_control(value, single_line=True)


def _text(value: str) -> str:
    return _refuse_control(value, single_line=False)


# Metadata for an `Annotated[str, Field(...), SINGLE_LINE]`: put it after the length bound,
# so a huge value is refused by its length before it is scanned.
SINGLE_LINE = AfterValidator(_one_line)
# The same for free text: tabs and line breaks allowed, other control characters refused.
PLAIN_TEXT = AfterValidator(_text)


# The relation vocabulary: each relation an edge is stored as, read from its subject to its
# object, and the name of the same edge read the other way (None: the same name, `in`).
# A request may name either; an edge is stored once.
RELATIONS: dict[str, str | None] = {
    "OWNED_BY": "OWNS",  # service or document -> team
    "GOVERNS": "GOVERNED_BY",  # runbook -> service
    "APPLIES_TO": None,  # policy -> service
    "AFFECTED": "AFFECTED_BY",  # incident -> service
    "DEPLOYED_AS": None,  # service -> deployment
    "DEPENDS_ON": None,  # service -> service
    "SUPERSEDES": "SUPERSEDED_BY",  # document -> document
    "FIRES": "FIRED_BY",  # service -> alert
    "ABOUT": None,  # document -> anything it is about
}
# A graph path template's name (the templates are the server's: `graph.templates` names
# them), and how many one request may name.
GRAPH_TEMPLATE = r"^[a-z0-9][a-z0-9_-]{0,63}$"
MAX_GRAPH_TEMPLATES = 16
# Relations a subject holds one object of at a time: two at once contradict each other.
SINGLE_VALUED = frozenset({"OWNED_BY"})
INVERSES: dict[str, str] = {inverse: name for name, inverse in RELATIONS.items() if inverse}
RELATION_NAMES = frozenset(RELATIONS) | frozenset(INVERSES)


def stored_relation(name: str) -> tuple[str, bool]:
    """The stored relation a name reads, and whether it reads it backwards (an inverse)."""
    if name in RELATIONS:
        return name, False
    if name in INVERSES:
        return INVERSES[name], True
    raise ValueError(f"unknown relation {quote(name)}; known: " + ", ".join(sorted(RELATION_NAMES)))
