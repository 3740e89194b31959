"""Examples run as printed. Every example of every `--help` parses as the command it names
(its arguments, options and their values, through the same parser a run uses, without
running it); those that need no server run; and the typical session of `govindex --help`,
the first steps of the README and the getting-started page run against `govindex up` as a
person types them, with the example repository of `examples/`. On that stack, the first
hour's mistakes are told in plain words: an empty answer says where to look (and the same
whatever the index holds), a deletion of a document that never existed is refused, and an
ingest names the command a source's type needs."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from govindex.cli.main import EPILOG, app

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
GOVINDEX = (sys.executable, "-m", "govindex.cli.main")
MAKE_REPO = ROOT / "examples" / "make-handbook-repo.sh"
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
# Commands whose examples run without a server (`source apply` only with --check).
NO_SERVER = {("source", "init"), ("source", "apply"), ("chunk",)}
Check = Callable[[subprocess.CompletedProcess[str]], bool]


# --- reading examples -------------------------------------------------------------------


def command_lines(text: str, *, indented: bool) -> list[str]:
    """The command lines of a text: with `indented`, only those of its indented blocks (a
    help's examples). A trailing backslash joins the next line; comments are dropped."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        if indented and not raw.startswith("    "):
            pending = ""
            continue
        line = f"{pending} {raw.strip()}".strip() if pending else raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        words = shlex.split(line, comments=True)
        if words:
            lines.append(shlex.join(words))
    return lines


def helps() -> Iterator[tuple[list[str], Any, str]]:
    """Every command and group, as (path, click command, help text), and the epilog of
    `govindex --help` as the root's."""
    root = typer.main.get_command(app)

    def walk(path: list[str], command: Any) -> Iterator[tuple[list[str], Any, str]]:
        yield path, command, inspect.cleandoc(command.help or "")
        for name, sub in (getattr(command, "commands", None) or {}).items():
            yield from walk([*path, name], sub)

    yield [], root, EPILOG
    yield from walk([], root)


def examples() -> list[tuple[list[str], list[str]]]:
    """(the help it is in, the example's words from `govindex` on), environment dropped."""
    found = []
    for path, _, text in helps():
        for line in command_lines(text, indented=True):
            words = shlex.split(line)
            while words and ENV_ASSIGNMENT.match(words[0]):
                words.pop(0)
            if words and words[0] == "govindex":
                found.append((path, words))
    return found


def resolve(words: list[str]) -> tuple[list[str], Any, list[str]]:
    """The command an example names, and the words it takes."""
    command: Any = typer.main.get_command(app)
    path, rest = [], list(words[1:])
    while getattr(command, "commands", None) and rest and rest[0] in command.commands:
        path.append(rest[0])
        command = command.commands[rest.pop(0)]
    return path, command, rest


def leaves() -> list[list[str]]:
    return [p for p, c, _ in helps() if p and not getattr(c, "commands", None)]


# --- running them -----------------------------------------------------------------------


def env() -> dict[str, str]:
    """As a person's shell: no GOVINDEX_* settings, so commands use the stack.json."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")}


def argv(line: str) -> list[str]:
    words = shlex.split(line)
    if words[0] in ("govindex", ".venv/bin/govindex"):
        return [*GOVINDEX, *words[1:]]
    return words


def run(cwd: Path, line: str, check: Check | None = None, timeout: float = 90) -> Any:
    """Run a printed command line in `cwd`; with `check`, again until it holds (what the
    pipeline does after a command takes a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(
            argv(line), cwd=cwd, capture_output=True, text=True, timeout=180, env=env()
        )
        ok = done.returncode == 0 and (check is None or check(done))
        if ok or check is None or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert ok, f"`{line}` in {cwd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


def found_something(done: subprocess.CompletedProcess[str]) -> bool:
    return not done.stdout.startswith("0 result(s)")


def run_as_printed(cwd: Path, lines: list[str]) -> list[str]:
    """Run each line as printed (`govindex up` is the fixture's): a query until the indexer
    has caught up and it finds something, verify-purge until the purge is done."""
    ran = []
    for line in lines:
        words = shlex.split(line)
        if words[0].endswith("govindex") and words[1:2] == ["up"]:
            continue
        if words[1:2] == ["query"]:
            run(cwd, line, found_something)
        elif words[1:2] == ["verify-purge"]:
            run(cwd, line, lambda done: True)  # exit 0 once nothing is left
        else:
            run(cwd, line)
        ran.append(line)
    return ran


def sh_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", markdown, re.M | re.S)


def shown_with_examples(cwd: Path) -> None:
    """`cwd` as the clone of govindex a page speaks of: its examples/ folder."""
    (cwd / "examples").symlink_to(ROOT / "examples", target_is_directory=True)


# --- every example parses; those that need no server run --------------------------------


def test_every_help_example_parses_as_the_command_it_names() -> None:
    found = examples()
    named: set[tuple[str, ...]] = set()
    for where, words in found:
        path, command, rest = resolve(words)
        assert not getattr(command, "commands", None), f"{where}: {words} names a group"
        try:
            command.make_context(" ".join(["govindex", *path]), rest)
        except Exception as exc:  # a usage error, a bad value, a refused pattern
            raise AssertionError(f"govindex {' '.join(where)} --help: {words}: {exc}") from exc
        named.add(tuple(path))
    without = [p for p in leaves() if tuple(p) not in named]
    assert without == [], f"commands whose --help shows no example: {without}"
    assert len(found) >= 60


def test_the_examples_that_need_no_server_run_as_printed(tmp_path: Path) -> None:
    """In the example repository: `source init`, `source apply --check`, and `chunk` on the
    files the repository has (the others name files of other repositories)."""
    subprocess.run([str(MAKE_REPO), "handbook"], cwd=tmp_path, check=True, capture_output=True)
    repo = tmp_path / "handbook"
    ran = []
    for where, words in examples():
        path, _, rest = resolve(words)
        runs = bool(where) and tuple(path) in NO_SERVER  # the root's is a session (below)
        if path == ["source", "apply"] and "--check" not in rest:
            runs = False  # registering needs the stack
        if path == ["chunk"] and not all((repo / w).exists() for w in rest if w[0] != "-"):
            runs = False  # a file of another repository
        if runs:
            done = run(repo, shlex.join(words))
            assert done.stdout, words
            ran.append(words)
    assert any(w[1:3] == ["source", "init"] for w in ran)
    assert any("--check" in w for w in ran)
    assert any(w[1:2] == ["chunk"] for w in ran)


# --- the typical session of `govindex --help`, on a running stack ------------------------


def test_the_typical_session_of_govindex_help_runs_as_printed(running: Path) -> None:
    cwd = running
    subprocess.run([str(MAKE_REPO), "handbook"], cwd=cwd, check=True, capture_output=True)
    session = command_lines(EPILOG, indented=True)
    assert any(" --purpose " in line for line in session)
    ran = run_as_printed(cwd, session)
    assert [shlex.split(line)[1] for line in ran] == [
        "source",
        "source",
        "ingest",
        "query",
        "delete",
        "documents",
        "status",
    ]

    who = "--tenant acme --principal group:eng"
    # An empty answer says where to look, in the same words whatever the index holds: a
    # purpose no source allows and a query nothing matches cannot be told apart.
    refused = run(cwd, f"govindex query failover {who} --purpose marketing")
    unmatched = run(cwd, f"govindex query zqxjv {who} --purpose support")
    for done in (refused, unmatched):
        assert done.stdout.startswith("0 result(s)")
        assert "hint: " in done.stderr and "--purpose" in done.stderr
    assert refused.stderr == unmatched.stderr
    quiet = run(cwd, f"govindex query failover {who} --purpose marketing --json")
    assert quiet.stdout == "" and quiet.stderr == refused.stderr
    found = run(cwd, f"govindex query failover {who} --purpose support")
    assert "hint:" not in found.stderr
    pack = subprocess.run(
        argv(f"govindex pack failover {who} --purpose marketing"),
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env(),
    )
    assert pack.returncode in (0, 2), pack.stderr  # 2: evidence it asked for is missing
    assert json.loads(pack.stdout)["items"] == [] and pack.stderr == refused.stderr

    # A document the source never held is refused, with the ones it might have meant.
    typo = subprocess.run(
        argv("govindex delete --source handbook --doc runbooks/cache-flsh.md"),
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env(),
    )
    assert typo.returncode == 1
    assert "holds no document 'runbooks/cache-flsh.md'" in typo.stderr
    assert "Did you mean runbooks/cache-flush.md" in typo.stderr and "--force" in typo.stderr
    listed = run(cwd, "govindex documents --source handbook --json").stdout
    assert "cache-flsh" not in listed

    # An ingest that does not fit the source's type names the one that does.
    wrong = subprocess.run(
        argv("govindex ingest path handbook --source handbook"),
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env(),
    )
    assert wrong.returncode == 1
    assert "is a git source" in wrong.stderr and "govindex ingest git REPO" in wrong.stderr
    run(cwd, "govindex source init --type folder --id notes notes.yaml")
    applied = run(cwd, "govindex source apply notes.yaml")
    assert "created  notes" in applied.stdout and "govindex ingest path DIR" in applied.stderr
    folder = subprocess.run(
        argv("govindex ingest git handbook --source notes"),
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env(),
    )
    assert folder.returncode == 1
    assert "is a folder source" in folder.stderr and "govindex ingest path DIR" in folder.stderr
    assert "holds no documents yet" in run(cwd, "govindex documents --source notes").stdout


# --- the README's first steps and the getting-started page, on a running stack ----------


def test_the_readme_first_steps_run_as_printed(running: Path) -> None:
    cwd = running
    shown_with_examples(cwd)
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Your own repository\n", 1)[1].split("\n## ", 1)[0]
    (block,) = sh_blocks(section)
    lines = command_lines(block, indented=False)
    assert lines[0] == "examples/make-handbook-repo.sh build/handbook"
    ran = run_as_printed(cwd, lines)
    assert len(ran) == len(lines) - 1  # all but `govindex up`
    documents = run(cwd, ".venv/bin/govindex documents --source handbook --json").stdout
    held = {json.loads(line)["doc_id"] for line in documents.splitlines()}
    assert "runbooks/cache-flush.md" in held and "runbooks/db-failover.md" in held


def test_the_getting_started_page_runs_as_printed(running: Path) -> None:
    """Every block of docs/getting-started/your-repository.md about the example handbook
    (the folder of your own it shows next, /srv/notes, is not on this machine)."""
    cwd = running
    shown_with_examples(cwd)
    page = (ROOT / "docs" / "getting-started" / "your-repository.md").read_text()
    blocks = [b for b in sh_blocks(page) if "notes" not in b]
    lines = [line for block in blocks for line in command_lines(block, indented=False)]
    assert "examples/make-handbook-repo.sh build/handbook" in lines
    assert any("--as-of 2025-03-01T00:00:00Z" in line for line in lines)
    ran = run_as_printed(cwd, lines)
    assert any("verify-purge" in line for line in ran)
    # Both commits were ingested: the failover runbook is at its second version.
    documents = run(cwd, ".venv/bin/govindex documents --source handbook --json").stdout
    rows = {json.loads(line)["doc_id"]: json.loads(line) for line in documents.splitlines()}
    assert rows["runbooks/db-failover.md"]["last_sequence"] == 2
    assert rows["runbooks/cache-flush.md"]["state"] == "deleted"
