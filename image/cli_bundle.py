"""The self-contained `zeroscaler` command of a release: no Python needed where it runs.

Each platform's archive is cut from the image's own root filesystem, as the release assembles it:
Debian's python3.11 with its standard library (bytecode compiled in), the shared libraries it
loads, glibc's dynamic loader among them, and only the locked wheels the command needs (the
closure of pyproject's `dependencies`, not the server extra). A POSIX shell launcher starts the
interpreter through the bundled loader with the bundled libraries first, so nothing of the host
but a Linux kernel and `/bin/sh` is used: not its libc, not its Python. The pinned Debian packages
and wheels are the ones the SBOM lists for the image, checked by SHA-256 when they were fetched.

`ZEROSCALER_EMULATOR`, when set, names a program the launcher runs the loader under (a qemu user
emulator), so an arm64 archive runs on an amd64 machine; the release's test does exactly that.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from image import build
from image.platform import Platform

LAUNCHER_NAME = "kubectl-zeroscaler"
RUNTIME = "runtime"
# The dynamic loader of each architecture, as Debian's libc6 lays it out.
LOADERS = {
    "amd64": "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "arm64": "lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
}
_MTIME = 1_700_000_000  # every entry's time, so an archive depends on its contents only

LAUNCHER = """#!/bin/sh
# zeroscaler {version} for linux/{arch}, self-contained: the interpreter, its libraries and the
# command's packages are in {runtime}/ beside this file, started through their own dynamic loader,
# so nothing of this machine but the kernel and /bin/sh is used. Run as kubectl-zeroscaler (krew's
# name) it is `kubectl zeroscaler`; under any other name, `zeroscaler`.
self=$(readlink -f -- "$0" 2>/dev/null) || self=$0
rt=${{self%/*}}/{runtime}
case ${{0##*/}} in kubectl-*) script=kubectl-zeroscaler ;; *) script=zeroscaler ;; esac
PYTHONHOME=$rt/usr
PYTHONPATH=$rt/{site}
PYTHONNOUSERSITE=1
PYTHONDONTWRITEBYTECODE=1
export PYTHONHOME PYTHONPATH PYTHONNOUSERSITE PYTHONDONTWRITEBYTECODE
unset PYTHONSTARTUP PYTHONUSERBASE PYTHONSAFEPATH
exec ${{ZEROSCALER_EMULATOR:+"$ZEROSCALER_EMULATOR"}} "$rt/{loader}" \\
  --library-path "$rt/lib/{triplet}:$rt/usr/lib/{triplet}" \\
  "$rt/usr/bin/python3.11" -s "$rt/bin/$script" "$@"
"""
SCRIPT = "import sys\nfrom zeroscaler.cli import main\nsys.exit(main())\n"


def archive_name(version: str, platform: Platform) -> str:
    return f"zeroscaler-{version}-linux-{platform.debian}.tar.gz"


def cli_distributions(site: Path, platform: Platform) -> list[Path]:
    """The .dist-info directories of what the command needs: pyproject's dependencies and theirs."""
    infos = {
        canonicalize_name(_meta(d, "Name")): d for d in site.glob("*.dist-info") if _meta(d, "Name")
    }
    env = {"python_version": "3.11", "platform_machine": platform.machine, "extra": ""}
    wanted = [Requirement(r) for r in build._PROJECT["dependencies"]]
    found: dict[str, Path] = {}
    while wanted:
        req = wanted.pop()
        name = canonicalize_name(req.name)
        if name in found or (req.marker is not None and not req.marker.evaluate(env)):
            continue
        if name not in infos:
            raise build.BuildError(f"the command needs {req.name}, which the image's lock lacks")
        found[name] = infos[name]
        requires = [Requirement(r) for r in _meta_all(infos[name], "Requires-Dist")]
        wanted += [r for r in requires if r.marker is None or r.marker.evaluate(env)]
    return sorted(found.values())


def _meta_all(info: Path, key: str) -> list[str]:
    text = (info / "METADATA").read_text(errors="replace").split("\n\n", 1)[0]
    return [m.strip() for m in re.findall(rf"^{re.escape(key)}: (.*)$", text, re.M)]


def _meta(info: Path, key: str) -> str:
    values = _meta_all(info, key) if (info / "METADATA").exists() else []
    return values[0] if values else ""


def _top_levels(site: Path, info: Path) -> set[str]:
    """The names in site-packages a distribution installed (from its RECORD)."""
    names = {info.name}
    record = info / "RECORD"
    for line in record.read_text().splitlines() if record.exists() else []:
        first = line.split(",", 1)[0].split("/", 1)[0]
        if first and first != ".." and (site / first).exists():
            names.add(first)
    return names


def select(root: Path, platform: Platform) -> Iterator[tuple[Path, str]]:
    """(path in the image's root, path in the runtime) of everything the bundle carries."""
    triplet = platform.triplet
    site = root / build.SITE
    for rel in (f"lib/{triplet}", f"usr/lib/{triplet}", "usr/lib/python3.11"):
        yield from _tree(root, rel)
    yield root / "usr/bin/python3.11", "usr/bin/python3.11"
    names = {"zeroscaler", f"{build.DIST_INFO}-{build.version()}.dist-info"}
    for info in cli_distributions(site, platform):
        names |= _top_levels(site, info)
    for name in sorted(names):
        yield from _tree(root, f"{build.SITE}/{name}")
    # The licences travel with the binaries.
    for doc in sorted((root / "usr/share/doc").glob("*/copyright")):
        yield doc, str(doc.relative_to(root))


def _tree(root: Path, rel: str) -> Iterator[tuple[Path, str]]:
    top = root / rel
    if not top.is_dir() or top.is_symlink():
        yield top, rel
        return
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(filenames) + [d for d in dirnames if (base / d).is_symlink()]:
            path = base / name
            yield path, str(path.relative_to(root))


def write(root: Path, platform: Platform, version: str, out: Path) -> Path:
    """Write the platform's archive into `out` from an assembled image root; returns its path."""
    loader = LOADERS[platform.debian]
    if not (root / loader).exists():
        raise build.BuildError(f"{platform.oci}: the image has no dynamic loader at /{loader}")
    launcher = LAUNCHER.format(
        version=version,
        arch=platform.debian,
        runtime=RUNTIME,
        site=build.SITE,
        loader=loader,
        triplet=platform.triplet,
    ).encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_data(tar, LAUNCHER_NAME, launcher, 0o755)
        _add_link(tar, "zeroscaler", LAUNCHER_NAME)
        _add_data(tar, "LICENSE", (build.REPO / "LICENSE").read_bytes(), 0o644)
        for name in ("zeroscaler", "kubectl-zeroscaler"):
            _add_data(tar, f"{RUNTIME}/bin/{name}", SCRIPT.encode(), 0o644)
        for path, rel in select(root, platform):
            dest = f"{RUNTIME}/{rel}"
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                link = os.readlink(path)
                if link.startswith("/"):
                    continue  # points into the host (Debian's sitecustomize.py): not ours to use
                _add_link(tar, dest, link)
            elif stat.S_ISREG(mode):
                _add_data(tar, dest, path.read_bytes(), 0o755 if mode & 0o111 else 0o644)
    target = out / archive_name(version, platform)
    target.write_bytes(gzip.compress(raw.getvalue(), compresslevel=9, mtime=0))
    return target


def _add_data(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, _MTIME
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def _add_link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, _MTIME
    info.uname = info.gname = ""
    tar.addfile(info)


def unpack(archive: Path, into: Path) -> Path:
    """Unpack an archive as a user would (tar -xzf); returns the launcher's path."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="tar")
    return into / LAUNCHER_NAME
