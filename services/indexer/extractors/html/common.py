"""The limits an HTML page is held to, and the small helpers every stage of its extraction
shares: they sit below the stages (decoding, parsing, the walk, tables) so that each
imports them and none imports another for them.
"""

from __future__ import annotations

WHAT = "the HTML file"
# libxml2's tree costs about 150 bytes an element: two million keep a page under ~300 MB,
# well inside the extraction sandbox's address space; a real page has a few thousand.
MAX_ELEMENTS = 2_000_000
# libxml2's HTML parser compares each attribute of an element with all the ones before it:
# 20,000 on one element cost a second, 200,000 several minutes, and pages of elements with
# 2,000 each parse at 2 MB/s. Real elements have a few (a few dozen with data- attributes).
MAX_ATTRIBUTES = 200
# Nesting deeper than this is a bomb, not a page (real pages stay under ~50 levels); it
# also keeps the tree walk's recursion far from Python's limit.
MAX_DEPTH = 128


def too_deep() -> str:
    return (
        f"{WHAT} nests elements more than {MAX_DEPTH} levels deep, over the {MAX_DEPTH}-level "
        "limit; it is not a page a reader can follow"
    )


def as_int(value: str | None, default: int) -> int:
    if value is None:
        return default
    value = value.strip()
    if not value or len(value) > 12:
        return default
    try:
        return int(value)
    except ValueError:
        return default
