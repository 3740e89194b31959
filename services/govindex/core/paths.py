"""Which files of a source are documents: include/exclude patterns with gitignore
semantics (gitwildmatch), as users know them from `.gitignore` and GitHub path filters.

`*.md` matches at any depth, `docs/*.md` only directly under `docs/`, `**/*.md` also at the
root, `docs/` everything below `docs`, and `!pattern` takes a match back. pathspec is the
implementation pip and black use for the same job.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import pathspec

from govindex.core.errors import GovindexError


class PatternError(GovindexError, ValueError):
    """A pattern that gitignore syntax does not allow."""


@lru_cache(maxsize=256)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    try:
        return pathspec.GitIgnoreSpec.from_lines(patterns)
    except ValueError as exc:  # pathspec's pattern errors are ValueErrors
        raise PatternError(f"{exc}; patterns follow .gitignore syntax") from exc


def check_patterns(patterns: Sequence[str]) -> list[str]:
    """The patterns, if every one is valid; PatternError naming the bad one otherwise."""
    for pattern in patterns:
        _spec((pattern,))
    return list(patterns)


def selected(path: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether a repository-relative POSIX path is included and not excluded."""
    return _spec(tuple(include)).match_file(path) and not (
        exclude and _spec(tuple(exclude)).match_file(path)
    )
