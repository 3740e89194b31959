"""Code and configuration: Python by function and class (ast), YAML and JSON by top-level key
or resource (other languages and Terraform / HCL: `indexer.parsers.treesitter`). Locators
are the file path and line range (no anchors: line numbers are what an editor opens). Code
that does not parse is cut by paragraphs and labelled `unparsed`, never dropped."""

from __future__ import annotations

import ast
import json
import re

from govindex.core import yamlsafe
from govindex.core.inputs import has_control
from govindex.core.records import ChunkKind
from indexer.parsers.base import LineIndex, ParsedDocument, Segment, SizePolicy, finalize
from indexer.parsers.text import paragraphs


def _fallback(text: str, policy: SizePolicy) -> ParsedDocument:
    segments = paragraphs(text)
    for seg in segments:
        seg.labels = ("unparsed",)
    return finalize(text, segments, policy=policy)


def _cover(text: str, starts: list[tuple[int, Segment]]) -> list[Segment]:
    """Given segments' start offsets in order, make each run to the next start."""
    segments = [seg for _, seg in starts]
    for k, seg in enumerate(segments):
        seg.end = segments[k + 1].start if k + 1 < len(segments) else len(text)
    return segments


class PythonParser:
    name = "python"
    version = "1.0.0"

    def __init__(self, policy: SizePolicy | None = None) -> None:
        self.policy = policy or SizePolicy(max_chars=4000)

    def parse(self, text: str) -> ParsedDocument:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return _fallback(text, self.policy)
        lines = LineIndex(text)
        starts: list[tuple[int, Segment]] = []

        def start_of(node: ast.stmt) -> int:
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            return lines.offset_of_line(first)

        def visit(nodes: list[ast.stmt], parent: Segment | None, path: tuple[str, ...]) -> None:
            module_run = False
            for node in nodes:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    is_class = isinstance(node, ast.ClassDef)
                    kind = ChunkKind.CLASS if is_class else ChunkKind.FUNCTION
                    label = (
                        "class"
                        if is_class
                        else ("method" if parent and parent.kind is ChunkKind.CLASS else "function")
                    )
                    seg = Segment(
                        start_of(node),
                        0,
                        kind,
                        (*path, node.name),
                        "",  # code is located by line range, not by anchor
                        parent,
                        (f"{label}:{node.name}",),
                        atomic=True,
                    )
                    starts.append((seg.start, seg))
                    if is_class:
                        visit(node.body, seg, (*path, node.name))
                        # Code after the last method belongs to the class, not the method.
                        after = lines.offset_of_line((node.end_lineno or node.lineno) + 1)
                        tail = Segment(after, 0, ChunkKind.MODULE, path, parent=parent)
                        starts.append((after, tail))
                    module_run = False
                elif parent is None and not module_run:
                    seg = Segment(start_of(node), 0, ChunkKind.MODULE, path)
                    starts.append((seg.start, seg))
                    module_run = True
            return None

        visit(tree.body, None, ())
        starts.insert(0, (0, Segment(0, 0, ChunkKind.MODULE)))
        return finalize(text, _cover(text, _dedupe(starts)), policy=self.policy)


_YAML_KEY = re.compile(r"^([A-Za-z_][\w.-]*|\"[^\"]+\"|'[^']+')[ \t]*:(?:[ \t]|$)")
_YAML_DOC = re.compile(r"^---(?:[ \t].*)?$")


LABEL_CHARS = 256  # a resource's kind or name, or a key, as a label


def _label(value: object) -> str | None:
    """A value fit to be a label: a short one-line string (or a number, as written)."""
    if not value or isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value)
    return text if len(text) <= LABEL_CHARS and not has_control(text) else None


class YamlParser:
    """YAML by top-level key, or by resource in a multi-document file.

    The text is read by the product's YAML loader: anchors and aliases are refused (an
    alias can stand for a value far larger than the file), so a file that uses them, or
    that is too large or nested too deep to load, is cut like text that does not parse.
    A resource's `kind` and `metadata.name` label it only when they are short one-line
    strings: anything else is not a label, and the chunks are cut all the same.
    """

    name = "yaml"
    version = "1.1.0"  # 1.1: anchors refused, labels short

    def __init__(self, policy: SizePolicy | None = None) -> None:
        self.policy = policy or SizePolicy(max_chars=4000)

    def parse(self, text: str) -> ParsedDocument:
        try:
            docs = [d for d in yamlsafe.load_all(text) if d is not None]
        except yamlsafe.YamlRefused:  # not YAML we load
            return _fallback(text, self.policy)
        lines = LineIndex(text).lines()
        separators = [off for off, line in lines if _YAML_DOC.match(line)]
        if len(docs) > 1 or (
            separators and len(docs) == 1 and isinstance(docs[0], dict) and "kind" in docs[0]
        ):
            return self._resources(text, separators, docs)
        starts = [(0, Segment(0, 0, ChunkKind.MODULE))]
        for off, line in lines:
            if key := _YAML_KEY.match(line):
                name = _label(key.group(1).strip("'\""))
                starts.append(
                    (
                        off,
                        Segment(
                            off,
                            0,
                            ChunkKind.KEY,
                            (name,) if name else (),
                            "",
                            labels=(f"key:{name}",) if name else (),
                            atomic=True,
                        ),
                    )
                )
        return finalize(text, _cover(text, _dedupe(starts)), policy=self.policy)

    def _resources(self, text: str, separators: list[int], docs: list[object]) -> ParsedDocument:
        bounds = [0, *[s for s in separators if s > 0]]
        starts = []
        for k, off in enumerate(bounds):
            doc = docs[k] if k < len(docs) else None
            labels: tuple[str, ...] = ()
            title = ""
            if isinstance(doc, dict):
                meta = doc.get("metadata")
                kind = _label(doc.get("kind"))
                name = _label(meta.get("name")) if isinstance(meta, dict) else None
                labels = tuple(
                    x for x in (f"kind:{kind}" if kind else "", f"name:{name}" if name else "") if x
                )
                title = f"{kind}-{name}" if kind and name else ""
            starts.append(
                (
                    off,
                    Segment(
                        off,
                        0,
                        ChunkKind.RESOURCE,
                        (title,) if title else (),
                        "",
                        labels=labels,
                        atomic=True,
                    ),
                )
            )
        return finalize(text, _cover(text, _dedupe(starts)), policy=self.policy)


class JsonParser:
    name = "json"
    version = "1.0.0"

    def __init__(self, policy: SizePolicy | None = None) -> None:
        self.policy = policy or SizePolicy(max_chars=4000)

    def parse(self, text: str) -> ParsedDocument:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to walk
            return _fallback(text, self.policy)
        if not isinstance(value, dict | list):
            return finalize(text, [Segment(0, len(text), ChunkKind.MODULE)], policy=self.policy)
        members = self._top_level_starts(text)
        names = list(value) if isinstance(value, dict) else [str(i) for i in range(len(value))]
        starts = [(0, Segment(0, 0, ChunkKind.MODULE))]
        kind = ChunkKind.KEY if isinstance(value, dict) else ChunkKind.RESOURCE
        for off, name in zip(members, names, strict=False):
            starts.append(
                (off, Segment(off, 0, kind, (name,), "", labels=(f"key:{name}",), atomic=True))
            )
        segments = _cover(text, _dedupe(starts))
        if len(segments) > 1 and not text[: segments[1].start].strip().strip("{[").strip():
            segments[1].start = 0  # the opening bracket travels with the first member
            segments = segments[1:]
        return finalize(text, segments, policy=self.policy)

    @staticmethod
    def _top_level_starts(text: str) -> list[int]:
        """Offsets where each top-level member (or element) begins."""
        starts: list[int] = []
        depth = 0
        in_string = escaped = False
        expect = False
        for i, ch in enumerate(text):
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
                continue
            if ch == '"':
                if depth == 1 and expect:
                    starts.append(i)
                    expect = False
                in_string = True
            elif ch in "{[":
                depth += 1
                if depth == 1:
                    expect = True
                elif depth == 2 and expect:
                    starts.append(i)
                    expect = False
            elif ch in "}]":
                depth -= 1
            elif ch == "," and depth == 1:
                expect = True
            elif depth == 1 and expect and not ch.isspace():
                starts.append(i)
                expect = False
        return starts


def _dedupe(starts: list[tuple[int, Segment]]) -> list[tuple[int, Segment]]:
    """One segment per offset: a structural unit replaces a module run starting there."""
    by_offset: dict[int, Segment] = {}
    for off, seg in starts:
        held = by_offset.get(off)
        if held is None or held.kind is ChunkKind.MODULE:
            by_offset[off] = seg
    return sorted(by_offset.items(), key=lambda item: item[0])
