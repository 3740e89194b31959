"""The git and folder readers against real files: versions, binary and oversized files."""

from __future__ import annotations

from pathlib import Path

import pytest

from govindex.core import formats
from ingest import sources
from ingest.sources import FolderSnapshot, GitSnapshot, Skipped, SourceReadError, decode_text
from tests.support.pipeline import git

pytestmark = pytest.mark.integration


def test_a_commit_is_read_with_its_sha_time_and_filtered_files(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\x00\x00")
    (tmp_path / "notes.txt").write_text("plain\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "one", when="2025-02-03T04:05:06+00:00")
    snap = GitSnapshot(tmp_path)
    assert snap.source_version == f"git:{git(tmp_path, 'rev-parse', 'HEAD')}"
    assert snap.committed_at.isoformat() == "2025-02-03T04:05:06+00:00"
    files = snap.files(formats.DEFAULT_INCLUDE, ["notes.*"])
    assert [f.doc_id for f in files] == ["docs/a.md"]
    assert [data for _, data in snap.read(files)] == [b"# A\n"]


def test_binary_undecodable_and_oversized_content_is_skipped_with_a_reason() -> None:
    assert isinstance(decode_text(b"abc\x00def", "x"), Skipped)
    assert "UTF-8" in decode_text(b"\xff\xfe", "x").reason  # type: ignore[union-attr]
    big = b"a" * (sources.MAX_FILE_BYTES + 1)
    assert "limit" in decode_text(big, "x").reason  # type: ignore[union-attr]
    assert decode_text("ünïcode".encode(), "x") == "ünïcode"


def test_a_bad_revision_says_what_git_said(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    with pytest.raises(SourceReadError, match="rev-parse"):
        GitSnapshot(tmp_path, "no-such-branch")
    with pytest.raises(SourceReadError, match="not a git repository"):
        GitSnapshot(tmp_path / "nowhere")


def test_include_and_exclude_follow_gitignore_semantics(tmp_path: Path) -> None:
    """`**/*.md` reaches the root, `docs/*.md` stays one level deep, `!` takes a file back,
    a directory pattern covers what is below it: .gitignore's rules, as users expect."""
    git(tmp_path, "init", "-q", "-b", "main")
    for path in ("README.md", "docs/a.md", "docs/deep/b.md", "drafts/c.md", "src/x.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("# x\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "one", when="2025-02-03T04:05:06+00:00")
    snap = GitSnapshot(tmp_path)

    def ids(include: list[str], exclude: list[str] = []) -> list[str]:  # noqa: B006
        return sorted(f.doc_id for f in snap.files(include, exclude))

    assert ids(["**/*.md"]) == ["README.md", "docs/a.md", "docs/deep/b.md", "drafts/c.md"]
    assert ids(["*.md"], ["drafts/"]) == ["README.md", "docs/a.md", "docs/deep/b.md"]
    assert ids(["docs/*.md"]) == ["docs/a.md"]
    assert ids(["docs/**"]) == ["docs/a.md", "docs/deep/b.md"]
    assert ids(["*.md", "!docs/deep/*"]) == ["README.md", "docs/a.md", "drafts/c.md"]
    assert ids(["/*.md"]) == ["README.md"]


def test_a_pattern_gitignore_does_not_allow_is_refused_at_registration() -> None:
    from pydantic import ValidationError

    from govindex.core.records import FolderSettings

    with pytest.raises(ValidationError, match=r"Invalid git pattern: 'a\\\\'"):
        FolderSettings(path="/srv/docs", include=["*.md", "a\\"])
    assert FolderSettings(path="/srv/docs", exclude=["drafts/"]).exclude == ["drafts/"]


def test_a_folder_file_rewritten_after_listing_is_read_with_its_new_fingerprint(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.md").write_text("# A\n\nfirst\n")
    snapshot = FolderSnapshot(tmp_path)
    listed = snapshot.files(["*.md"], [])
    (tmp_path / "a.md").write_text("# A\n\nsecond, longer\n")
    [(file, data)] = list(snapshot.read(listed))
    assert data == b"# A\n\nsecond, longer\n"
    # What the connector records as emitted is what it read, so the next sync compares the
    # source with the content the index got, not with the listing.
    assert file == FolderSnapshot(tmp_path).files(["*.md"], [])[0] != listed[0]


def test_a_listing_among_some_documents_names_only_those(tmp_path: Path) -> None:
    for name in ("a.md", "b.md", "c.txt"):
        (tmp_path / name).write_text(f"# {name}\n")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "three")
    for snapshot in (FolderSnapshot(tmp_path), GitSnapshot(tmp_path)):
        every = {f.doc_id: f for f in snapshot.files(["*.md", "*.txt"], [])}
        assert set(every) == {"a.md", "b.md", "c.txt"}
        some = snapshot.files(["*.md"], [], among={"a.md", "c.txt", "gone.md"})
        assert some == [every["a.md"]]  # c.txt is not selected, gone.md does not exist
