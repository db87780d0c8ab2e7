"""The project's Python dependencies for the image: locked with hashes, installed as wheels only."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from image.platform import AMD64, Platform

REPO = Path(__file__).resolve().parents[1]
LOCK = Path(__file__).with_name("requirements.lock")  # amd64's; see lock_path

# The interpreter the image runs (Debian bookworm's), not the one running the build.
PYTHON_VERSION = "3.11"


def wheel_platforms(platform: Platform = AMD64) -> list[str]:
    """Debian 12's glibc is 2.36: wheels for it or any older glibc, newest first (pip's order)."""
    m = platform.machine
    legacy = (
        ["manylinux2014"] if m == "aarch64" else ["manylinux2014", "manylinux2010", "manylinux1"]
    )
    return [f"manylinux_2_{minor}_{m}" for minor in range(36, 4, -1)] + [f"{t}_{m}" for t in legacy]


def target(platform: Platform = AMD64) -> list[str]:
    """pip's options for wheels of the image's interpreter on the platform."""
    return [
        "--only-binary=:all:",
        *(f"--platform={p}" for p in wheel_platforms(platform)),
        f"--python-version={PYTHON_VERSION}",
        "--implementation=cp",
        "--abi=cp311",
    ]


def lock_path(base: Path, platform: Platform) -> Path:
    """The one place each architecture's lock is named: amd64's is the base, others beside it.

    A lock per architecture, since wheels with compiled parts differ by platform (and pip's
    hash checking wants exactly the files it will install).
    """
    return base if platform == AMD64 else base.with_name(f"{base.stem}-{platform.debian}.lock")


class LockError(Exception):
    """The lock cannot be made or installed; the message says which package."""


def file_requirements(path: Path) -> list[str]:
    """The requirement lines of a requirements file, without comments."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def project_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The command's dependencies and the server extra's (the image runs every component)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["server"]]


def locked(path: Path) -> dict[str, tuple[str, list[str]]]:
    """The pins of a lock file: name -> (version, sha256 hashes)."""
    pins: dict[str, tuple[str, list[str]]] = {}
    name = ""
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("--hash") else line
        if not line:
            continue
        if "==" in line:
            name, _, version = line.rstrip(" \\").partition("==")
            pins[name] = (version.strip(), [])
        elif "--hash=sha256:" in line and name:
            pins[name][1].append(line.split("--hash=sha256:", 1)[1].strip(" \\"))
    return pins


def lock(
    requirements: list[str],
    path: Path = LOCK,
    source: str = "dependencies and server extra of pyproject.toml",
    platform: Platform = AMD64,
) -> int:
    """Resolve the requirements for the image's platform; pin each wheel by version and hash."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed"]
    cmd += ["--target=/nonexistent", "--report=-", *target(platform), *requirements]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LockError(f"pip could not resolve the dependencies: {proc.stderr.strip()[-800:]}")
    lines = [
        "# The image's Python packages, resolved for CPython 3.11 on manylinux "
        f"{platform.machine} from the",
        f"# {source}. Written by `python -m image lock`; installed with",
        "# --require-hashes, so each is exactly the wheel whose hash is given.",
    ]
    installs = json.loads(proc.stdout)["install"]
    for item in sorted(installs, key=lambda i: i["metadata"]["name"].lower()):
        meta, info = item["metadata"], item["download_info"]
        digest = info.get("archive_info", {}).get("hashes", {}).get("sha256")
        if not digest:
            raise LockError(f"{meta['name']}: the index gave no sha256 for {info['url']}")
        lines += [f"{meta['name']}=={meta['version']} \\", f"    --hash=sha256:{digest}"]
    path.write_text("\n".join(lines) + "\n")
    return len(installs)


def install(into: Path, path: Path = LOCK, platform: Platform = AMD64) -> None:
    """Install the locked wheels into a directory, without bytecode (the image's Python compiles
    it)."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes"]
    cmd += ["--no-compile", "--disable-pip-version-check", f"--target={into}", *target(platform)]
    cmd += ["--requirement", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LockError(
            f"installing {path.name} with pip failed: {proc.stderr.strip()[-800:]}\n"
            "if pyproject.toml's dependencies changed, `python -m image lock` updates the lock"
        )
