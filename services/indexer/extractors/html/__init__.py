"""HTML pages (wiki exports, static sites, Confluence storage format) to canonical Markdown.

A page goes through one module per stage: `decoding` turns its bytes into text, `parsing`
refuses hostile markup, builds the tree and finds the content, the walk (`walk`,
`confluence`, `walker`, with `tables`) turns what a reader sees into the Markdown blocks
`output` writes, and `common` holds the limits every stage enforces.
"""

from __future__ import annotations

from govindex.core.errors import TooLarge, Unreadable
from indexer.extractors.base import Extracted, Limits, check_size, check_text
from indexer.extractors.html.common import MAX_ATTRIBUTES, MAX_DEPTH, MAX_ELEMENTS, WHAT, too_deep
from indexer.extractors.html.decoding import decode
from indexer.extractors.html.output import escape_line
from indexer.extractors.html.parsing import cdata_as_text, check_attributes, content_roots, parse
from indexer.extractors.html.walker import Walker

__all__ = ["HTML", "MAX_ATTRIBUTES", "MAX_DEPTH", "MAX_ELEMENTS", "HtmlExtractor", "escape_line"]


class HtmlExtractor:
    name = "html"
    version = "1.0.0"
    suffixes: tuple[str, ...] = (".html", ".htm", ".xhtml")
    binary = False

    def extract(self, data: bytes, limits: Limits) -> Extracted:
        check_size(data, limits, WHAT)
        text = decode(data)
        if "\x00" in text:
            raise Unreadable(f"{WHAT} holds NUL characters: it is binary data, not HTML")
        tags = text.count("<") - text.count("</")
        if tags > MAX_ELEMENTS:
            raise TooLarge(
                f"{WHAT} holds {tags:,} tags, over the {MAX_ELEMENTS:,}-element limit; "
                "split the page"
            )
        check_attributes(text)
        if not text.strip():
            return Extracted("")
        root = parse(cdata_as_text(text))
        if root is None:
            return Extracted("")
        roots, in_content = content_roots(root)
        walker = Walker(limits, in_content)
        try:
            for part in roots:
                walker.container(part)
        except RecursionError:
            raise TooLarge(too_deep()) from None
        return Extracted(check_text(walker.out.text(), limits, WHAT))


HTML = HtmlExtractor()
