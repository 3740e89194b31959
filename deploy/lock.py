"""Pin the image's Python packages with their hashes, for `pip install --require-hashes`.

Writes two files the Dockerfile installs from:

- deploy/requirements.lock: every package govindex and govindex-client (clients/python)
  need at run time, exact versions, with the sha256 of each wheel an image may pick;
- deploy/build-requirements.lock: the build backends of those two projects (setuptools,
  wheel), so the image builds them without fetching anything unpinned.

Regenerate after changing a dependency in pyproject.toml or clients/python/pyproject.toml
(it asks the package index through pip, which needs its network; nothing is installed):

    .venv/bin/python deploy/lock.py

How: `pip install --dry-run --report` resolves the projects for each image platform
(CPython 3.11 on manylinux x86_64, at the glibc of the base images below; aarch64 with
--arch aarch64 once every dependency publishes wheels for it)
from wheels only; the report names the file chosen and its sha256 as the index publishes
it (`pip download` + `pip hash` when it does not). A package every platform resolves to
the same version gets the hashes of every platform's file; one that only some platforms
need carries a `platform_machine` marker. pip's configuration files are not read (local
mirrors and find-links would pin files the image cannot fetch); PIP_INDEX_URL or
--index-url choose the index.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
LOCK = DEPLOY / "requirements.lock"
BUILD_LOCK = DEPLOY / "build-requirements.lock"
PROJECTS = [ROOT / "clients" / "python", ROOT]  # the client first: govindex needs it
PYTHON = "3.11"
ARCHES = ("x86_64", "aarch64")
# wordllama 0.4 publishes no aarch64 wheel: an arm64 image would build it from source,
# which a wheels-only, hash-checked install refuses. x86_64 until it does.
DEFAULT_ARCHES = ("x86_64",)
# glibc of python:3.11-slim's Debian releases: 2.36 (bookworm) and 2.41 (trixie). pip
# prefers the newest manylinux wheel the system allows, so each level may pick another file.
GLIBC = ("2.36", "2.41")
_NAME = re.compile(r"[-_.]+")


def canonical(name: str) -> str:
    return _NAME.sub("-", name).lower()


@dataclass
class Pin:
    name: str
    version: str
    hashes: set[str] = field(default_factory=set)
    arches: set[str] = field(default_factory=set)


def platforms(arch: str, glibc: str) -> list[str]:
    """pip --platform tags a system of that glibc accepts, most preferred first."""
    major, minor = (int(p) for p in glibc.split("."))
    tags = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 16, -1)]
    return [*tags, f"manylinux2014_{arch}"]


def pip_env() -> dict[str, str]:
    """The environment pip runs in: no configuration files, no local find-links."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
    )
    for keep in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_INDEX_URL"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    return env


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args],
        check=False,
        capture_output=True,
        text=True,
        env=pip_env(),
        cwd=ROOT,
    )
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        raise SystemExit(f"pip {args[0]} failed:\n" + "\n".join(errors or [done.stderr]))
    return done


def resolve(
    requirements: Sequence[str], platform_tags: Sequence[str] | None, index: list[str]
) -> list[dict[str, object]]:
    """pip's installation report for the requirements on those platforms (None: any)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        target = ["--target", str(Path(tmp) / "target")]
        args = ["install", "--dry-run", "--quiet", "--ignore-installed", "--only-binary=:all:"]
        args += ["--report", str(report), *target, *index]
        if platform_tags is not None:
            args += ["--python-version", PYTHON, "--implementation", "cp", "--abi", "cp311"]
            for tag in platform_tags:
                args += ["--platform", tag]
        pip(*args, *requirements)
        installed: list[dict[str, object]] = json.loads(report.read_text())["install"]
        return installed


def file_hash(name: str, version: str, url: str, platform_tags: Sequence[str] | None) -> str:
    """The sha256 of the file pip chose, downloaded and hashed, when the index gave none."""
    with tempfile.TemporaryDirectory() as tmp:
        args = ["download", "--no-deps", "--only-binary=:all:", "--dest", tmp]
        if platform_tags is not None:
            args += ["--python-version", PYTHON, "--implementation", "cp", "--abi", "cp311"]
            for tag in platform_tags:
                args += ["--platform", tag]
        pip(*args, f"{name}=={version}")
        wanted = url.rsplit("/", 1)[-1]
        files = [p for p in Path(tmp).iterdir() if p.name == wanted] or list(Path(tmp).iterdir())
        out = pip("hash", "--algorithm", "sha256", str(files[0])).stdout
        return out.split("--hash=sha256:", 1)[1].split()[0]


def collect(
    pins: dict[str, Pin],
    report: Iterable[dict[str, object]],
    arch: str | None,
    platform_tags: Sequence[str] | None,
) -> None:
    for item in report:
        info = item["download_info"]
        meta = item["metadata"]
        assert isinstance(info, dict) and isinstance(meta, dict)
        if "dir_info" in info:  # the projects themselves, installed from the tree
            continue
        name, version = str(meta["name"]), str(meta["version"])
        key = canonical(name)
        pin = pins.setdefault(key, Pin(name, version))
        if pin.version != version:
            raise SystemExit(
                f"{name}: {pin.version} on one platform, {version} on another; pin it in "
                "pyproject.toml to a version with wheels for every platform"
            )
        archive = info.get("archive_info") or {}
        digest = (archive.get("hashes") or {}).get("sha256")
        url = str(info["url"])
        pin.hashes.add(digest or file_hash(name, version, url, platform_tags))
        if arch is not None:
            pin.arches.add(arch)


def render(pins: dict[str, Pin], title: str, arches: Sequence[str]) -> str:
    lines = [
        f"# GENERATED by deploy/lock.py: {title}. Do not edit; regenerate with",
        "#   .venv/bin/python deploy/lock.py",
        f"# For CPython {PYTHON} on manylinux (glibc {', '.join(GLIBC)}; {', '.join(arches)}).",
        "# Install with: pip install --require-hashes --only-binary=:all: -r <this file>",
    ]
    for key in sorted(pins):
        pin = pins[key]
        marker = ""
        if pin.arches and set(arches) - pin.arches:
            machines = " or ".join(f'platform_machine == "{a}"' for a in sorted(pin.arches))
            marker = f" ; {machines}"
        lines.append(f"{pin.name}=={pin.version}{marker} \\")
        hashes = sorted(pin.hashes)
        lines += [f"    --hash=sha256:{h} \\" for h in hashes[:-1]]
        lines.append(f"    --hash=sha256:{hashes[-1]}")
    return "\n".join(lines) + "\n"


def build_requirements() -> list[str]:
    """Every [build-system] requirement of the projects, once."""
    found: dict[str, str] = {}
    for project in PROJECTS:
        data = tomllib.loads((project / "pyproject.toml").read_text())
        for requirement in data["build-system"]["requires"]:
            found.setdefault(requirement, requirement)
    return list(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index-url", help="the package index (default: pip's)")
    parser.add_argument(
        "--arch", action="append", choices=ARCHES, help=f"default: {', '.join(DEFAULT_ARCHES)}"
    )
    args = parser.parse_args(argv)
    index = ["--index-url", args.index_url] if args.index_url else []
    arches = tuple(args.arch or DEFAULT_ARCHES)

    runtime: dict[str, Pin] = {}
    for arch in arches:
        for glibc in GLIBC:
            tags = platforms(arch, glibc)
            print(f"resolving for {arch}, glibc {glibc} ...", file=sys.stderr)
            report = resolve([str(p) for p in PROJECTS], tags, index)
            collect(runtime, report, arch, tags)
    LOCK.write_text(render(runtime, "the image's run-time packages", arches))
    print(f"wrote {LOCK.relative_to(ROOT)}: {len(runtime)} packages", file=sys.stderr)

    build: dict[str, Pin] = {}
    collect(build, resolve(build_requirements(), None, index), None, None)
    BUILD_LOCK.write_text(render(build, "the projects' build backends", arches))
    print(f"wrote {BUILD_LOCK.relative_to(ROOT)}: {len(build)} packages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
