"""A page's text as an lxml tree, after the checks that keep hostile markup from the
parser, and the part of the tree that holds the page's content.

Why lxml (libxml2's HTML parser, BSD-3-Clause): it honours `/>` on unknown elements, so
storage format's self-closing `<ac:structured-macro ac:name="toc"/>` or `<ri:page …/>`
stays empty, where an HTML5 tree builder (selectolax/lexbor, html5lib) keeps it open and
swallows the rest of the page into it; one parser reads HTML, XHTML and storage format
alike; it is a C parser (selectolax parses somewhat faster, but walking the tree in Python
costs more than either parse); python-docx and python-pptx need it anyway. Not
trafilatura: its boilerplate removal is a scoring heuristic whose choices depend on the
page (it drops or keeps tables and code by their text density); these rules say exactly
what is dropped, and the same bytes always give the same text.

Hostile input stays bounded. The HTML parser knows no DTD: an entity declaration is text,
never expanded, and nothing is fetched. `huge_tree` stays off, so libxml2 stops at 256
levels of nesting and at a 10 MB text run, and such a stop is refused as too large rather
than read as a cut-short page; past MAX_DEPTH levels, MAX_ELEMENTS tags, MAX_ATTRIBUTES
attributes on one element (libxml2 checks them pairwise), `max_cells` table cells or
`max_text_chars` of text the page is refused too, before the text is built.
"""

from __future__ import annotations

import itertools
import re

from lxml import etree

from govindex.core.errors import TooLarge, Unreadable
from indexer.extractors.html.common import MAX_ATTRIBUTES, WHAT, too_deep


def cdata_as_text(text: str) -> str:
    """CDATA sections (XHTML, Confluence's code and link bodies) as escaped text: an HTML
    parser reads `<![CDATA[` as a comment that ends at the first `>`. Linear: one scan."""
    start = text.find("<![CDATA[")
    if start < 0:
        return text
    out: list[str] = []
    at = 0
    while start >= 0:
        out.append(text[at:start])
        body_start = start + 9
        end = text.find("]]>", body_start)
        body = text[body_start:] if end < 0 else text[body_start:end]
        out.append(body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
        if end < 0:
            return "".join(out)
        at = end + 3
        start = text.find("<![CDATA[", at)
    out.append(text[at:])
    return "".join(out)


# A piece of a start tag: a character outside quotes, or a whole quoted value (so a long
# data: URI is one piece). Every attribute takes at least two (a separator and a name), so a
# tag of more than MAX_ATTRIBUTES attributes has more than twice as many pieces.
_PIECE = r"""(?:[^>"']|"[^"]*"|'[^']*')"""
_LONG = 2 * MAX_ATTRIBUTES + 1
_LONG_TAG = re.compile(rf"<[A-Za-z][^\s/>]*{_PIECE}{{{_LONG},}}")
_ANY_TAG = re.compile(rf"<[A-Za-z][^\s/>]*(?:({_PIECE}{{{_LONG},}})|{_PIECE}*)")
_ATTRIBUTE = re.compile(r"""[^\s"'=/>]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]*))?""")
# Where `<` starts no tag: raw-text elements and comments (unclosed: to the end, as parsed).
_RAW_TEXT = re.compile(
    r"<(script|style|textarea|title|xmp|iframe|noembed|noframes)\b.*?(?:</\1\s*>|\Z)"
    r"|<!--.*?(?:-->|\Z)",
    re.DOTALL | re.IGNORECASE,
)


def check_attributes(text: str) -> None:
    """Refuses a page with an element of more than MAX_ATTRIBUTES attributes. A first scan
    looks for a start tag that long anywhere (cheap, and it finds none in a real page); only
    then are the tags read in order, as a parser does (a `<` inside a quoted value or a
    script starts none), and the long ones' attributes counted."""
    if _LONG_TAG.search(text) is None:
        return
    for tag in _ANY_TAG.finditer(_RAW_TEXT.sub(" ", text)):
        pieces = tag.group(1)
        if pieces is None:
            continue
        found = _ATTRIBUTE.finditer(pieces)
        if sum(1 for _ in itertools.islice(found, MAX_ATTRIBUTES + 1)) > MAX_ATTRIBUTES:
            raise TooLarge(
                f"{WHAT} has an element with more than {MAX_ATTRIBUTES:,} attributes, over "
                f"the {MAX_ATTRIBUTES:,}-attribute limit; it is not a page a reader can follow"
            )


def parse(text: str) -> etree._Element | None:
    parser = etree.HTMLParser(
        encoding="utf-8",
        remove_comments=True,
        remove_pis=True,
        no_network=True,
        huge_tree=False,  # libxml2's depth and text-run limits stay on
        collect_ids=False,
        compact=True,
    )
    try:
        root = etree.fromstring(text.encode("utf-8"), parser)
    except (etree.LxmlError, ValueError) as exc:
        raise Unreadable(f"{WHAT} cannot be parsed as HTML ({str(exc)[:200]})") from None
    for error in parser.error_log.filter_from_fatals():
        if error.type == etree.ErrorTypes.ERR_RESOURCE_LIMIT:
            if "depth" in error.message.lower():
                raise TooLarge(too_deep())
            raise TooLarge(
                f"{WHAT} holds a text run or attribute value longer than the HTML parser's "
                "10,000,000-byte limit; split the page"
            )
        raise Unreadable(f"{WHAT} cannot be parsed as HTML ({error.message.strip()[:200]})")
    return root


def content_roots(root: etree._Element) -> tuple[list[etree._Element], bool]:
    """The page's `<main>`, else its outermost articles, else its body; and whether the
    page said where its content is (then a `<header>` in it is the content's own)."""
    found = root.xpath("(//main | //*[@role='main'])[1]")
    if not (isinstance(found, list) and found):
        found = root.xpath("//article[not(ancestor::article)]")
    if isinstance(found, list):
        elements = [e for e in found if isinstance(e, etree._Element)]
        if elements:
            return elements, True
    body = root.find("body")
    return [body if body is not None else root], False
