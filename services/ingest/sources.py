"""Readers for local sources: a git repository at a revision, or a plain folder (no I/O
beyond reading them)."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from govindex.core import formats
from govindex.core.errors import GovindexError
from govindex.core.paths import selected

MAX_FILE_BYTES = 16 * 1024 * 1024


class SourceReadError(GovindexError):
    """The repository or folder cannot be read as asked."""


@dataclass(frozen=True)
class SourceFile:
    """One file of a snapshot: its document id and a fingerprint that changes with it."""

    doc_id: str
    fingerprint: str
    size: int


@dataclass(frozen=True)
class Skipped:
    doc_id: str
    reason: str


def decode_text(data: bytes, doc_id: str) -> str | Skipped:
    """UTF-8 text (a PDF, Word or other binary type as base64, which the indexer
    extracts), or why the file is not indexable."""
    if len(data) > MAX_FILE_BYTES:
        return Skipped(doc_id, f"file is {len(data)} bytes, over the {MAX_FILE_BYTES} limit")
    if formats.is_binary(doc_id):
        return formats.encode(data)
    if b"\x00" in data[:8192]:
        return Skipped(doc_id, "binary file (NUL byte)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Skipped(doc_id, f"not UTF-8 text ({exc.reason} at byte {exc.start})")


class GitSnapshot:
    """A commit of a local git repository, read with the git command line."""

    def __init__(self, repo: Path, rev: str = "HEAD") -> None:
        self.repo = repo
        if not (repo / ".git").exists() and not (repo / "HEAD").exists():
            raise SourceReadError(f"{repo} is not a git repository (no .git found)")
        # The revision after --end-of-options: whatever it is, git never reads it as an option.
        self.sha = self._git(
            "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}"
        ).strip()
        stamp = self._git("show", "-s", "--format=%ct", self.sha).strip()
        self.committed_at = datetime.fromtimestamp(int(stamp), UTC)

    @property
    def source_version(self) -> str:
        return f"git:{self.sha}"

    def _git(self, *args: str, input_bytes: bytes | None = None) -> str:
        return self._git_bytes(*args, input_bytes=input_bytes).decode()

    def _git_bytes(self, *args: str, input_bytes: bytes | None = None) -> bytes:
        try:
            done = subprocess.run(
                ["git", "-C", str(self.repo), *args],
                input=input_bytes,
                capture_output=True,
                check=True,
            )
        except FileNotFoundError as exc:
            raise SourceReadError("the git command is not installed") from exc
        except subprocess.CalledProcessError as exc:
            raise SourceReadError(
                f"git {' '.join(args[:2])} failed in {self.repo}: "
                f"{exc.stderr.decode(errors='replace').strip()}"
            ) from exc
        return done.stdout

    def last_changes(self, paths: Sequence[str]) -> dict[str, tuple[str, datetime]]:
        """For each path, the commit (sha, time) that last changed it, up to this commit.

        One walk of the history with `git log --name-only`, stopping when all are found.
        """
        wanted = set(paths)
        found: dict[str, tuple[str, datetime]] = {}
        if not wanted:
            return found
        out = self._git_bytes(
            "log", "--format=%x01%H %ct", "--name-only", "-z", "--no-renames", self.sha
        )
        sha, when = self.sha, self.committed_at
        for token in out.split(b"\x00"):
            for piece in token.split(b"\n"):
                if piece.startswith(b"\x01"):
                    head, stamp = piece[1:].decode().split()
                    sha, when = head, datetime.fromtimestamp(int(stamp), UTC)
                elif piece:
                    path = piece.decode("utf-8", errors="surrogateescape")
                    if path in wanted and path not in found:
                        found[path] = (sha, when)
            if len(found) == len(wanted):
                break
        return found

    def files(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        among: Collection[str] | None = None,
    ) -> list[SourceFile]:
        """The selected files; with `among`, only those of these document ids."""
        listing = self._git_bytes("ls-tree", "-r", "-z", "--long", "--full-tree", self.sha)
        found: list[SourceFile] = []
        for entry in listing.split(b"\x00"):
            if not entry:
                continue
            meta, path = entry.split(b"\t", 1)
            mode, kind, blob, size = meta.split()
            doc_id = path.decode("utf-8", errors="surrogateescape")
            if kind != b"blob" or mode == b"120000" or not selected(doc_id, include, exclude):
                continue
            if among is not None and doc_id not in among:
                continue
            found.append(SourceFile(doc_id, f"git-blob:{blob.decode()}", int(size)))
        return found

    def read(self, files: Sequence[SourceFile]) -> Iterator[tuple[SourceFile, bytes]]:
        """Blob contents, through one `git cat-file --batch`."""
        if not files:
            return
        request = "".join(f"{f.fingerprint.removeprefix('git-blob:')}\n" for f in files).encode()
        out = self._git_bytes("cat-file", "--batch", input_bytes=request)
        pos = 0
        for file in files:
            header_end = out.index(b"\n", pos)
            size = int(out[pos:header_end].split()[2])
            start = header_end + 1
            yield file, out[start : start + size]
            pos = start + size + 1


class FolderSnapshot:
    """A plain folder; a file's version is the sha256 of its bytes."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise SourceReadError(f"{root} is not a directory")
        self.root = root
        self.observed_at = datetime.now(UTC)

    def files(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        among: Collection[str] | None = None,
    ) -> list[SourceFile]:
        """The selected files, each hashed; with `among`, only those of these document ids
        (a backfill step hashes its own files, not the whole folder again)."""
        found = []
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root).as_posix()
            if among is not None and rel not in among:
                continue
            if any(part.startswith(".") for part in PurePosixPath(rel).parts):
                continue
            if not path.is_file() or path.is_symlink() or not selected(rel, include, exclude):
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found.append(SourceFile(rel, f"sha256:{digest}", path.stat().st_size))
        return found

    def read(self, files: Sequence[SourceFile]) -> Iterator[tuple[SourceFile, bytes]]:
        """Each file's bytes now, with the fingerprint of those bytes: a file rewritten since
        `files` listed it is recorded as what was emitted, not as what was listed."""
        for file in files:
            data = (self.root / file.doc_id).read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            yield replace(file, fingerprint=f"sha256:{digest}", size=len(data)), data
