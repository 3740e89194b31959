"""Confluence storage format (`ac:`/`ri:` elements), read as Confluence renders it.

A code (or noformat) macro is a fenced block in its `language`; every other macro loses
its chrome (parameters) and keeps its rich-text body (and a plain-text body as a code
block); status and Jira macros keep their title or key; links keep their body or the page
title; task lists are `- [ ]` / `- [x]` items.
"""

from __future__ import annotations

from lxml import etree

from indexer.extractors.html.walk import BaseWalker

_MACROS = frozenset(("ac:structured-macro", "ac:macro"))
_CODE_MACROS = frozenset(("code", "noformat"))
_INLINE_MACROS = {"status": "title", "jira": "key"}  # macro -> the parameter it shows


class ConfluenceWalker(BaseWalker):
    """The walk through Confluence's own elements: macros, links, images and task lists."""

    def _confluence(self, el: etree._Element, tag: str) -> None:
        if tag in _MACROS:
            self._macro(el)
        elif tag == "ac:link":
            body = _child(el, "ac:plain-text-link-body")
            if body is None:
                body = _child(el, "ac:link-body")
            if body is not None:
                self.content(body)
            else:
                target = next((c for c in el if isinstance(c.tag, str)), None)
                if target is not None:
                    self._words(
                        target.get("ri:content-title")
                        or target.get("ri:filename")
                        or target.get("ri:space-key")
                        or ""
                    )
        elif tag == "ac:image":
            self._words(el.get("ac:alt") or "")
        elif tag == "ac:task-list":
            self._tasks(el)
        elif tag.startswith(("ri:", "at:")):
            return
        elif tag == "ac:plain-text-body":
            self._code_block("", "".join(el.itertext()))
        else:  # layouts, bodies, inline comment markers: their content
            self.content(el)

    def _macro(self, el: etree._Element) -> None:
        name = (el.get("ac:name") or "").lower()
        if name in _CODE_MACROS:
            body = _child(el, "ac:plain-text-body")
            if body is not None:
                self._code_block(_parameter(el, "language"), "".join(body.itertext()))
            return
        shown = _INLINE_MACROS.get(name)
        if shown is not None:
            self._words(_parameter(el, shown))
            return
        for child in el:  # chrome (parameters) dropped, bodies kept
            if child.tag == "ac:rich-text-body":
                self.node(child)
            elif child.tag == "ac:plain-text-body":
                self._code_block(_parameter(el, "language"), "".join(child.itertext()))

    def _tasks(self, el: etree._Element) -> None:
        if self.flat:
            self.container(el)
            return
        self.flush()
        tight = False
        for task in el:
            if task.tag != "ac:task":
                continue
            done = (_child_text(task, "ac:task-status") or "").strip() == "complete"
            self.out.open("- ", "  ", tight)
            self.para.append("[x] " if done else "[ ] ")
            body = _child(task, "ac:task-body")
            if body is not None:
                self.content(body)
            self.flush()
            self.out.close()
            tight = True


def _child(el: etree._Element, tag: str) -> etree._Element | None:
    for child in el:
        if child.tag == tag:
            return child
    return None


def _child_text(el: etree._Element, tag: str) -> str | None:
    child = _child(el, tag)
    return None if child is None else "".join(child.itertext())


def _parameter(macro: etree._Element, name: str) -> str:
    for child in macro:
        if child.tag == "ac:parameter" and child.get("ac:name") == name:
            return " ".join("".join(child.itertext()).split())
    return ""
