"""MkDocs hook: the CLI and settings reference pages, generated from the code at build time.

`docs/reference/cli.md` holds the marker `<!-- generated: cli -->`, replaced by every
command of the `govindex` Typer app (help, usage, arguments, options);
`docs/reference/settings.md` holds `<!-- generated: settings -->`, replaced by every field
of `govindex.core.settings.Settings` (environment variable, type, default, bounds,
description); `<!-- generated: parsers -->` becomes the table of parsers with their
versions and file types, and `<!-- generated: model package.module.Model -->` the table of
a pydantic model's fields (type, default, bounds, description), for the wire and manifest
models. Nothing here is written by hand, so the pages cannot drift from the code.
"""

from __future__ import annotations

import re
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

CLI_MARKER = "<!-- generated: cli -->"
SETTINGS_MARKER = "<!-- generated: settings -->"
PARSERS_MARKER = "<!-- generated: parsers -->"
MODEL_MARKER = re.compile(r"<!-- generated: model ([A-Za-z_][\w.]*) -->")
ENV_PREFIX = "GOVINDEX_"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, settings_reference())
    if PARSERS_MARKER in markdown:
        markdown = markdown.replace(PARSERS_MARKER, parsers_reference())
    return MODEL_MARKER.sub(lambda m: model_reference(m.group(1)), markdown)


# --- the CLI ---------------------------------------------------------------------------


def commands() -> Iterator[tuple[list[str], Any, Any]]:
    """Every command of the app, depth first, as (path, command, context); groups included.

    Typer vendors its own click, so commands are told apart by what they have (a group has
    `commands`), not by their class."""
    import typer

    from govindex.cli.main import app

    root = typer.main.get_command(app)
    yield from _walk(["govindex"], root, None)


def _walk(path: list[str], command: Any, parent: Any) -> Iterator[tuple[list[str], Any, Any]]:
    context = command.context_class(command, info_name=path[-1], parent=parent)
    yield path, command, context
    for name in getattr(command, "commands", {}) or {}:
        sub = command.commands[name]
        if not getattr(sub, "hidden", False):
            yield from _walk([*path, name], sub, context)


def registered_commands() -> list[str]:
    """Every command path, e.g. `govindex source apply` (the root excluded)."""
    return [" ".join(path) for path, _, _ in commands() if len(path) > 1]


def cli_reference() -> str:
    out: list[str] = []
    for path, command, context in commands():
        name = " ".join(path)
        depth = min(len(path) + 1, 4)  # govindex: ##, a command or group: ###, below: ####
        if len(path) == 1:
            depth = 2
        anchor = "-".join(path)
        out.append(f"{'#' * depth} `{name}` {{#{anchor}}}\n")
        out.append(_help_markdown(command.help or ""))
        usage = command.get_usage(context).removeprefix("Usage: ").strip()
        out.append(f"```text\n{usage}\n```\n")
        arguments = [p for p in command.params if _is_argument(p)]
        options = [p for p in command.params if not _is_argument(p) and not p.hidden]
        if arguments:
            out.append("**Arguments**\n")
            out.extend(_argument_line(p) for p in arguments)
            out.append("")
        if options:
            out.append("**Options**\n")
            out.extend(_option_line(p, context) for p in options)
            out.append("- `--help`, `-h`: show the help and exit.")
            out.append("")
        if getattr(command, "commands", None):
            subs = ", ".join(
                f"[`{n}`](#{anchor}-{n})"
                for n, c in command.commands.items()
                if not getattr(c, "hidden", False)
            )
            out.append(f"**Commands:** {subs}\n")
        if command.epilog:
            out.append(_help_markdown(command.epilog))
    return "\n".join(out)


def _is_argument(param: Any) -> bool:
    return type(param).__name__.endswith("Argument")


def _argument_line(param: Any) -> str:
    metavar = param.metavar or param.name.upper()
    facts = ["required" if param.required else "optional"]
    if param.nargs == -1:
        facts.append("any number")
    if param.default not in (None, ()) and not param.required:
        facts.append(f"default: {_plain(param.default)}")
    help_text = _inline(param.help or "")
    line = f"- `{metavar}` ({', '.join(facts)})"
    return f"{line}: {help_text}" if help_text else line


def _option_line(param: Any, context: Any) -> str:
    record = param.get_help_record(context)
    declaration, help_text = record if record else (", ".join(param.opts), param.help or "")
    help_text = _inline(help_text.strip())
    return f"- `{declaration}`: {help_text}" if help_text else f"- `{declaration}`"


def _help_markdown(text: str) -> str:
    """Help text as Markdown: paragraphs stay paragraphs, indented runs become code blocks.

    Typer's markdown mode already uses backticks for code; `\\b` (click's "do not rewrap")
    is dropped."""
    text = text.replace("\b", "")
    blocks: list[str] = []
    for paragraph in re.split(r"\n\s*\n", textwrap.dedent(text).strip()):
        lines = paragraph.splitlines()
        # An indented run, or a run of command lines (examples whose indentation the
        # docstring's dedent took away), is shown as typed.
        if lines and (
            all(line.startswith("  ") for line in lines)
            or all(line.startswith("govindex ") for line in lines)
        ):
            blocks.append("```text\n" + textwrap.dedent(paragraph) + "\n```")
        else:
            blocks.append(_inline(" ".join(line.strip() for line in lines)))
    return "\n\n".join(blocks) + "\n"


def _inline(text: str) -> str:
    """Escape what Markdown would read as markup outside code spans."""
    parts = re.split(r"(`[^`]*`)", text.replace("\b", ""))
    return "".join(
        part
        if part.startswith("`")
        else part.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")
        for part in parts
    )


def _plain(value: Any) -> str:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


# --- settings --------------------------------------------------------------------------


def settings_reference() -> str:
    from pydantic_core import PydanticUndefined

    from govindex.core.settings import Settings

    rows = [
        "| environment variable | type | default | bounds | description |",
        "|---|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        if field.default_factory is not None:
            default: Any = field.default_factory()  # type: ignore[call-arg]
        elif field.default is PydanticUndefined:
            default = None
        else:
            default = field.default
        rows.append(
            f"| `{ENV_PREFIX}{name.upper()}` | {_cell(_type_name(field.annotation))} | "
            f"{_default(name, default)} | {_bounds(field.metadata) or ''} | "
            f"{_cell(field.description or '—')} |"
        )
    return "\n".join(rows) + "\n"


def _bounds(metadata: list[Any]) -> str:
    return ", ".join(_constraints(metadata, many=False))


def _default(name: str, value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, Path):
        return f"`{value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list):
        return "`{}`" if not value else f"`{value}`"
    if name.endswith("_bytes") and isinstance(value, int) and value % (1024 * 1024) == 0:
        return f"`{value}` ({value // (1024 * 1024)} MiB)"
    return f"`{value}`"


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        shown = " or ".join(_type_name(a) for a in members)
        return f"{shown} (optional)" if len(members) < len(get_args(annotation)) else shown
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in get_args(annotation))
    if origin is dict:
        key, value = get_args(annotation)
        return f"JSON object ({_type_name(key)} → {_type_name(value)})"
    if origin is list:
        (item,) = get_args(annotation)
        return f"list of {_type_name(item)}"
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    names = {
        "Path": "path",
        "str": "string",
        "int": "integer",
        "float": "number",
        "bool": "boolean",
    }
    name = getattr(annotation, "__name__", str(annotation))
    return names.get(name, name)


def _cell(text: str) -> str:
    """Text for a table cell: a pipe inside a code span stays as it is (the table extension
    does not split there), one outside becomes an entity; line breaks are shown as \\n."""
    parts = re.split(r"(`[^`]*`)", _inline(text))
    return "".join(
        part if part.startswith("`") else part.replace("|", "&#124;") for part in parts
    ).replace("\n", "\\n")


# --- parsers ---------------------------------------------------------------------------


def parsers_reference() -> str:
    from indexer.parsers import BY_SUFFIX, PARSERS

    rows = ["| parser | version | chosen by `auto` for |", "|---|---|---|"]
    for name, parser in PARSERS.items():
        suffixes = sorted(s for s, n in BY_SUFFIX.items() if n == name)
        chosen = ", ".join(f"`{s}`" for s in suffixes)
        if name == "text":
            chosen = f"{chosen} and any other file type" if chosen else "any other file type"
        rows.append(f"| `{name}` | {parser.version} | {chosen} |")
    return "\n".join(rows) + "\n"


# --- pydantic models (wire requests, manifests) ----------------------------------------

# Patterns shared by many fields, named for a reader instead of shown as regexes.
_PATTERN_NAMES = {
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$": "an id: letters, digits, `.`, `_`, `-`; 1-128, "
    "starting with a letter or digit",
    r"^[^\s,\x00-\x1f\x7f-\x9f]+$": "no whitespace, commas or control characters",
    r"^[A-Z_][A-Z0-9_]*$": "an environment variable name",
    r"^[^\x00-\x1f]+$": "no control characters",
    r"^[^\x00]+$": "no NUL character",
}


def model_reference(dotted: str) -> str:
    """The fields of one pydantic model as a Markdown table."""
    import importlib

    from pydantic_core import PydanticUndefined

    module_name, _, class_name = dotted.rpartition(".")
    model = getattr(importlib.import_module(module_name), class_name)
    rows = ["| field | type | default | bounds | description |", "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if field.is_required():
            default = "**required**"
        elif field.default_factory is not None:
            value = field.default_factory()  # type: ignore[call-arg]
            default = _model_default(value)
        else:
            default = _model_default(None if field.default is PydanticUndefined else field.default)
        rows.append(
            f"| `{name}` | {_cell(_field_type(field.annotation))} | {default} | "
            f"{_cell(_field_bounds(field.annotation, field.metadata))} | "
            f"{_cell(field.description or '')} |"
        )
    return "\n".join(rows) + "\n"


def _model_default(value: Any) -> str:
    from enum import Enum

    from pydantic import BaseModel

    if value is None:
        return "not set"
    if value == "":
        return "empty"
    if isinstance(value, BaseModel):
        return "its defaults"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | tuple):
        return "`[]`" if not value else "`[" + ", ".join(str(v) for v in value) + "]`"
    if hasattr(value, "total_seconds"):  # a timedelta, as a manifest writes it
        return f"`{_iso_duration(value)}`"
    return f"`{value}`"


def _iso_duration(delta: Any) -> str:
    days, rest = divmod(int(delta.total_seconds()), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    clock = "".join(f"{n}{u}" for n, u in ((hours, "H"), (minutes, "M"), (seconds, "S")) if n)
    text = (f"{days}D" if days else "") + (f"T{clock}" if clock else "")
    return f"P{text}" if text else "PT0S"


def _field_type(annotation: Any) -> str:
    from enum import Enum
    from typing import Annotated

    from pydantic import BaseModel

    origin = get_origin(annotation)
    if origin is Annotated:
        return _field_type(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        shown = " or ".join(_field_type(a) for a in members)
        return f"{shown} or null" if len(members) < len(get_args(annotation)) else shown
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in get_args(annotation))
    if origin in (list, tuple):
        return f"list of {_field_type(get_args(annotation)[0])}"
    if origin is dict:
        key, value = get_args(annotation)
        return f"object ({_field_type(key)} → {_field_type(value)})"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"object ({annotation.__name__})"
    name = getattr(annotation, "__name__", str(annotation))
    return {
        "str": "string",
        "int": "integer",
        "float": "number",
        "bool": "boolean",
        "AwareDatetime": "date-time with a zone",
        "datetime": "date-time",
        "timedelta": "ISO 8601 duration",
    }.get(name, name)


def _field_bounds(annotation: Any, metadata: list[Any]) -> str:
    """The field's own bounds, and those of a list's items."""
    from typing import Annotated

    found = _constraints(metadata, many=get_origin(annotation) in (list, tuple))
    inner = annotation
    if get_origin(inner) in (Union, types.UnionType):
        inner = next(a for a in get_args(inner) if a is not type(None))
    if get_origin(inner) in (list, tuple):
        item = get_args(inner)[0]
        if get_origin(item) is Annotated:
            each = _constraints(_annotated_metadata(item), many=False)
            if each:
                found.append("each: " + ", ".join(each))
    elif get_origin(inner) is Annotated:
        found.extend(_constraints(_annotated_metadata(inner), many=False))
    return "; ".join(found)


def _annotated_metadata(annotated: Any) -> list[Any]:
    out: list[Any] = []
    for item in get_args(annotated)[1:]:
        out.extend(getattr(item, "metadata", None) or [item])
    return out


def _constraints(metadata: list[Any], *, many: bool) -> list[str]:
    unit = "items" if many else "characters"
    found: list[str] = []
    low = next((m.min_length for m in metadata if hasattr(m, "min_length")), None)
    high = next((m.max_length for m in metadata if hasattr(m, "max_length")), None)
    if low is not None and high is not None:
        found.append(f"{low}-{high} {unit}")
    elif high is not None:
        found.append(f"at most {high} {unit}")
    elif low == 1:
        found.append("at least one item" if many else "not empty")
    elif low:
        found.append(f"at least {low} {unit}")
    numbers = {
        attribute: getattr(item, attribute)
        for item in metadata
        for attribute in ("ge", "gt", "le", "lt")
        if getattr(item, attribute, None) is not None
    }
    if "ge" in numbers and "le" in numbers:
        found.append(f"{numbers.pop('ge')} to {numbers.pop('le')}")
    symbols = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    found.extend(f"{symbols[a]} {v}" for a, v in numbers.items())
    for item in metadata:
        pattern = getattr(item, "pattern", None)
        if pattern:
            found.append(_PATTERN_NAMES.get(pattern, f"pattern `{pattern}`"))
    return found
