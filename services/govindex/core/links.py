"""Links a person can open: a chunk's file at its source version, at its lines (pure).

A source manifest's `web_url` is a template with named placeholders, for example

    https://git.example.com/acme/handbook/blob/{revision}/{path}#L{line_start}-L{line_end}

`{revision}` is the source version without its scheme (`git:3f2a…` gives `3f2a…`),
`{source_version}` the whole of it, `{path}` the document id (each segment percent-encoded,
slashes kept), `{line_start}` and `{line_end}` the chunk's first and last lines.
"""

from __future__ import annotations

import string
from urllib.parse import quote

PLACEHOLDERS = frozenset({"revision", "source_version", "path", "line_start", "line_end"})
MAX_TEMPLATE = 1024


def template_problem(template: str) -> str | None:
    """Why `template` is not a usable web_url template; None when it is."""
    if len(template) > MAX_TEMPLATE:
        return f"at most {MAX_TEMPLATE} characters"
    if not template.startswith(("https://", "http://")):
        return "must start with https:// (or http://)"
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in template):
        return "must not hold spaces or control characters"
    try:
        fields = [f for _, f, spec, conv in string.Formatter().parse(template) if f is not None]
        specs = [
            (spec, conv)
            for _, f, spec, conv in string.Formatter().parse(template)
            if f is not None and (spec or conv)
        ]
    except ValueError as exc:
        return f"not a template: {exc}"
    unknown = sorted(set(fields) - PLACEHOLDERS)
    if unknown:
        return f"unknown placeholder {{{unknown[0]}}}; known: " + ", ".join(
            f"{{{p}}}" for p in sorted(PLACEHOLDERS)
        )
    if specs:
        return "placeholders take no format spec or conversion"
    return None


def source_url(
    template: str | None, *, doc_id: str, source_version: str, line_start: int, line_end: int
) -> str | None:
    """The chunk's address from the source's template; None without a (valid) template."""
    if template is None or template_problem(template) is not None:
        return None
    _, _, revision = source_version.rpartition(":")
    return template.format(
        revision=quote(revision, safe=""),
        source_version=quote(source_version, safe=""),
        path=quote(doc_id, safe="/"),
        line_start=line_start,
        line_end=line_end,
    )
