"""Debian packages, pinned by version and SHA-256, fetched with `apt-get download` and unpacked."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from image.platform import AMD64, PLATFORMS, Platform

LOCK = Path(__file__).with_name("debian.lock")  # amd64's; other architectures have their own
# The user-mode emulator that runs a foreign architecture's interpreter at build time: Debian's
# static qemu for the building machine's architecture, pinned like the image's packages.
EMULATOR_LOCK = Path(__file__).with_name("emulator.lock")
EMULATOR_PACKAGE = "qemu-user-static"

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


def cache_dir() -> Path:
    """The image builder's cache: Debian packages, wheels' unpacked trees, scratch roots."""
    if env := os.environ.get("ZEROSCALER_CACHE"):
        return Path(env) / "image"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zeroscaler" / "image"


def lock_path(platform: Platform) -> Path:
    """The one place the Debian lock of each architecture is named."""
    return LOCK if platform == AMD64 else LOCK.with_name(f"debian-{platform.debian}.lock")


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


def write_lock(packages: list[Package], path: Path = LOCK, what: str = "") -> None:
    """Write the lock file (a TOML array, one table per package)."""
    arches = ", ".join(sorted({p.architecture for p in packages}))
    lines = [
        f"# Debian bookworm packages ({arches}) {what or 'the image is unpacked from'}.",
        "# Written by `python -m image lock`; the build fetches exactly these versions and checks",
        "# each file's SHA-256.",
    ]
    for p in packages:
        lines += ["", "[[package]]", f'name = "{p.name}"', f'version = "{p.version}"']
        lines += [f'architecture = "{p.architecture}"', f'sha256 = "{p.sha256}"']
    path.write_text("\n".join(lines) + "\n")


def resolve(names: tuple[str, ...] = PACKAGES, platform: Platform = AMD64) -> list[Package]:
    """The archive's current candidate version of each package, with its SHA-256."""
    options = _apt_options(platform, refresh=True)
    resolved = []
    for name in names:
        out = _run(["apt-cache", *options, "show", "--no-all-versions", name])
        fields = dict(re.findall(r"^(Version|Architecture|SHA256): (\S+)$", out, re.MULTILINE))
        if len(fields) != 3:
            raise PackageError(f"apt-cache show {name}: no Version/SHA256 (is it a Debian host?)")
        resolved.append(Package(name, fields["Version"], fields["Architecture"], fields["SHA256"]))
    return resolved


def fetch(
    packages: list[Package],
    cache: Path,
    progress: Callable[[str], None],
    platform: Platform = AMD64,
) -> list[Path]:
    """Each package's .deb from the cache or `apt-get download`, checked against its SHA-256."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [p for p in packages if not _is_valid(cache / p.filename, p)]
    if missing:
        progress(
            f"downloading {len(missing)} of {len(packages)} Debian packages ({platform.debian})"
        )

        def download(options: list[str]) -> subprocess.CompletedProcess[str]:
            # Run as root, apt fetches as _apt unless the directory is writable by it; it is ours.
            cmd = ["apt-get", *options, "download", "-q", "-o", "APT::Sandbox::User=root"]
            return subprocess.run(
                cmd + [f"{p.name}={p.version}" for p in missing],
                cwd=cache,
                capture_output=True,
                text=True,
            )

        proc = download(_apt_options(platform, refresh=True))
        if proc.returncode != 0 and not platform.native:
            # The architecture's own package lists may be older than the lock: refresh them once.
            proc = download(_apt_options(platform, refresh=True, force=True))
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
            raise PackageError(f"{path.name}: SHA-256 differs from its lock entry ({p.sha256})")
        paths.append(path)
    return paths


def unpack(debs: list[Path], root: Path) -> None:
    """Unpack each package's files into root, as dpkg would before running any script."""
    for deb in debs:
        _run(["dpkg-deb", "--extract", str(deb), str(root)])


def emulator(platform: Platform, cache: Path, progress: Callable[[str], None]) -> Path | None:
    """The static qemu that runs the platform's binaries here, or None where they run natively.

    The package is unpacked into the cache, never installed: no binfmt handler is registered, so
    the build names the emulator in each command it runs.
    """
    if platform.native:
        return None
    (package,) = load_lock(EMULATOR_LOCK)
    binary = f"usr/bin/qemu-{platform.machine}-static"
    unpacked = cache / f"qemu-{package.version.replace(':', '_')}"
    if not (unpacked / binary).is_file():
        native = next(p for p in PLATFORMS.values() if p.native)
        (deb,) = fetch([package], cache / "debs", progress, native)
        progress(f"unpacking {deb.name} (the emulator for {platform.debian})")
        scratch = unpacked.with_name(unpacked.name + ".partial")
        shutil.rmtree(scratch, ignore_errors=True)
        _run(["dpkg-deb", "--extract", str(deb), str(scratch)])
        # The package has an emulator for every architecture qemu knows (370 MB); keep ours.
        keep = {f"qemu-{p.machine}-static" for p in PLATFORMS.values()}
        for other in (scratch / "usr/bin").glob("qemu-*"):
            if other.name not in keep:
                other.unlink()
        shutil.rmtree(unpacked, ignore_errors=True)
        scratch.rename(unpacked)
    return unpacked / binary


def _apt_options(platform: Platform, *, refresh: bool = False, force: bool = False) -> list[str]:
    """apt options for the platform: the system's own lists for the native one, else a private
    set of lists for that architecture alone (nothing on the machine is reconfigured)."""
    if platform.native:
        return []
    base = cache_dir() / f"apt-{platform.debian}"
    options = [
        "-o", f"APT::Architecture={platform.debian}",
        "-o", f"APT::Architectures={platform.debian}",
        "-o", f"Dir::State::Lists={base / 'lists'}",
        "-o", f"Dir::Cache={base / 'cache'}",
        "-o", "Dir::State::status=/dev/null",
        "-o", "Debug::NoLocking=1",
    ]  # fmt: skip
    lists = base / "lists"
    if refresh and (force or not any(lists.glob("*_Packages*"))):
        for sub in (lists / "partial", base / "cache" / "archives" / "partial"):
            sub.mkdir(parents=True, exist_ok=True)
        _run(["apt-get", *options, "-q", "update"])
    return options


def _is_valid(path: Path, package: Package) -> bool:
    if not path.exists():
        return False
    return hashlib.sha256(path.read_bytes()).hexdigest() == package.sha256


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PackageError(f"{' '.join(cmd[:3])} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout
