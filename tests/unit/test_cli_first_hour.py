"""What a platform team meets in its first hour with `govindex`, without any server: a help
that is quick, grouped and readable, a manifest to start from, and errors in plain words
naming the file. (The examples of every help, and the first steps of the README, run
against a stack in tests/e2e/test_help_examples.py.)"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from govindex.cli import common
from govindex.cli.main import EPILOG, app, main
from govindex.core.logs import LIBRARY_LEVELS, configure_logging
from govindex.core.manifests import load_manifests

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = (
    "psycopg",
    "opensearchpy",
    "aiokafka",
    "kafka",
    "faststream",
    "pypdfium2",
    "tree_sitter",
    "wordllama",
    "numpy",
)
PANELS = ("Getting started", "Sources & ingest", "Search & packs", "Inspection", "Jobs")
VALID = """\
source_id: handbook
tenant: acme
source_type: git
owner_team: platform
classification: internal
allowed_purposes: [support]
trust_level: authoritative
"""


def commands() -> Iterator[tuple[list[str], Any]]:
    """Every command and group under `govindex`, as (path after govindex, click command)."""

    def walk(path: list[str], command: Any) -> Iterator[tuple[list[str], Any]]:
        yield path, command
        for name, sub in (getattr(command, "commands", None) or {}).items():
            yield from walk([*path, name], sub)

    yield from walk([], typer.main.get_command(app))


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- a help that is quick ---------------------------------------------------------------


def test_help_imports_no_driver_parser_or_embedding_library() -> None:
    """Building the app and printing every level of help loads none of them: commands import
    what they run when they run (asserted on modules, not on time)."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from govindex.cli.main import main\n"
        "for args in (['--help'], ['source', '--help'], ['query', '--help'], "
        "['ingest', 'git', '--help'], ['jobs', 'list', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert main(args) == 0\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(done.stdout))
    heavy = sorted(m for m in loaded if m.split(".")[0] in DRIVERS)
    assert heavy == [], heavy
    assert "govindex.runtime.composition" not in loaded
    assert not any(m.startswith(("ingest.", "indexer.", "purger.", "reader.")) for m in loaded)


def test_the_installed_entry_point_imports_no_driver_for_help() -> None:
    """The console script `govindex --help`, as a person runs it (python -X importtime lists
    every module it imported)."""
    script = Path(sys.executable).with_name("govindex")
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable}")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "100"},
        check=True,
    )
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "govindex.cli.main" in imported
    assert sorted(m for m in imported if m.split(".")[0] in DRIVERS) == []
    assert "Typical session" in done.stdout


def test_what_the_cli_repeats_of_the_core_equals_the_core() -> None:
    from govindex.core.deadletters import MAX_REDRIVES
    from govindex.core.ports import AUDIT_ENDPOINTS, AUDIT_LIST_MAX
    from govindex.core.replays import TYPES
    from govindex.core.settings import DEFAULT_STATE_DIR
    from reader.models import CHANNELS

    assert common.DEFAULT_STATE_DIR == DEFAULT_STATE_DIR
    assert tuple(CHANNELS) == common.CHANNELS
    assert tuple(AUDIT_ENDPOINTS) == common.AUDIT_ENDPOINTS
    assert common.AUDIT_LIST_MAX == AUDIT_LIST_MAX
    assert tuple(TYPES) == common.EVENT_KINDS
    assert common.MAX_REDRIVES == MAX_REDRIVES


# --- grouped and readable ---------------------------------------------------------------


def test_every_top_level_command_sits_in_a_panel_and_the_panels_come_in_order(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    root = typer.main.get_command(app)
    for name, command in root.commands.items():
        assert getattr(command, "rich_help_panel", None), f"{name} has no help panel"
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "─ Commands ─" not in out  # nothing is left in the flat default list
    where = [out.index(f"─ {panel} ─") for panel in (*PANELS, "Operations")]
    assert where == sorted(where)
    assert out.index("─ Getting started ─") < out.index(" demo ") < out.index(" up ")


def test_no_help_shows_a_type_where_a_name_belongs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every option with a value and every argument is named (FILE, SOURCE, PATTERN, N);
    none reads `<str>`, `<path>`, `<int range>` or `<bool>`, and no flag shows a metavar."""
    monkeypatch.setenv("COLUMNS", "160")
    for path, command in commands():
        code, out, _ = run(capsys, *path, "--help")
        assert code == 0, path
        for shown in ("<str>", "<path>", "<int", "<float", "<bool", "<list", "<text>"):
            assert shown not in out, (path, shown)
        context = command.context_class(command, info_name=path[-1] if path else "govindex")
        for param in command.params:
            record = param.get_help_record(context)
            if record is not None:
                assert "<" not in record[0], (path, record[0])
    code, out, _ = run(capsys, "ingest", "git", "--help")
    assert "PATTERN" in out and "GLOB" not in out and "REPO" in out
    code, out, _ = run(capsys, "query", "--help")
    assert "PRINCIPAL" in out and "PURPOSE" in out and "TENANT" in out


def test_every_option_keeps_its_lower_case_name() -> None:
    """Typer names an option after its metavar when the two differ only in case (`--tenant`
    with metavar TENANT would become `--TENANT`): every option is declared by name."""
    for path, command in commands():
        for param in command.params:
            for name in (*param.opts, *getattr(param, "secondary_opts", ())):
                if name.startswith("-"):
                    assert re.fullmatch(r"-[a-z]|--[a-z0-9][a-z0-9-]*", name), (path, name)


def test_the_typical_session_names_the_purpose_and_keeps_one_command_a_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "--purpose" in EPILOG
    session = [
        line.strip() for line in EPILOG.splitlines() if line.startswith("    ") and line.strip()
    ]
    assert any(line.startswith("govindex query ") for line in session)
    monkeypatch.setenv("COLUMNS", "80")  # a terminal's width: the lines still fit
    code, out, _ = run(capsys, "--help")
    assert code == 0
    printed = {line.strip() for line in out.splitlines()}
    for line in session:
        assert line in printed, f"{line!r} is reflowed in `govindex --help`"


def test_every_example_is_shown_as_typed_one_command_a_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An example the markdown help reflows into its paragraph is unreadable and cannot be
    copied: each one is indented (a code block) and printed on a line of its own."""
    monkeypatch.setenv("COLUMNS", "200")
    for path, command in commands():
        text = inspect.cleandoc(command.help or "")
        examples = [line.strip() for line in text.splitlines() if line.startswith("    ")]
        assert not [line for line in text.splitlines() if line.startswith("govindex ")], path
        if not examples:
            continue
        code, out, _ = run(capsys, *path, "--help")
        assert code == 0, path
        printed = {line.strip() for line in out.splitlines()}
        for example in examples:
            assert example in printed, f"govindex {' '.join(path)} --help reflows {example!r}"


# --- a manifest to start from -----------------------------------------------------------


@pytest.mark.parametrize("kind", ["git", "folder", "cdc"])
def test_source_init_writes_a_commented_manifest_that_check_accepts(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / f"{kind}-source.yaml"
    code, out, _ = run(capsys, "source", "init", "--type", kind, str(target))
    assert code == 0 and f"wrote {target}" in out
    text = target.read_text()
    assert text.startswith("#") and "CHANGE" in text and f"source_type: {kind}" in text
    (manifest,) = load_manifests([target])
    assert manifest.source_id == f"{kind}-source"  # from the file's name
    assert manifest.source_type.value == kind
    code, out, _ = run(capsys, "source", "apply", "--check", str(target))
    assert code == 0 and f"ok  {kind}-source" in out
    if kind == "cdc":
        assert manifest.cdc is not None  # the connector needs its table: placeholders
    again, _, err = run(capsys, "source", "init", "--type", kind, str(target))
    assert again == 1 and "exists" in err and "--force" in err


def test_source_init_prints_to_stdout_and_refuses_a_bad_id_or_type(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "source", "init", "--id", "docs", "--tenant", "beta")
    assert code == 0 and "source_id: docs" in out and "tenant: beta" in out
    code, _, err = run(capsys, "source", "init", "--id", "not an id")
    assert code == 1 and "--id: should be an id" in err
    code, _, err = run(capsys, "source", "init", "--type", "svn")
    assert code == 2 and "git, folder, cdc" in err


def test_the_example_manifest_and_the_page_that_shows_it_agree() -> None:
    example = ROOT / "examples" / "sources" / "handbook.yaml"
    (manifest,) = load_manifests([example])
    assert (manifest.source_id, manifest.tenant, manifest.source_type.value) == (
        "handbook",
        "acme",
        "git",
    )
    page = (ROOT / "docs" / "getting-started" / "your-repository.md").read_text()
    block = page.split('```yaml title="handbook.yaml"\n', 1)[1].split("```", 1)[0]
    assert block == example.read_text()
    assert os.access(ROOT / "examples" / "make-handbook-repo.sh", os.X_OK)


# --- errors in plain words, naming the file ----------------------------------------------


def check(capsys: pytest.CaptureFixture[str], *paths: Path) -> str:
    code, _, err = run(capsys, "source", "apply", "--check", *map(str, paths))
    assert code == 1
    return err


def test_a_duration_written_wrong_says_how_to_write_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "sla.yaml"
    bad.write_text(VALID + "refresh_sla: 1h\n")
    err = check(capsys, bad)
    assert f"{bad}: field 'refresh_sla': expected a duration" in err
    assert "PT1H" in err and "1:00:00" in err and "(got '1h')" in err
    assert "timedelta" not in err and "identifier" not in err
    for fixed in ("PT1H", "'1:00:00'", "P1D"):
        bad.write_text(VALID + f"refresh_sla: {fixed}\n")
        assert run(capsys, "source", "apply", "--check", str(bad))[0] == 0, fixed


def test_yaml_errors_name_the_file_and_the_line_never_a_unicode_string(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    control = tmp_path / "control.yaml"
    control.write_text("source_id: x\ntenant: a\x07b\n")
    err = check(capsys, control)
    assert "<unicode string>" not in err
    assert f"{control}: not valid YAML" in err and "line 2" in err and "column 10" in err


def test_a_folder_an_empty_file_and_a_file_that_is_not_utf8_are_told_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "latin1.yaml"
    binary.write_bytes(b"source_id: caf\xe9\n")
    empty = tmp_path / "empty.yaml"
    empty.write_text("\n")
    err = check(capsys, tmp_path, binary, empty, tmp_path / "missing.yaml")
    assert f"{tmp_path}: is a folder" in err and "*.yaml" in err
    assert f"{binary}: is not UTF-8 text (line 1" in err
    assert f"{empty}: is empty" in err and "source init" in err
    assert f"{tmp_path / 'missing.yaml'}: no such file" in err
    assert "Traceback" not in err
    # in the order of the arguments
    assert err.index("is a folder") < err.index("not UTF-8") < err.index("is empty")


def test_misspelt_and_missing_fields_are_told_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        VALID.replace("trust_level: authoritative\n", "")
        + 'defualt_acl: ["group:eng"]\nenabled: maybe\nsource_type_x: 1\n'
    )
    err = check(capsys, bad)
    assert f"{bad}: field 'trust_level': Field required" in err  # as before
    assert "source init" in err  # ... and how to get every required field
    assert "field 'defualt_acl': not a field of a manifest; did you mean 'default_acl'?" in err
    assert "field 'enabled': should be true or false (got 'maybe')" in err
    assert "Extra inputs" not in err and "Input should be" not in err
    bad.write_text(VALID.replace("source_id: handbook", "source_id: 'my handbook'"))
    err = check(capsys, bad)
    assert "field 'source_id': should be an id" in err and "pattern" not in err


# --- library logs -----------------------------------------------------------------------


@pytest.fixture
def restored_logging() -> Iterator[None]:
    names = ["", *LIBRARY_LEVELS]
    before = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)
    configure_logging(level="WARNING")
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("restored_logging")
def test_library_logs_stay_at_warning_unless_debug() -> None:
    configure_logging(level="INFO", json_output=True)
    for name in ("opensearch", "elastic_transport", "urllib3", "httpx", "kafka", "aiokafka"):
        assert logging.getLogger(name).getEffectiveLevel() >= logging.WARNING, name
        assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
    configure_logging(level="DEBUG", json_output=True)
    for name in ("opensearch", "httpx", "aiokafka"):
        assert logging.getLogger(name).isEnabledFor(logging.DEBUG), name
