"""Debian packages, pinned by version and SHA-256, fetched with `apt-get download` and unpacked."""

from __future__ import annotations

import hashlib
import re
import subprocess
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LOCK = Path(__file__).with_name("debian.lock")

# The interpreter and the shared libraries that it, its standard-library extensions and the wheels'
# own extensions load. Not the whole dependency closure: readline, curses, sqlite, dbm and NIS
# pull in ncurses, Kerberos and Berkeley DB for modules nothing here imports.
PACKAGES = (
    "libc6",
    "libgcc-s1",  # Rust extensions (cryptography, pydantic-core) unwind through it
    "libssl3",
    "zlib1g",
    "libexpat1",
    "libffi8",
    "libbz2-1.0",
    "liblzma5",
    "libuuid1",
    "media-types",  # /etc/mime.types, for mimetypes
    "netbase",  # /etc/services and /etc/protocols, for getaddrinfo with service names
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "python3.11-minimal",
)


class PackageError(Exception):
    """A pinned package cannot be fetched or does not match its lock entry."""


@dataclass(frozen=True, slots=True)
class Package:
    """One pinned Debian package."""

    name: str
    version: str
    architecture: str
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.name}_{self.version}_{self.architecture}.deb".replace(":", "%3a")


def load_lock(path: Path = LOCK) -> list[Package]:
    """The pinned packages, in lock order."""
    doc = tomllib.loads(path.read_text())
    return [
        Package(p["name"], p["version"], p["architecture"], p["sha256"]) for p in doc["package"]
    ]


def write_lock(packages: list[Package], path: Path = LOCK) -> None:
    """Write the lock file (a TOML array, one table per package)."""
    lines = [
        "# Debian bookworm packages the image is unpacked from. Written by `python -m image lock`;",
        "# the build fetches exactly these versions and checks each file's SHA-256.",
    ]
    for p in packages:
        lines += ["", "[[package]]", f'name = "{p.name}"', f'version = "{p.version}"']
        lines += [f'architecture = "{p.architecture}"', f'sha256 = "{p.sha256}"']
    path.write_text("\n".join(lines) + "\n")


def resolve(names: tuple[str, ...] = PACKAGES) -> list[Package]:
    """The archive's current candidate version of each package, with its SHA-256."""
    resolved = []
    for name in names:
        out = _run(["apt-cache", "show", "--no-all-versions", name])
        fields = dict(re.findall(r"^(Version|Architecture|SHA256): (\S+)$", out, re.MULTILINE))
        if len(fields) != 3:
            raise PackageError(f"apt-cache show {name}: no Version/SHA256 (is it a Debian host?)")
        resolved.append(Package(name, fields["Version"], fields["Architecture"], fields["SHA256"]))
    return resolved


def fetch(packages: list[Package], cache: Path, progress: Callable[[str], None]) -> list[Path]:
    """Each package's .deb from the cache or `apt-get download`, checked against its SHA-256."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [p for p in packages if not _is_valid(cache / p.filename, p)]
    if missing:
        progress(f"downloading {len(missing)} of {len(packages)} Debian packages")
        # Run as root, apt fetches as _apt unless the directory is writable by it; this one is ours.
        cmd = ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root"]
        proc = subprocess.run(
            cmd + [f"{p.name}={p.version}" for p in missing],
            cwd=cache,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise PackageError(
                f"apt-get download failed: {proc.stderr.strip()[-500:]}\n"
                "a pinned version may have left the archive: `python -m image lock` pins the "
                "current ones (and `apt-get update` refreshes the package lists)"
            )
    paths = []
    for p in packages:
        path = cache / p.filename
        if not _is_valid(path, p):
            raise PackageError(f"{path.name}: SHA-256 differs from image/debian.lock ({p.sha256})")
        paths.append(path)
    return paths


def unpack(debs: list[Path], root: Path) -> None:
    """Unpack each package's files into root, as dpkg would before running any script."""
    for deb in debs:
        _run(["dpkg-deb", "--extract", str(deb), str(root)])


def _is_valid(path: Path, package: Package) -> bool:
    if not path.exists():
        return False
    return hashlib.sha256(path.read_bytes()).hexdigest() == package.sha256


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PackageError(f"{' '.join(cmd[:3])} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout
