"""The core of the tree walk that the Confluence and HTML element handling build on:
document order, inline text gathered into paragraphs, what a reader never sees dropped,
inline code and bold, and code blocks.

Only content is kept. A page with a `<main>` (or `role="main"`) is read from it alone;
else its outermost `<article>`s; else its body, where `<header>` is site chrome too.
Navigation, `aside`, `footer`, scripts, styles, `noscript`, `template`, `svg`, forms,
embedded media, hidden elements (`hidden`, `aria-hidden`, `display: none`) and boilerplate
(ARIA landmarks of the site, classes and ids like nav, menu, breadcrumb, sidebar, footer,
cookie, toc, edit-section links) are dropped.
"""

from __future__ import annotations

import re

from lxml import etree

from govindex.core.errors import TooLarge
from indexer.extractors.base import Limits
from indexer.extractors.html.common import MAX_DEPTH, too_deep
from indexer.extractors.html.output import Output, escape_line

_DROP = frozenset(
    (  # noqa: SIM905 (grouped by kind, which a list literal would scatter)
        "head title meta link base style script noscript template svg canvas "
        "iframe frame frameset noframes object embed applet audio video map area "
        "form button input select option optgroup textarea datalist output dialog "
        "nav aside footer search "
        "ac:parameter ac:placeholder ac:emoticon ac:task-id ac:task-uuid ac:task-status "
        "ac:adf-fallback ac:adf-attribute at:declarations at:var"
    ).split()
)
_CHROME_ROLES = frozenset(
    (  # noqa: SIM905
        "navigation banner contentinfo complementary search menu menubar toolbar dialog alertdialog"
    ).split()
)
_BOILER_START = ("nav", "menu", "breadcrumb", "sidebar", "footer", "cookie")
_BOILER_END = ("nav", "menu", "sidebar", "footer")
_BOILER_EXACT = frozenset(
    ("toc", "catlinks", "editsection", "noprint", "skip", "jump", "headerlink", "linenos")
)
_STATE_WORDS = frozenset(("has", "with", "no", "is", "show", "hide", "open", "toggle"))
_NEVER_CHROME = frozenset(("html", "body", "main"))  # their classes are page states
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_INFO = re.compile(r"[^A-Za-z0-9_+#.-]")
_BACKTICKS = re.compile(r"`+")


class BaseWalker:
    """Walks the tree in document order. Inline content gathers in `para` (None is a line
    break) until a block starts or its container ends; inside a table cell, a heading or a
    definition (`flat` > 0) blocks are only word breaks and everything is one line."""

    def __init__(self, limits: Limits, in_content: bool) -> None:
        self.limits = limits
        self.out = Output(limits)
        self.para: list[str | None] = []
        self.flat = 0
        self.depth = 0
        self.in_content = in_content
        self._boiler: dict[str, bool] = {}

    # structure

    def container(self, el: etree._Element) -> None:
        self.flush()
        self.content(el)
        self.flush()

    def content(self, el: etree._Element) -> None:
        if el.text:
            self.para.append(el.text)
        for child in el:
            self.node(child)
            if child.tail:
                self.para.append(child.tail)

    def node(self, el: etree._Element) -> None:
        tag = el.tag
        if not isinstance(tag, str) or self._dropped(el, tag):
            return
        self._enter()
        try:
            self._dispatch(el, tag)
        finally:
            self.depth -= 1

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooLarge(too_deep())

    def _dispatch(self, el: etree._Element, tag: str) -> None:
        """What an element becomes, by its tag: `Walker` decides."""
        raise NotImplementedError

    def _dropped(self, el: etree._Element, tag: str) -> bool:
        if tag in _DROP:
            return True
        if tag.startswith("ri:"):
            return True  # resource identifiers: no text of their own
        attrib = el.attrib
        if not attrib or tag in _NEVER_CHROME:
            return False
        if "hidden" in attrib or attrib.get("aria-hidden") == "true":
            return True
        style = attrib.get("style")
        if style and _HIDDEN_STYLE.search(style):
            return True
        role = attrib.get("role")
        if role and role.lower() in _CHROME_ROLES and not (role == "banner" and self.in_content):
            return True
        for value in (attrib.get("class"), attrib.get("id")):
            if value and self._boilerplate(value):
                return True
        return False

    def _boilerplate(self, value: str) -> bool:
        known = self._boiler.get(value)
        if known is None:
            known = self._boiler[value] = any(_boiler_token(t) for t in value.lower().split())
        return known

    def flush(self) -> None:
        """The gathered inline content as a paragraph (or, between `<br><br>`, two)."""
        if self.flat:
            self.para.append(" ")
            return
        if not self.para:
            return
        pieces, self.para = self.para, []
        lines: list[str] = []
        current: list[str] = []
        for piece in pieces:
            if piece is None:
                lines.append(" ".join("".join(current).split()))
                current = []
            else:
                current.append(piece)
        lines.append(" ".join("".join(current).split()))
        paragraph: list[str] = []
        for line in lines:
            if line:
                paragraph.append(escape_line(line))
            elif paragraph:
                self.out.block(paragraph)
                paragraph = []
        if paragraph:
            self.out.block(paragraph)

    def flat_text(self, el: etree._Element) -> str:
        """An element's text on one line, whitespace collapsed."""
        saved, self.para = self.para, []
        self.flat += 1
        try:
            self.content(el)
        finally:
            self.flat -= 1
            pieces, self.para = self.para, saved
        return " ".join("".join(p if p is not None else " " for p in pieces).split())

    # inline

    def _words(self, text: str) -> None:
        if text:
            self.para.append(f" {text} " if self.flat else text)

    def _bold(self, text: str) -> None:
        core = text.strip()
        if not core:
            self.para.append(text)
            return
        lead = " " if text[:1].isspace() else ""
        trail = " " if text[-1:].isspace() else ""
        self.para.append(f"{lead}**{core}**{trail}")

    def _inline_code(self, el: etree._Element) -> None:
        raw = "".join(el.itertext())
        code = " ".join(raw.split())
        if not code:
            self.para.append(raw)
            return
        fence = "`" * (max((len(m) for m in _BACKTICKS.findall(code)), default=0) + 1)
        pad = " " if code.startswith("`") or code.endswith("`") else ""
        lead = " " if raw[:1].isspace() else ""
        trail = " " if raw[-1:].isspace() else ""
        self.para.append(f"{lead}{fence}{pad}{code}{pad}{fence}{trail}")

    # blocks

    def _code_block(self, language: str, code: str) -> None:
        code = code.replace("\r\n", "\n").replace("\r", "\n")
        if code.startswith("\n"):
            code = code[1:]
        code = code.rstrip()
        if not code.strip():
            return
        if self.flat:
            self._words(code)
            return
        self.flush()
        fence = "`" * max(3, max((len(m) for m in _BACKTICKS.findall(code)), default=0) + 1)
        info = _INFO.sub("", language)[:40]
        self.out.need(len(code))
        self.out.block([fence + info, *code.split("\n"), fence])


def _boiler_token(token: str) -> bool:
    """Whether one class or id names site chrome: a part of it (split at `-` and `_`) is,
    begins or ends with nav, menu, breadcrumb, sidebar, footer or cookie, or is toc,
    catlinks, editsection, noprint, skip or jump; a layout state (`has-sidebar`,
    `with-nav`) is not chrome itself."""
    parts = [p for p in re.split(r"[-_]", token) if p]
    if any(p in _STATE_WORDS for p in parts):
        return False
    return any(
        p in _BOILER_EXACT or p.startswith(_BOILER_START) or p.endswith(_BOILER_END) for p in parts
    )
