"""A manifest's remote_url reaches git only as a repository address: refused at `source apply`
when git could read it as an option or a command, and passed after `--` when it is run."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from govindex.core.records import GitSettings
from ingest.mirror import GitMirror
from ingest.sources import SourceReadError
from tests.support.builders import MANIFEST_YAML
from tests.support.stack import govindex
from tests.support.webhooks import Remote

ACCEPTED = [
    "https://git.example.internal/acme/handbook.git",
    "git@github.com:acme/handbook.git",
    "github.com:acme/handbook.git",
    "ssh://git@git.example.internal:2222/acme/handbook.git",
    "git+ssh://git@git.example.internal/acme/handbook.git",
    "ssh://git@[::1]/acme/handbook.git",
    "git://git.example.internal/acme/handbook.git",
    "file:///srv/git/handbook.git",
    "/srv/git/handbook.git",
    "repos/handbook",
    "./-handbook",
    "/srv/git/odd:name.git",
]

REFUSED = {
    "--upload-pack=touch /tmp/x": "start with '-'",
    "-oProxyCommand=touch /tmp/x": "start with '-'",
    "ext::sh -c touch% /tmp/x": "'ext::'",
    "EXT::sh -c touch% /tmp/x": "'EXT::'",
    "fd::17": "'fd::'",
    "http://git.example.internal/acme/handbook.git": "use https://",
    "ftp://git.example.internal/acme/handbook.git": "'ftp://'",
    "HTTPS://git.example.internal/acme/handbook.git": "'HTTPS://'",
    "ssh://-oProxyCommand=touch%20x/acme/repo": "host or user",
    "ssh://-oProxyCommand=x@host/acme/repo": "host or user",
    "git@-oProxyCommand=x:acme/repo": "scp-like",
    "host:": "scp-like",
    "https://git.example.internal/acme/\nhandbook": "control characters",
}


def git_settings(remote_url: str) -> GitSettings:
    return GitSettings(repository="acme/handbook", remote_url=remote_url)


@pytest.mark.parametrize("remote_url", ACCEPTED)
def test_remote_urls_over_plain_transports_are_accepted(remote_url: str) -> None:
    assert git_settings(remote_url).remote_url == remote_url


@pytest.mark.parametrize(("remote_url", "reason"), REFUSED.items())
def test_remote_urls_git_could_read_as_options_or_commands_are_refused(
    remote_url: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        git_settings(remote_url)
    (error,) = refused.value.errors()
    assert error["loc"] == ("remote_url",)
    assert reason in error["msg"]


def manifest_yaml(source_id: str, remote_url: str) -> str:
    return (
        f"source_id: {source_id}\nsource_type: git\n{MANIFEST_YAML}"
        f"git:\n  repository: acme/{source_id}\n  remote_url: '{remote_url}'\n"
    )


def test_source_apply_check_refuses_an_option_or_a_command_as_remote_url(
    tmp_path: Path,
) -> None:
    option = tmp_path / "option.yaml"
    option.write_text(manifest_yaml("option", "--upload-pack=touch /tmp/x"))
    command = tmp_path / "command.yaml"
    command.write_text(manifest_yaml("command", "ext::sh -c touch% /tmp/x"))
    done = govindex(tmp_path, "source", "apply", "--check", str(option), str(command), check=False)
    assert done.returncode == 1
    assert f"{option}: field 'git.remote_url'" in done.stderr
    assert f"{command}: field 'git.remote_url'" in done.stderr
    assert "start with '-'" in done.stderr and "'ext::'" in done.stderr


def test_source_apply_check_accepts_every_plain_transport(tmp_path: Path) -> None:
    plain = [*ACCEPTED[:2], "ssh://git@host/acme/r.git", "file:///srv/r.git", "/srv/r.git"]
    manifests = tmp_path / "plain.yaml"
    manifests.write_text(
        "---\n".join(manifest_yaml(f"plain-{n}", url) for n, url in enumerate(plain))
    )
    done = govindex(tmp_path, "source", "apply", "--check", str(manifests), check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ok  plain-") == len(plain)


def test_a_fetch_from_a_remote_named_like_an_option_runs_no_command(tmp_path: Path) -> None:
    # Before `--`, git read this remote_url as its --upload-pack option and ran `touch owned`.
    remote = Remote(tmp_path / "remote")
    remote.commit("2025-01-01T00:00:00Z", {"a.md": "# A\n"})
    GitMirror(tmp_path / "mirrors", "src", str(remote.path)).fetch()
    hostile = GitMirror(tmp_path / "mirrors", "src", "--upload-pack=touch owned")
    with pytest.raises(SourceReadError, match="strange pathname"):
        hostile.fetch()
    assert not list(tmp_path.rglob("owned"))


def test_a_clone_of_a_remote_named_like_an_option_clones_that_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After `--` the URL is the repository to clone, here a folder of that name (git then
    # blocks the fetch from a path starting with '-', as the manifest check does).
    monkeypatch.chdir(tmp_path)
    remote = Remote(tmp_path / "--upload-pack=touch owned")
    first = remote.commit("2025-01-01T00:00:00Z", {"a.md": "# A\n"})
    mirror = GitMirror(tmp_path / "mirrors", "src", "--upload-pack=touch owned")
    with pytest.raises(SourceReadError, match="strange pathname"):
        mirror.fetch()
    assert mirror.head("main") == first
    assert not list(tmp_path.rglob("owned"))


def test_a_mirror_of_a_relative_remote_fetches_it_from_where_it_was_cloned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "repos").mkdir()
    remote = Remote(tmp_path / "repos" / "handbook")
    remote.commit("2025-01-01T00:00:00Z", {"a.md": "# A\n"})
    mirror = GitMirror(tmp_path / "mirrors", "src", "repos/handbook")
    mirror.fetch()
    second = remote.commit("2025-02-01T00:00:00Z", {"a.md": "# A, again\n"})
    mirror.fetch()
    assert mirror.head("main") == second


def test_a_mirror_refuses_transports_a_manifest_may_not_name(tmp_path: Path) -> None:
    # A manifest registered before remote_url was checked still cannot reach another
    # transport: git itself is told which ones are allowed.
    for remote_url in ("http://127.0.0.1:9/acme/handbook.git", "ext::sh -c touch% owned"):
        mirror = GitMirror(tmp_path / "mirrors", "src", remote_url)
        with pytest.raises(SourceReadError, match="not allowed"):
            mirror.fetch()
    assert not list(tmp_path.rglob("owned"))
