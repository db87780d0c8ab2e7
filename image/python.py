"""The project's Python dependencies for the image: locked with hashes, installed as wheels only."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = Path(__file__).with_name("requirements.lock")

# The interpreter the image runs (Debian bookworm's), not the one running the build.
PYTHON_VERSION = "3.11"
# Debian 12's glibc is 2.36: wheels for it or any older glibc, newest first (pip's preference).
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]
TARGET = [
    "--only-binary=:all:",
    *(f"--platform={p}" for p in PLATFORMS),
    f"--python-version={PYTHON_VERSION}",
    "--implementation=cp",
    "--abi=cp311",
]


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


def lock(
    requirements: list[str],
    path: Path = LOCK,
    source: str = "dependencies and server extra of pyproject.toml",
) -> int:
    """Resolve the requirements for the image's platform; pin each wheel by version and hash."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed"]
    cmd += ["--target=/nonexistent", "--report=-", *TARGET, *requirements]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LockError(f"pip could not resolve the dependencies: {proc.stderr.strip()[-800:]}")
    lines = [
        "# The image's Python packages, resolved for CPython 3.11 on manylinux x86_64 from the",
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


def install(target: Path, path: Path = LOCK) -> None:
    """Install the locked wheels into target, without bytecode (the image's Python compiles it)."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes"]
    cmd += ["--no-compile", "--disable-pip-version-check", f"--target={target}", *TARGET]
    cmd += ["--requirement", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LockError(
            f"pip install of {path.name} failed: {proc.stderr.strip()[-800:]}\n"
            "if pyproject.toml's dependencies changed, `python -m image lock` updates the lock"
        )
