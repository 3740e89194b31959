"""Hostile input, refused small: quoting an input value in a message, and control characters.

Every message a person reads that names an input value quotes it through `quote`, so a
value of any size prints in about `QUOTE_LIMIT` characters. Wire models refuse control
characters in what they take with the `SINGLE_LINE` / `PLAIN_TEXT` validators (or `Line`).
The rules are defined once, in the client distribution the read API's models come from.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from govindex_client._types import (
    PLAIN_TEXT,
    QUOTE_LIMIT,
    SINGLE_LINE,
    control_at,
    has_control,
    quote,
)

LINE_MAX = 1024

# One line of text: identifiers, names, patterns an operator types.
Line = Annotated[str, Field(min_length=1, max_length=LINE_MAX), SINGLE_LINE]

__all__ = [
    "LINE_MAX",
    "PLAIN_TEXT",
    "QUOTE_LIMIT",
    "SINGLE_LINE",
    "Line",
    "control_at",
    "has_control",
    "quote",
]
