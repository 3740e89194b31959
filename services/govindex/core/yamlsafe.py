"""The one YAML loader of the product: safe tags only, no anchors or aliases, bounded work.

An alias repeats a node by reference: ten aliases of a node that holds ten aliases, eight
levels deep, is a few hundred bytes of text and a billion values once anything walks it
(`str()`, JSON, a database row: "billion laughs"). Refusing anchors and aliases outright
keeps what a load builds proportional to the text: every value then costs at least one
character of it. The caps on values and nesting bound what a large or deeply nested text
costs to build (an object per value, a frame per level), and long numbers are refused
before PyYAML's constructors turn them into quadratic arithmetic (`1:1:1:…` is a base-60
integer).

Every failure is a `YamlRefused` whose message is short whatever the input.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, NodeEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from govindex.core.inputs import quote

MAX_DEPTH = 64  # levels of nesting; configuration and Kubernetes resources stay far below
MAX_NODES = 100_000  # values in one text, every document of it together
MAX_NUMBER_CHARS = 100  # an int or a float written with more characters is refused
MESSAGE_LIMIT = 200  # characters of a parser's own message kept in ours (it may quote input)
PATH_LIMIT = 120  # characters of the path to the refused value kept in the message

ANCHORS_REFUSED = "YAML anchors and aliases (&name / *name) are not accepted: write the value out"
_NUMBER_TAGS = frozenset(("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"))


class YamlRefused(ValueError):
    """The text is not YAML we load: it does not parse, or it uses what we refuse.

    `path` is where in the data it went wrong (`metadata.name`, `items.3`; "" for the
    root or when unknown); `line` is 1-based, 0 when unknown.
    """

    def __init__(self, problem: str, *, path: str = "", line: int = 0) -> None:
        self.problem = problem
        self.path = path
        self.line = line
        shown_path = path if len(path) <= PATH_LIMIT else f"{path[:PATH_LIMIT]}…"
        where = ", ".join(
            part
            for part in (f"at {shown_path}" if path else "", f"line {line}" if line else "")
            if part
        )
        super().__init__(f"{problem} ({where})" if where else problem)


class _Guard(Composer):
    """PyYAML's composer, refusing anchors, aliases, long numbers and too much or too deep
    structure as it meets them: nothing refused is ever built."""

    def _guard_init(self, max_nodes: int, max_depth: int) -> None:
        Composer.__init__(self)
        self._max_nodes, self._max_depth = max_nodes, max_depth
        self._nodes = 0
        self._path: list[str] = []

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event: NodeEvent = self.peek_event()  # type: ignore[attr-defined]
        self._path.append(_segment(parent, index))
        if isinstance(event, AliasEvent) or event.anchor is not None:
            raise self._refuse(ANCHORS_REFUSED, event)
        self._nodes += 1
        if self._nodes > self._max_nodes:
            raise self._refuse(f"more than {self._max_nodes} values: shorten the text", event)
        if len(self._path) > self._max_depth:
            raise self._refuse(
                f"nested more than {self._max_depth} levels deep: flatten the structure", event
            )
        node = Composer.compose_node(self, parent, index)
        if (
            isinstance(node, ScalarNode)
            and node.tag in _NUMBER_TAGS
            and len(node.value) > MAX_NUMBER_CHARS
        ):
            raise self._refuse(
                f"a number of {len(node.value)} characters (at most {MAX_NUMBER_CHARS}): "
                "quote it if it is text",
                event,
            )
        if isinstance(node, MappingNode):
            # A repeated key would silently keep its last value (a second `acl:` line).
            keys = [k.value for k, _ in node.value if isinstance(k, ScalarNode)]
            if len(keys) != len(set(keys)):
                twice = next(k for k in keys if keys.count(k) > 1)
                raise self._refuse(f"the key {quote(twice)} appears twice: keep one", event)
        self._path.pop()
        return node

    def _refuse(self, problem: str, event: NodeEvent) -> YamlRefused:
        mark = event.start_mark
        line = mark.line + 1 if mark is not None else 0
        return YamlRefused(problem, path=".".join(p for p in self._path if p), line=line)


def _segment(parent: Node | None, index: Any) -> str:
    """A node's step in the path: its key in a mapping, its position in a sequence."""
    if isinstance(parent, SequenceNode) and isinstance(index, int):
        return str(index)
    if isinstance(parent, MappingNode):
        if isinstance(index, ScalarNode):
            key = str(index.value)
            return key if len(key) <= 64 else f"{key[:64]}…"
        return "(key)"  # the key itself is being composed
    return ""


class _PythonLoader(_Guard, Reader, Scanner, Parser, SafeConstructor, Resolver):
    def __init__(self, text: str, max_nodes: int, max_depth: int) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        self._guard_init(max_nodes, max_depth)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


_Loader: type[_Guard] = _PythonLoader
if yaml.__with_libyaml__:  # libyaml's parser, our composer: the same events, faster
    from yaml._yaml import CParser

    class _CLoader(_Guard, CParser, SafeConstructor, Resolver):
        def __init__(self, text: str, max_nodes: int, max_depth: int) -> None:
            CParser.__init__(self, text)
            self._guard_init(max_nodes, max_depth)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    _Loader = _CLoader


def _loader(text: str, max_nodes: int, max_depth: int) -> Any:
    return _Loader(text, max_nodes, max_depth)  # type: ignore[call-arg]


def load(text: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Any:
    """The value of a one-document YAML text (None when empty); YamlRefused otherwise."""
    loader = _loader(text, max_nodes, max_depth)
    try:
        return loader.get_single_data()
    except YamlRefused:
        raise
    except yaml.YAMLError as exc:
        raise _refused(exc, text) from None
    except Exception as exc:  # PyYAML's constructors raise plain errors on odd scalars
        raise _constructed(exc) from None


def load_all(text: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> list[Any]:
    """The value of every document of a YAML text, in order (an empty one is None)."""
    loader = _loader(text, max_nodes, max_depth)
    documents: list[Any] = []
    try:
        while loader.check_node():
            documents.append(loader.construct_document(loader.get_node()))
    except YamlRefused:
        raise
    except yaml.YAMLError as exc:
        raise _refused(exc, text) from None
    except Exception as exc:  # as in `load`
        raise _constructed(exc) from None
    return documents


def load_entries(
    text: str, items: tuple[str, ...] = (), *, max_nodes: int = MAX_NODES
) -> list[tuple[Any, int, int]]:
    """The entries of a YAML text with the span [start, end) each is written at: in every
    document, the list at the key path `items` (its items), else a top-level list (its
    items) or the document itself. A document without that path has no entries."""
    loader = _loader(text, max_nodes, MAX_DEPTH)
    entries: list[tuple[Any, int, int]] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            value = loader.construct_document(node)
            for key in items:
                found = _child(node, key)
                value = value.get(key) if isinstance(value, dict) else None
                if found is None or value is None:
                    break
                node = found
            else:
                if isinstance(node, SequenceNode) and isinstance(value, list):
                    entries += [
                        (v, n.start_mark.index, n.end_mark.index)
                        for v, n in zip(value, node.value, strict=True)
                    ]
                elif not items or isinstance(node, MappingNode):
                    entries.append((value, node.start_mark.index, node.end_mark.index))
    except YamlRefused:
        raise
    except yaml.YAMLError as exc:
        raise _refused(exc, text) from None
    except Exception as exc:  # as in `load`
        raise _constructed(exc) from None
    return entries


def _child(node: Node, key: str) -> Node | None:
    if not isinstance(node, MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return v  # type: ignore[no-any-return]
    return None


def _refused(exc: yaml.YAMLError, text: str) -> YamlRefused:
    """The parser's own words, cut short: a problem may quote a tag or a character run."""
    if isinstance(exc, yaml.MarkedYAMLError):
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "not valid YAML"
        mark = exc.problem_mark or exc.context_mark
        return YamlRefused(_cut(problem), line=mark.line + 1 if mark is not None else 0)
    if isinstance(exc, yaml.reader.ReaderError):
        # Its str() names the stream `<unicode string>`: say the character and the line.
        at = max(0, int(exc.position))
        line = text[:at].count("\n") + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        character = exc.character if isinstance(exc.character, int) else None
        said = f"#x{character:04x}" if character is not None else "a character"
        return YamlRefused(
            f"unacceptable {said} at column {column}: {_cut(str(exc.reason))}", line=line
        )
    return YamlRefused(_cut(str(exc)) or "not valid YAML")


def _constructed(exc: Exception) -> YamlRefused:
    return YamlRefused(f"a value does not construct ({exc.__class__.__name__}: {_cut(str(exc))})")


def _cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MESSAGE_LIMIT else f"{flat[:MESSAGE_LIMIT]}… ({len(flat)} chars)"


def shown(value: object) -> str:
    """A loaded value as a message shows it: a scalar quoted short, a container by size
    (its `repr` could be as long as the text it came from)."""
    if isinstance(value, dict):
        return f"a mapping of {len(value)} {'key' if len(value) == 1 else 'keys'}"
    if isinstance(value, list | tuple | set):
        return f"a list of {len(value)} {'item' if len(value) == 1 else 'items'}"
    return quote(value)
