"""The walk from an HTML element to the Markdown block it becomes.

What a reader of the page sees becomes Markdown the Markdown parser cuts by structure:
`h1`–`h6` are `#`…`######`, paragraphs stay paragraphs, `ul`/`ol` are `- ` and `1.` lists
(nested by indentation, `start`, `value` and `reversed` kept), tables are GFM pipe tables
(the `thead`, or else the first row, is the header), `pre` is a fenced code block with the
language its classes name, `blockquote` is `> `, `dl` is `**term**: definition` lines,
images are their alt text. Links keep their text only: the canonical text is what is
matched and embedded, and a wiki export's hrefs are mostly site-relative (`/wiki/…`,
`#cite_note-3`), meaningless once out of the site; link syntax would also hide a clause
number or a `**term**` from the parser at the start of a line. Inline `code` keeps its
backticks and `strong`/`b` around plain text their `**`, which the parser reads in
definitions. Whitespace collapses as a browser shows it; page text that Markdown would
read as structure (a line starting `# `, `1. `, `- `, `>`, a fence, `---`) gets a
backslash, so text never becomes a heading, a step or frontmatter, while clause numbers
(`4.1.2`, `§ 4`, `(a)`) stay as written.
"""

from __future__ import annotations

import re

from lxml import etree

from indexer.extractors.html.common import as_int
from indexer.extractors.html.confluence import ConfluenceWalker
from indexer.extractors.html.output import escape_line
from indexer.extractors.html.tables import Table

_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = frozenset(
    (  # noqa: SIM905
        "html body main article section div p address center hgroup figure figcaption "
        "details summary legend fieldset caption dt dd li tr td th tbody thead tfoot "
        "header ac:rich-text-body ac:layout ac:layout-section ac:layout-cell "
        "ac:adf-extension ac:adf-node ac:adf-content ac:task-body"
    ).split()
)
_LISTS = frozenset(("ul", "ol", "menu", "dir"))
_CODE = frozenset(("pre", "listing", "xmp", "plaintext"))
_INLINE_CODE = frozenset(("code", "kbd", "samp", "tt"))
_BOLD = frozenset(("strong", "b"))
_LANGUAGE = re.compile(
    r"(?:^|\s)(?:language-|lang-|highlight-source-|highlight-|mw-highlight-lang-|brush:\s*)"
    r"([A-Za-z0-9_+#.-]+)",
    re.IGNORECASE,
)
_NOT_LANGUAGES = frozenset(("default", "none", "text", "plain", "plaintext", "nohighlight"))


class Walker(ConfluenceWalker):
    """The walk through every element: blocks, lists, code, quotes, definitions and tables
    by their tags, Confluence's elements by theirs, the rest inline in place."""

    def _dispatch(self, el: etree._Element, tag: str) -> None:
        if tag in _BLOCKS:
            if tag == "header" and not self.in_content:
                return
            self.container(el)
        elif tag == "br":
            self.para.append(None)
        elif tag in _HEADINGS:
            self._heading(el, _HEADINGS[tag])
        elif tag in _LISTS:
            self._list(el, ordered=tag == "ol")
        elif tag in _CODE:
            self._pre(el)
        elif tag == "blockquote":
            self._quote(el)
        elif tag == "table":
            self._table(el)
        elif tag == "dl":
            self._definitions(el)
        elif tag == "hr":
            self.flush()
        elif tag == "img":
            self._words(el.get("alt") or "")
        elif tag in _INLINE_CODE:
            self._inline_code(el)
        elif tag in _BOLD and not self.flat and len(el) == 0:
            self._bold(el.text or "")
        elif tag == "time" and len(el) == 0 and not (el.text or "").strip():
            self._words(el.get("datetime") or "")
        elif tag == "math":
            alt = el.get("alttext")
            if alt:
                self._words(alt)
            else:
                self.content(el)
        elif tag.startswith(("ac:", "ri:", "at:")):
            self._confluence(el, tag)
        else:  # inline: its text in place
            self.content(el)

    # blocks

    def _heading(self, el: etree._Element, level: int) -> None:
        if self.flat:
            self.container(el)
            return
        self.flush()
        title = self.flat_text(el)
        if not title:
            return
        if title.endswith("#"):
            stem = title.rstrip("#")
            if not stem or stem[-1] in " \t":
                title = title[:-1] + "\\#"  # else read as a closing sequence and dropped
        self.out.block(["#" * level + " " + title])

    def _list(self, el: etree._Element, ordered: bool) -> None:
        if self.flat:
            self.container(el)
            return
        self.flush()
        items = [c for c in el if isinstance(c.tag, str) and c.tag == "li"]
        number = as_int(el.get("start"), len(items) if "reversed" in el.attrib else 1)
        step = -1 if "reversed" in el.attrib else 1
        last_rest: str | None = None
        tight = False
        if el.text and el.text.strip():
            last_rest = self._stray_item(el.text, None, last_rest)
            tight = True
        for child in el:
            tag = child.tag
            if isinstance(tag, str) and tag == "li" and not self._dropped(child, tag):
                number = as_int(child.get("value"), number)
                marker = f"{min(max(number, 0), 999_999_999)}. " if ordered else "- "
                last_rest = " " * len(marker)
                self.out.open(marker, last_rest, tight)
                self._item(child)
                self.out.close()
                tight = True
                number += step
            elif isinstance(tag, str) and not self._dropped(child, tag):
                last_rest = self._stray_item(None, child, last_rest)
                tight = True
            if child.tail and child.tail.strip():
                last_rest = self._stray_item(child.tail, None, last_rest)
                tight = True

    def _item(self, el: etree._Element) -> None:
        self._enter()
        try:
            self.container(el)
        finally:
            self.depth -= 1

    def _stray_item(self, text: str | None, el: etree._Element | None, rest: str | None) -> str:
        """Content of a list outside its items (a nested list written straight inside
        `<ul>`, stray text): a continuation of the item before, or an item of its own."""
        if rest is None:
            rest = "  "
            self.out.open("- ", rest)
        else:
            self.out.open(rest, rest)
        if text is not None:
            self.para.append(text)
        if el is not None:
            self.node(el)
        self.flush()
        self.out.close()
        return rest

    def _quote(self, el: etree._Element) -> None:
        if self.flat:
            self.container(el)
            return
        self.flush()
        self.out.open("> ", "> ")
        self.container(el)
        self.out.close()

    def _pre(self, el: etree._Element) -> None:
        if self.flat:
            self.content(el)
            return
        self.flush()
        self._code_block(_language(el), self._pre_text(el))

    def _pre_text(self, pre: etree._Element) -> str:
        """A `pre`'s text exactly as written, `<br>` as a line break, without what the page
        hides or adds as chrome (line numbers, copy buttons)."""
        out: list[str] = []
        walk = etree.iterwalk(pre, events=("start", "end"))
        for event, el in walk:
            if event == "start":
                tag = el.tag
                if el is not pre and (not isinstance(tag, str) or self._dropped(el, tag)):
                    walk.skip_subtree()
                elif tag == "br":
                    out.append("\n")
                elif el.text:
                    out.append(el.text)
            elif el is not pre and el.tail:
                out.append(el.tail)
        return "".join(out)

    def _definitions(self, el: etree._Element) -> None:
        if self.flat:
            self.container(el)
            return
        self.flush()
        terms: list[str] = []
        definitions: list[str] = []
        for kind, text in self._dl_parts(el):
            if kind == "dt" and definitions:
                self._definition_group(terms, definitions)
                terms, definitions = [], []
            (terms if kind == "dt" else definitions).append(text)
        self._definition_group(terms, definitions)

    def _dl_parts(self, el: etree._Element) -> list[tuple[str, str]]:
        parts: list[tuple[str, str]] = []
        for child in el:
            tag = child.tag
            if not isinstance(tag, str) or self._dropped(child, tag):
                continue
            if tag == "div":  # HTML allows a div around each group
                parts.extend(self._dl_parts(child))
            elif text := self.flat_text(child):
                parts.append(("dt" if tag == "dt" else "dd", text))
        return parts

    def _definition_group(self, terms: list[str], definitions: list[str]) -> None:
        if len(terms) == 1 and len(definitions) == 1:
            lines = [f"**{terms[0]}**: {definitions[0]}"]
        else:
            lines = [f"**{t}**" for t in terms] + [escape_line(d) for d in definitions]
        if lines:
            self.out.block(lines)

    def _table(self, el: etree._Element) -> None:
        if self.flat:
            self.container(el)
            return
        self.flush()
        table = Table(self, el)
        for stray in table.stray:  # where a browser shows them: before the table
            self.node(stray)
            self.flush()
        if table.layout:  # a table that lays out blocks: its cells are blocks
            for cell in table.cells:
                self.container(cell)
            return
        if table.caption:
            self.out.block([escape_line(table.caption)])
        lines = table.render(self.limits, self.out)
        if lines:
            self.out.block(lines)


def _language(pre: etree._Element) -> str:
    """The language a code block's classes name: `language-x`/`lang-x` (highlight.js,
    Prism, Markdown renderers), `highlight-x` (Sphinx, GitHub), `mw-highlight-lang-x`
    (MediaWiki), `brush: x` (Confluence, also in its export's
    `data-syntaxhighlighter-params`), pandoc's `sourceCode x`, or `data-lang`; on the `pre`,
    its `code` child or the two wrappers around it."""
    candidates: list[etree._Element] = [pre]
    code = next((c for c in pre if c.tag == "code"), None)
    if code is not None:
        candidates.insert(0, code)
    parent = pre.getparent()
    if parent is not None:
        candidates.append(parent)
        grandparent = parent.getparent()
        if grandparent is not None:
            candidates.append(grandparent)
    for el in candidates:
        lang = el.get("data-lang")
        if lang:
            return lang
        classes = el.get("class") or ""
        found = _LANGUAGE.search(classes + " " + (el.get("data-syntaxhighlighter-params") or ""))
        if found and found.group(1).lower() not in _NOT_LANGUAGES:
            return found.group(1)
        tokens = classes.split()
        if "sourceCode" in tokens:
            others = [t for t in tokens if t != "sourceCode"]
            if others:
                return others[0]
    return ""
