"""Code in its own language, cut along its syntax tree (tree-sitter grammars, one per language).

A file is cut into its top-level declarations: functions, classes (structs, interfaces,
traits, enums, impl blocks), their methods as children of the class, namespaces and
modules as parents of what they hold, HCL blocks and SQL statements each on their own.
Everything else (imports, constants, a module docstring, a script's commands) forms module
runs between them, so the chunks cover the whole file with only whitespace between them.
A comment, attribute or decorator directly above a declaration (no blank line between)
belongs to that declaration, as it documents it.

Only the top level, class bodies and namespace bodies are walked, a bounded number of
levels deep, with an explicit work list: a file nested thousands deep costs no Python
stack. tree-sitter recovers from syntax errors and always returns a tree; a file whose
errors cover half of it, or whose grammar is not installed, is cut by paragraphs and
labelled `unparsed`, never dropped. Locators are line ranges, as for the other code
parsers (no anchors).
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from tree_sitter import Language, Node, Tree
from tree_sitter import Parser as TreeSitter

from govindex.core.inputs import has_control
from govindex.core.records import ChunkKind
from indexer.parsers.base import NEWLINE, ParsedDocument, Segment, SizePolicy, finalize
from indexer.parsers.text import paragraphs

LABEL_CHARS = 256  # a name longer than this (or spanning lines) labels nothing
MAX_CONTAINER_DEPTH = 6  # namespace > class > nested class …: deeper ones stay whole
MAX_TRANSPARENT_DEPTH = 32  # nested `#if` blocks looked through
MAX_UNWRAP = 4  # export > decorator > template > declaration
ERROR_SHARE = 0.5  # errors covering more of the file than this: cut as text
# The parse's time budget: tree-sitter reads ordinary code at several MiB/s, but its error
# recovery turns quadratic on some broken inputs (Kotlin, Bash, Python grammars); past the
# budget the parse is abandoned and the file cut as text, like one that does not parse.
PARSE_SECONDS = 5.0
PARSE_SECONDS_PER_MIB = 1.0
READ_CHUNK = 1 << 16

_BREAK = re.compile(rb"\r\n|\r|\n")
_LEADING_SPACE = re.compile(r"\s*")
_CLOSERS = frozenset({"}", ")", "]", "end", "block_end", "fi", "done", "esac"})
_GENERIC = re.compile(r"<.*")  # `Store<T>` names the class `Store`
# tree-sitter-bash's scanner crashes the process (a segmentation fault, 0.23 to 0.25) on some
# code points past U+E0000 after a `{`. Shell syntax is ASCII: that grammar reads every
# non-ASCII byte as the word character `x`, the same length, so offsets are unchanged and
# names are still taken from the file's own bytes.
_ASCII_ONLY = bytes(range(128)) + b"x" * 128

Finder = Callable[["_Source", Node, bool], "_Decl | None"]


@dataclass(frozen=True)
class Grammar:
    """What the node types of one tree-sitter grammar mean for cutting.

    `classes` hold methods; `namespaces` hold declarations (their label prefix, e.g.
    `namespace`); `wrappers` wrap one declaration (a decorator, `export`, a template);
    `transparent` nodes hold items that stand at the level of the node (`#ifdef`);
    `prefixes` document what follows them (comments, attributes); a node type in
    `needs_body` is a function only when it has a body (not a signature); `special`
    recognises what the tables cannot say (a JavaScript arrow function bound to a name,
    a C struct in a typedef, an HCL block's labels).
    """

    module: str
    entry: str = "language"
    functions: frozenset[str] = frozenset()
    classes: frozenset[str] = frozenset()
    namespaces: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    methods_in_namespaces: bool = False
    wrappers: frozenset[str] = frozenset()
    transparent: frozenset[str] = frozenset()
    prefixes: frozenset[str] = frozenset()
    needs_body: frozenset[str] = frozenset()
    bodies: frozenset[str] = frozenset()
    special: Finder | None = None
    comment_lines: bytes = b""  # see `_comments_above`
    ascii_only: bool = False  # see `_ASCII_ONLY`


@dataclass
class _Decl:
    """A declaration found at one level: what chunk it starts and what it holds."""

    role: Literal["function", "class", "namespace", "block"]
    name: str | None
    body: Node | None = None
    owner: str | None = None  # a method declared outside its type (Go, C++ `T::f`)
    kind: ChunkKind = ChunkKind.BLOCK  # for blocks
    labels: tuple[str, ...] = ()  # for blocks
    atomic: bool = True
    methods: bool = True  # for namespaces: whether functions inside are methods
    prefix: str = "namespace"  # for namespaces: `namespace:<name>` or `module:<name>`
    also: tuple[str, ...] = ()  # more names it declares (Go's `type ( A …; B … )`)


class _Source:
    """The UTF-8 bytes tree-sitter reads, and text of a node as a short one-line name."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def text(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def name(self, node: Node | None) -> str | None:
        if node is None or node.end_byte - node.start_byte > LABEL_CHARS * 4:
            return None  # longer than any label, in any encoding: not decoded at all
        return _clean(self.text(node))


def _clean(value: str) -> str | None:
    """A name fit to be a label: one line of at most LABEL_CHARS, whitespace collapsed."""
    name = " ".join(value.split())
    if not name or len(name) > LABEL_CHARS or has_control(name):
        return None
    return name


def _named(node: Node) -> list[tuple[Node, str | None]]:
    """A node's named children with their field names."""
    return [
        (child, node.field_name_for_child(i))
        for i, child in enumerate(node.children)
        if child.is_named
    ]


def _has_body(node: Node) -> bool:
    if node.child_by_field_name("body") is not None:
        return True
    return any(c.type in ("function_body", "block", "compound_statement") for c in node.children)


# --- what the tables cannot say, per language family -------------------------------------


def _c_declarator_name(src: _Source, node: Node) -> str | None:
    """The declared name at the end of a C/C++ declarator chain (`*f(…)`, `A::f`)."""
    current: Node | None = node.child_by_field_name("declarator")
    for _ in range(16):
        if current is None:
            return None
        if current.type in ("function_declarator", "pointer_declarator", "reference_declarator"):
            current = current.child_by_field_name("declarator") or (
                current.named_children[-1] if current.named_children else None
            )
        elif current.type in ("parenthesized_declarator", "attributed_declarator"):
            current = current.named_children[0] if current.named_children else None
        else:
            return src.name(current)
    return None


def _c_record(src: _Source, node: Node) -> str | None:
    """The name of a struct, union or enum defined (with a body) by this node, if any."""
    specifiers = ("struct_specifier", "union_specifier", "enum_specifier", "class_specifier")
    if node.type not in (*specifiers, "declaration", "type_definition"):
        return None
    if node.type in specifiers:
        if node.child_by_field_name("body") is None:
            return None
        return src.name(node.child_by_field_name("name"))
    spec = node.child_by_field_name("type")
    if spec is None or spec.type not in specifiers or spec.child_by_field_name("body") is None:
        return None
    if node.type == "type_definition":  # `typedef struct x {…} x_t;` is known as x_t
        return _c_declarator_name(src, node) or src.name(node.child_by_field_name("declarator"))
    return src.name(spec.child_by_field_name("name"))


def _c_special(src: _Source, node: Node, in_class: bool) -> _Decl | None:
    if node.type == "function_definition":
        name = _c_declarator_name(src, node)
        if name and "::" in name and not in_class:  # `void Store<T>::put(…)`, out of line
            scope, _, short = name.rpartition("::")
            owner = _GENERIC.sub("", scope.rpartition("::")[2])
            return _Decl("function", short or name, owner=owner or None)
        return _Decl("function", name)
    name = _c_record(src, node)
    return _Decl("class", name) if name is not None else None


def _cpp_special(src: _Source, node: Node, in_class: bool) -> _Decl | None:
    if node.type in ("class_specifier", "struct_specifier", "union_specifier"):
        body = node.child_by_field_name("body")
        if body is None:
            return None
        name = src.name(node.child_by_field_name("name"))
        return _Decl("class", _GENERIC.sub("", name) if name else None, body=body)
    if node.type in ("declaration", "type_definition") and in_class is False:
        spec = node.child_by_field_name("type")
        if spec is not None and spec.type in ("class_specifier", "struct_specifier"):
            body = spec.child_by_field_name("body")
            if body is not None:
                return _Decl("class", _c_record(src, node), body=body)
    return _c_special(src, node, in_class)


_JS_FUNCTIONS = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)


def _js_special(src: _Source, node: Node, in_class: bool) -> _Decl | None:
    """`const f = () => …` is a function; `handler = () => …` in a class, a method."""
    if node.type in ("lexical_declaration", "variable_declaration"):
        declarators = [c for c in node.named_children if c.type == "variable_declarator"]
        if len(declarators) != 1:
            return None
        value = declarators[0].child_by_field_name("value")
        name = src.name(declarators[0].child_by_field_name("name"))
        if value is not None and value.type in _JS_FUNCTIONS:
            return _Decl("function", name)
        if value is not None and value.type == "class":
            return _Decl("class", name, body=value.child_by_field_name("body"))
        return None
    if node.type in ("field_definition", "public_field_definition") and in_class:
        value = node.child_by_field_name("value")
        if value is not None and value.type in _JS_FUNCTIONS:
            return _Decl(
                "function",
                src.name(node.child_by_field_name("property") or node.child_by_field_name("name")),
            )
    if node.type == "module":  # `declare module "foo" {…}`
        name = src.name(node.child_by_field_name("name"))
        return _Decl(
            "namespace",
            name.strip("'\"") if name else None,
            body=node.child_by_field_name("body"),
            methods=False,
        )
    return None


def _go_receiver(src: _Source, node: Node) -> str | None:
    receiver = node.child_by_field_name("receiver")
    params = [c for c in receiver.named_children] if receiver is not None else []
    if not params:
        return None
    name = src.name(params[0].child_by_field_name("type"))
    return _GENERIC.sub("", re.sub(r"\[.*", "", name)).lstrip("*").strip() if name else None


def _go_special(src: _Source, node: Node, in_class: bool) -> _Decl | None:
    if node.type == "method_declaration":
        return _Decl(
            "function", src.name(node.child_by_field_name("name")), owner=_go_receiver(src, node)
        )
    if node.type == "type_declaration":  # every named type may have methods
        specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
        names = [n for n in (src.name(s.child_by_field_name("name")) for s in specs) if n]
        return _Decl("class", names[0] if names else None, also=tuple(names[1:]))
    return None


def _rust_special(src: _Source, node: Node, in_class: bool) -> _Decl | None:
    if node.type == "impl_item":
        name = src.name(node.child_by_field_name("type"))
        return _Decl(
            "class", _GENERIC.sub("", name) if name else None, body=node.child_by_field_name("body")
        )
    return None


def _kotlin_special(src: _Source, node: Node, in_class: bool) -> _Decl | None:
    if node.type == "companion_object":
        name = src.name(node.child_by_field_name("name")) or "Companion"
        body = next((c for c in node.named_children if c.type == "class_body"), None)
        return _Decl("class", name, body=body)
    return None


def _sql_special(src: _Source, node: Node, in_class: bool) -> _Decl | None:
    """A statement each: `CREATE …` an addressable unit named by what it creates."""
    if node.type != "statement":
        return None
    inner = node.named_children[0] if node.named_children else None
    if inner is None or not inner.type.startswith("create_"):
        return _Decl("block", None, atomic=False)
    what = inner.type.removeprefix("create_")
    target = next(
        (c for c in inner.named_children if c.type in ("object_reference", "identifier")), None
    )
    name = src.name(target)
    if name:  # a quoted identifier, `"substring"`, is named substring
        name = name.replace('"', "").replace("`", "") or None
    if what in ("function", "procedure"):
        return _Decl("function", name)
    return _Decl("block", name, labels=(f"{what}:{name}",) if name else ())


def _hcl_special(src: _Source, node: Node, in_class: bool) -> _Decl | None:
    """`resource "aws_s3_bucket" "logs" {…}`: block:resource, label:aws_s3_bucket, label:logs."""
    if node.type != "block":
        return None
    kinds = [c for c in node.named_children if c.type == "identifier"]
    block = src.name(kinds[0]) if kinds else None
    words = []
    for child in node.named_children[1:]:
        if child.type == "string_lit":
            inner = [c for c in child.named_children if c.type == "template_literal"]
            words.append(src.name(inner[0]) if inner else "")
        elif child.type == "identifier":
            words.append(src.name(child))
        else:
            break
    if block is None or any(not w for w in words):
        return _Decl("block", None)
    return _Decl(
        "block",
        ".".join([block, *(w for w in words if w)]),
        labels=(f"block:{block}", *(f"label:{w}" for w in words)),
    )


_C_TRANSPARENT = frozenset(
    {
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
        "linkage_specification",
        "declaration_list",  # `extern "C" { … }`
    }
)

_MODIFIERS = frozenset({"if_modifier", "unless_modifier"})  # Ruby's `statement if test`

GRAMMARS: Mapping[str, Grammar] = MappingProxyType(
    {
        # Not registered: `.py` keeps the `ast` parser, which is linear on broken files where
        # this grammar's error recovery is not; here to compare the two on the same files.
        "python": Grammar(
            "tree_sitter_python",
            functions=frozenset({"function_definition"}),
            classes=frozenset({"class_definition"}),
            wrappers=frozenset({"decorated_definition"}),
            prefixes=frozenset({"comment"}),
            comment_lines=b"#",
        ),
        "go": Grammar(
            "tree_sitter_go",
            functions=frozenset({"function_declaration"}),
            prefixes=frozenset({"comment"}),
            special=_go_special,
        ),
        "java": Grammar(
            "tree_sitter_java",
            functions=frozenset(
                {"method_declaration", "constructor_declaration", "compact_constructor_declaration"}
            ),
            classes=frozenset(
                {
                    "class_declaration",
                    "interface_declaration",
                    "enum_declaration",
                    "record_declaration",
                    "annotation_type_declaration",
                }
            ),
            transparent=frozenset({"enum_body_declarations"}),
            prefixes=frozenset({"line_comment", "block_comment"}),
            needs_body=frozenset({"method_declaration"}),
        ),
        "javascript": Grammar(
            "tree_sitter_javascript",
            functions=frozenset(
                {"function_declaration", "generator_function_declaration", "method_definition"}
            ),
            classes=frozenset({"class_declaration"}),
            wrappers=frozenset({"export_statement"}),
            prefixes=frozenset({"comment"}),
            special=_js_special,
        ),
        **{
            key: Grammar(
                "tree_sitter_typescript",
                entry,
                functions=frozenset(
                    {"function_declaration", "generator_function_declaration", "method_definition"}
                ),
                classes=frozenset(
                    {
                        "class_declaration",
                        "abstract_class_declaration",
                        "interface_declaration",
                        "enum_declaration",
                    }
                ),
                namespaces=MappingProxyType({"internal_module": "namespace"}),
                wrappers=frozenset(
                    {"export_statement", "ambient_declaration", "expression_statement"}
                ),
                prefixes=frozenset({"comment"}),
                special=_js_special,
            )
            for key, entry in (("typescript", "language_typescript"), ("tsx", "language_tsx"))
        },
        "rust": Grammar(
            "tree_sitter_rust",
            functions=frozenset({"function_item"}),
            classes=frozenset({"struct_item", "enum_item", "union_item", "trait_item"}),
            namespaces=MappingProxyType({"mod_item": "module"}),
            prefixes=frozenset({"line_comment", "block_comment", "attribute_item"}),
            special=_rust_special,
        ),
        "c": Grammar(
            "tree_sitter_c",
            transparent=_C_TRANSPARENT,
            prefixes=frozenset({"comment"}),
            special=_c_special,
        ),
        "cpp": Grammar(
            "tree_sitter_cpp",
            namespaces=MappingProxyType({"namespace_definition": "namespace"}),
            wrappers=frozenset({"template_declaration"}),
            transparent=_C_TRANSPARENT,
            prefixes=frozenset({"comment"}),
            special=_cpp_special,
        ),
        "csharp": Grammar(
            "tree_sitter_c_sharp",
            functions=frozenset(
                {
                    "method_declaration",
                    "constructor_declaration",
                    "destructor_declaration",
                    "operator_declaration",
                    "conversion_operator_declaration",
                    "local_function_statement",
                }
            ),
            classes=frozenset(
                {
                    "class_declaration",
                    "struct_declaration",
                    "interface_declaration",
                    "enum_declaration",
                    "record_declaration",
                    "record_struct_declaration",
                }
            ),
            namespaces=MappingProxyType({"namespace_declaration": "namespace"}),
            prefixes=frozenset({"comment"}),
            needs_body=frozenset(
                {"method_declaration", "operator_declaration", "conversion_operator_declaration"}
            ),
        ),
        "ruby": Grammar(
            "tree_sitter_ruby",
            functions=frozenset({"method", "singleton_method"}),
            classes=frozenset({"class"}),
            namespaces=MappingProxyType({"module": "module"}),
            methods_in_namespaces=True,
            # `class << self`: its methods are the class's
            transparent=frozenset({"singleton_class", "body_statement"}),
            # `def except … end if RUBY_VERSION …`: the method, defined when the test holds
            wrappers=_MODIFIERS,
            prefixes=frozenset({"comment"}),
            comment_lines=b"#",
        ),
        "kotlin": Grammar(
            "tree_sitter_kotlin",
            functions=frozenset({"function_declaration", "secondary_constructor"}),
            classes=frozenset({"class_declaration", "object_declaration"}),
            prefixes=frozenset({"line_comment", "block_comment"}),
            needs_body=frozenset({"function_declaration"}),
            bodies=frozenset({"class_body", "enum_class_body"}),
            special=_kotlin_special,
        ),
        "bash": Grammar(
            "tree_sitter_bash",
            functions=frozenset({"function_definition"}),
            prefixes=frozenset({"comment"}),
            ascii_only=True,
        ),
        "sql": Grammar(
            "tree_sitter_sql",
            prefixes=frozenset({"comment", "marginalia"}),
            special=_sql_special,
        ),
        "hcl": Grammar(
            "tree_sitter_hcl",
            transparent=frozenset({"body"}),
            prefixes=frozenset({"comment"}),
            special=_hcl_special,
        ),
    }
)

_LANGUAGES: dict[str, Language | None] = {}


def load_language(key: str) -> Language | None:
    """The grammar's compiled language, or None when its package is not installed."""
    if key not in _LANGUAGES:
        grammar = GRAMMARS[key]
        try:
            module = importlib.import_module(grammar.module)
            _LANGUAGES[key] = Language(getattr(module, grammar.entry)())
        except (ImportError, AttributeError, ValueError):
            _LANGUAGES[key] = None
    return _LANGUAGES[key]


@dataclass
class _Item:
    node: Node
    start: int  # byte offset where its chunk would begin (a `#ifdef` above it included)


@dataclass
class _Level:
    """One body to cut: the top level, a class's or a namespace's."""

    node: Node
    parent: Segment | None
    path: tuple[str, ...]
    in_class: bool
    depth: int
    run_kind: ChunkKind
    covered: bool  # text before its first declaration belongs to the container's chunk


@dataclass
class _Owned:
    segment: Segment
    owner: str
    name: str | None


class TreeSitterParser:
    """Code in one language, cut by declaration (see the module's docstring)."""

    version = "1.1.0"  # 1.1: a comment between a header and its body, Ruby modifiers

    def __init__(
        self,
        language: str,
        name: str,
        policy: SizePolicy | None = None,
        *,
        seconds: float = PARSE_SECONDS,
    ) -> None:
        if language not in GRAMMARS:
            raise ValueError(
                f"no tree-sitter grammar is configured for {language!r}; "
                f"configured: {', '.join(sorted(GRAMMARS))}"
            )
        self.language = language
        self.name = name
        self.grammar = GRAMMARS[language]
        self.policy = policy or SizePolicy(max_chars=4000)
        self.seconds = seconds

    def parse(self, text: str) -> ParsedDocument:
        language = load_language(self.language)
        if language is None:
            return self._fallback(text)
        data = text.encode("utf-8", "surrogatepass")
        tree = self._tree(language, data)
        if tree is None or self._damaged(tree.root_node):
            return self._fallback(text)
        src = _Source(data)
        root = tree.root_node
        segments = self._segments(src, root)
        _to_chars(text, data, segments)
        _no_blank_lead(text, segments)
        return finalize(text, segments, policy=self.policy)

    def _tree(self, language: Language, data: bytes) -> Tree | None:
        """The syntax tree, or None when parsing ran past its time budget."""
        deadline = time.monotonic() + self.seconds + PARSE_SECONDS_PER_MIB * len(data) / 2**20

        source = memoryview(data.translate(_ASCII_ONLY) if self.grammar.ascii_only else data)

        def read(offset: int, _point: object) -> memoryview:
            return source[offset : offset + READ_CHUNK]  # a view: no copy of the text

        def past_deadline(_offset: int, _has_error: bool) -> bool:
            return time.monotonic() > deadline

        try:
            return TreeSitter(language).parse(read, progress_callback=past_deadline)
        except ValueError:  # tree-sitter's "Parsing failed": the callback cancelled it
            return None

    def _fallback(self, text: str) -> ParsedDocument:
        segments = paragraphs(text)
        for seg in segments:
            seg.labels = ("unparsed",)
        return finalize(text, segments, policy=self.policy)

    def _damaged(self, root: Node) -> bool:
        """Whether syntax errors cover so much of the file that its structure is a guess.

        What counts is the text under error nodes, and the whole of a top-level item that
        misses a closing bracket (tree-sitter then nests the rest of the file inside it).
        Only subtrees holding an error are walked, with a work list.
        """
        if root.is_error:
            return True
        if not root.has_error:
            return False
        limit = (root.end_byte - root.start_byte) * ERROR_SHARE
        damaged = 0
        for item in self._items(root):
            top = item.node
            if not top.has_error:
                continue
            size = top.end_byte - top.start_byte
            hurt = 0
            stack = [top]
            while stack and hurt < size:
                node = stack.pop()
                if node.is_error:
                    hurt += node.end_byte - node.start_byte
                elif node.is_missing:
                    hurt = size if node.type in _CLOSERS else hurt
                elif node.has_error:
                    stack.extend(node.children)
            damaged += min(hurt, size)
            if damaged > limit:
                return True
        return False

    def _items(self, node: Node) -> list[_Item]:
        """The items of a body in order, with transparent nodes (`#ifdef`) looked through."""
        out: list[_Item] = []
        transparent = self.grammar.transparent
        # (children left to visit, where the next item's chunk starts if earlier, depth)
        stack: list[tuple[list[tuple[Node, str | None]], int | None, int]] = [
            (_named(node)[::-1], None, 0)
        ]
        while stack:
            children, lead, depth = stack[-1]
            if not children:
                stack.pop()
                continue
            child, field_name = children.pop()
            if field_name in ("name", "condition", "value") and depth > 0:
                continue  # the `#ifdef NAME` of a transparent node, not an item
            if child.start_byte == child.end_byte:
                continue  # a token tree-sitter inserted to recover: no text of its own
            stack[-1] = (children, None, depth)  # its head goes with its first item only
            start = child.start_byte if lead is None else lead
            if child.type in transparent and depth < MAX_TRANSPARENT_DEPTH:
                stack.append((_named(child)[::-1], start, depth + 1))
                continue
            out.append(_Item(child, start))
        return out

    def _find(self, src: _Source, node: Node, in_class: bool) -> _Decl | None:
        """The declaration this item is, looking through wrappers; None for a statement."""
        g = self.grammar
        inner = node
        for _ in range(MAX_UNWRAP):
            if inner.type not in g.wrappers:
                break
            nxt = (
                inner.child_by_field_name("declaration")
                or inner.child_by_field_name("definition")
                or (inner.child_by_field_name("body") if inner.type in _MODIFIERS else None)
                or next(
                    (
                        c
                        for c in reversed(inner.named_children)
                        if c.type not in g.prefixes
                        and c.type not in ("template_parameter_list", "decorator")
                    ),
                    None,
                )
            )
            if nxt is None:
                return None
            inner = nxt
        if g.special is not None:
            found = g.special(src, inner, in_class)
            if found is not None:
                return found
        kind = inner.type
        if kind in g.functions:
            if kind in g.needs_body and not _has_body(inner):
                return None
            return _Decl("function", src.name(inner.child_by_field_name("name")))
        if kind in g.classes:
            name = src.name(inner.child_by_field_name("name"))
            return _Decl("class", _GENERIC.sub("", name) if name else None, body=_body(g, inner))
        if kind in g.namespaces:
            return _Decl(
                "namespace",
                src.name(inner.child_by_field_name("name")),
                body=_body(g, inner),
                methods=g.methods_in_namespaces,
                prefix=g.namespaces[kind],
            )
        return None

    def _segments(self, src: _Source, root: Node) -> list[Segment]:
        """Segments with byte starts, in document order; each runs to the next start."""
        starts: list[tuple[int, Segment]] = []
        classes: dict[str, Segment] = {}
        owned: list[_Owned] = []
        work = [_Level(root, None, (), False, 0, ChunkKind.MODULE, covered=False)]
        while work:  # a work list, not recursion: levels are few, and bounded
            level = work.pop()
            for at, seg, decl in self._level(src, level, classes, owned):
                starts.append((at, seg))
                if (
                    decl is not None
                    and decl.body is not None
                    and level.depth + 1 < MAX_CONTAINER_DEPTH
                ):
                    work.append(self._inside(decl, seg, level))
        for entry in owned:  # a method defined apart from its type hangs off the type
            cls = classes.get(entry.owner)
            if cls is not None:
                entry.segment.parent = cls
            if (cls is not None or self.language == "go") and entry.name:
                entry.segment.labels = (f"method:{entry.name}",)
        return _cover(len(src.data), starts)

    @staticmethod
    def _inside(decl: _Decl, seg: Segment, level: _Level) -> _Level:
        assert decl.body is not None
        holds_methods = decl.role == "class" or (decl.role == "namespace" and decl.methods)
        return _Level(
            decl.body,
            seg,
            seg.heading_path,
            holds_methods,
            level.depth + 1,
            ChunkKind.BLOCK if decl.role == "class" else ChunkKind.MODULE,
            covered=True,
        )

    # Long: one pass over a level's items, with the state of its current run and comments.
    def _level(
        self,
        src: _Source,
        level: _Level,
        classes: dict[str, Segment],
        owned: list[_Owned],
    ) -> list[tuple[int, Segment, _Decl | None]]:
        """The segments one level starts: a run of statements, or a declaration each."""
        data = src.data
        out: list[tuple[int, Segment, _Decl | None]] = []
        floor = _body_start(level.node, self.grammar.prefixes)  # never above its header
        run = level.covered  # the container's own chunk holds what precedes its first member
        pending: list[_Item] = []  # comments and attributes waiting for what they document

        def open_run(item: _Item) -> None:
            at = _line_start(data, item.start)
            out.append((at, Segment(at, 0, level.run_kind, level.path, parent=level.parent), None))

        loose: _Item | None = None  # the first comment since the last code, if not pending
        for item in self._items(level.node):
            node = item.node
            if item.start != node.start_byte and not _opens_line(data, item.start):
                item.start = node.start_byte  # a head mid-line (`SENT;`) stays where it is
            if node.type in self.grammar.prefixes:
                if not pending and not _opens_line(data, item.start):
                    continue  # trails the code before it on its line: stays with that code
                if pending and not _adjacent(data, pending[-1].node, item.start):
                    loose = loose or pending[0]
                    pending = []
                pending.append(item)
                continue
            decl = self._find(src, node, level.in_class)
            if decl is None:
                if not run:
                    open_run(loose or (pending[0] if pending else item))
                    run = True
                pending, loose = [], None
                continue
            # Comments apart from it (a blank line between) stay with the code above them.
            if pending and _adjacent(data, pending[-1].node, item.start):
                at = _line_start(data, pending[0].start)
            else:
                at = _line_start(data, item.start)
            if self.grammar.comment_lines and at == _line_start(data, at):
                at = max(_comments_above(data, at, self.grammar.comment_lines), floor)
            pending, loose = [], None
            out.append((at, self._segment(decl, at, level, classes, owned), decl))
            run = False
        return out

    def _segment(
        self,
        decl: _Decl,
        at: int,
        level: _Level,
        classes: dict[str, Segment],
        owned: list[_Owned],
    ) -> Segment:
        name = decl.name
        path = (*level.path, name) if name else level.path
        if decl.role == "block":
            return Segment(
                at, 0, decl.kind, path, "", level.parent, decl.labels, atomic=decl.atomic
            )
        if decl.role == "function":
            kind = ChunkKind.FUNCTION
            label = "method" if level.in_class else "function"
            if decl.owner and not level.in_class and name:
                # `Store<T>::put` is a method when the file declares Store (settled at the end)
                path = (*level.path, decl.owner, name)
                label, name = "function", f"{decl.owner}::{name}"
        elif decl.role == "class":
            kind, label = ChunkKind.CLASS, "class"
        else:
            kind, label = ChunkKind.MODULE, decl.prefix
        names = (name, *decl.also) if name else decl.also
        labels = tuple(f"{label}:{n}" for n in names)
        seg = Segment(at, 0, kind, path, "", level.parent, labels, atomic=True)
        if decl.role == "function" and decl.owner and not level.in_class:
            owned.append(_Owned(seg, decl.owner, decl.name))
        if decl.role == "class":
            for n in names:
                classes.setdefault(n, seg)
        return seg


def _body(grammar: Grammar, node: Node) -> Node | None:
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    return next((c for c in node.named_children if c.type in grammar.bodies), None)


def _body_start(node: Node, prefixes: frozenset[str]) -> int:
    """Where a body's items may begin: after its opening brace, or after the header (a
    comment between the header and the body, which Ruby's grammar puts beside the body,
    documents the body's first item)."""
    first = node.children[0] if node.children else None
    if first is not None and not first.is_named and first.type in ("{", "block_start"):
        return first.end_byte
    before = node.prev_sibling
    while before is not None and before.type in prefixes:
        before = before.prev_sibling
    return before.end_byte if before is not None else 0


def _breaks(data: bytes, start: int, end: int) -> int:
    return len(_BREAK.findall(data, start, end))


def _adjacent(data: bytes, before: Node, start: int) -> bool:
    """Whether `before` ends on the line above `start` or on its line: no blank line.

    A comment's node may hold the line break that ends it (or its CR alone): what counts
    is the text after the comment's last visible character.
    """
    if data[before.end_byte : start].strip():
        return False
    visible = before.start_byte + len(data[before.start_byte : before.end_byte].rstrip())
    return _breaks(data, visible, start) <= 1


def _line_start(data: bytes, offset: int) -> int:
    """The start of `offset`'s line when only indentation precedes it, else `offset`."""
    position = offset
    while position > 0 and data[position - 1] in b" \t":
        position -= 1
    if position == 0 or data[position - 1] in b"\r\n":
        return position
    return offset


def _opens_line(data: bytes, offset: int) -> bool:
    """Whether only indentation precedes `offset` on its line."""
    position = _line_start(data, offset)
    return position != offset or position == 0 or data[position - 1] in b"\r\n"


def _comments_above(data: bytes, start: int, marker: bytes) -> int:
    """`start` moved up over the comment lines directly above it (`marker` opens each).

    Python's grammar puts a comment written above a dedented `def` inside the block
    before it; read as text, it documents the `def`.
    """
    position = start
    while position > 0:
        end = position - 1  # the line break ending the line above
        if end > 0 and data[end - 1 : end + 1] == b"\r\n":
            end -= 1
        begin = max(data.rfind(b"\n", 0, end), data.rfind(b"\r", 0, end)) + 1
        if not data[begin:end].lstrip(b" \t").startswith(marker):
            break
        position = begin
    return position


def _cover(size: int, starts: list[tuple[int, Segment]]) -> list[Segment]:
    """One segment per start offset, in order, each running to the next (the first from 0:
    text before the first item is a module run of its own)."""
    by_offset: dict[int, Segment] = {}
    for offset, seg in starts:
        held = by_offset.get(offset)
        if held is None or (held.kind is ChunkKind.MODULE and not held.labels):
            by_offset[offset] = seg
    ordered = sorted(by_offset.items(), key=lambda item: item[0])
    if not ordered or ordered[0][0] > 0:
        ordered.insert(0, (0, Segment(0, 0, ChunkKind.MODULE)))
    segments = []
    for k, (offset, seg) in enumerate(ordered):
        seg.start = offset
        seg.end = ordered[k + 1][0] if k + 1 < len(ordered) else size
        segments.append(seg)
    return segments


def _no_blank_lead(text: str, segments: list[Segment]) -> None:
    """A chunk never begins with blank lines: a start before them moves to the line of the
    next visible character (its indentation kept); the chunk before runs on to it."""
    for k, seg in enumerate(segments):
        blank = _LEADING_SPACE.match(text, seg.start, seg.end)
        visible = blank.end() if blank else seg.start
        if visible > seg.start and NEWLINE.search(text, seg.start, visible):
            seg.start = visible if visible == seg.end else _line_start_text(text, visible)
            if k:
                segments[k - 1].end = seg.start


def _line_start_text(text: str, offset: int) -> int:
    position = offset
    while position > 0 and text[position - 1] in " \t":
        position -= 1
    return position if position == 0 or text[position - 1] in "\r\n" else offset


def _to_chars(text: str, data: bytes, segments: list[Segment]) -> None:
    """Turn the segments' UTF-8 byte offsets into character offsets of `text`, in one pass."""
    if len(data) == len(text):
        return
    offsets = sorted({s.start for s in segments} | {s.end for s in segments})
    chars: dict[int, int] = {}
    position = count = 0
    for offset in offsets:
        cut = offset
        while 0 < cut < len(data) and data[cut] & 0xC0 == 0x80:
            cut -= 1  # never inside a character
        count += len(data[position:cut].decode("utf-8", "surrogatepass"))
        chars[offset] = count
        position = cut
    for seg in segments:
        seg.start, seg.end = chars[seg.start], chars[seg.end]


class HclParser(TreeSitterParser):
    """Terraform / HCL by top-level block: `block:resource`, `label:aws_s3_bucket`, …"""

    version = "2.0.0"  # 2.0: the tree-sitter grammar, any block type, comments above a block

    def __init__(self, policy: SizePolicy | None = None) -> None:
        super().__init__("hcl", "hcl", policy)


def code_parsers() -> list[TreeSitterParser]:
    """One parser per language this indexer cuts with tree-sitter (Python keeps `ast`)."""
    return [
        TreeSitterParser("go", "go"),
        TreeSitterParser("java", "java"),
        TreeSitterParser("javascript", "javascript"),
        TreeSitterParser("typescript", "typescript"),
        TreeSitterParser("tsx", "tsx"),
        TreeSitterParser("rust", "rust"),
        TreeSitterParser("c", "c"),
        TreeSitterParser("cpp", "cpp"),
        TreeSitterParser("csharp", "csharp"),
        TreeSitterParser("ruby", "ruby"),
        TreeSitterParser("kotlin", "kotlin"),
        TreeSitterParser("bash", "shell"),
        TreeSitterParser("sql", "sql"),
        HclParser(),
    ]
