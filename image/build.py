"""Assemble the image's root filesystem and pack it: Debian's Python, locked wheels, our packages.

The layout is distroless-like: no shell, no package manager, only the interpreter, the shared
libraries it loads and the site packages, owned by root and run as 65532 (nonroot).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from image import debian, python
from image.platform import AMD64, ARM64, Platform
from oci import archive
from oci.archive import Image, Layer

REPO = Path(__file__).resolve().parents[1]
_PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
# The distribution's name on the package index, and its .dist-info directory's (PEP 427).
DISTRIBUTION = str(_PROJECT["name"])
DIST_INFO = DISTRIBUTION.replace("-", "_")
# The wheel's one import package (its subpackages controller, webhook and certs are symlinks to
# the folders at the top, followed when copying) and its console scripts, as pyproject declares.
PACKAGES = ("zeroscaler",)
SCRIPTS: dict[str, tuple[str, str]] = {
    name: (target.partition(":")[0], target.partition(":")[2])
    for name, target in _PROJECT["scripts"].items()
}
# The name the archive is loaded as (docker.io/library/zeroscaler), with the project's version as
# tag; the chart's defaults name the published image, so local installs set image.* to this.
REPOSITORY = "zeroscaler"
PYTHON = "/usr/bin/python3.11"
SITE = "usr/local/lib/python3.11/dist-packages"  # on Debian's sys.path
BIN = "usr/local/bin"
USER = 65532
ENV = (
    "PATH=/usr/local/bin:/usr/bin:/bin",
    "PYTHONDONTWRITEBYTECODE=1",  # the root filesystem may be read-only; bytecode is compiled in
    "PYTHONUNBUFFERED=1",
    "HOME=/home/nonroot",
)
# Parts of the Debian packages nothing here runs.
PRUNE = (
    "usr/share/man",
    "usr/share/info",
    "usr/share/lintian",
    "usr/share/locale",
    "usr/share/binfmts",
    "usr/lib/binfmt.d",
    "usr/lib/{triplet}/gconv",  # iconv's character sets: Python has its own codecs
    "usr/lib/python3.11/test",
    "usr/lib/python3.11/pydoc_data",
    "usr/lib/python3.11/lib2to3",
    "usr/lib/python3.11/idlelib",
    "usr/lib/python3.11/turtledemo",
    "usr/lib/python3.11/ensurepip",
)
DYNLOAD_PRUNE = ("_test", "_ctypes_test", "_xxtestfuzz", "_xxsubinterpreters", "xxlimited")
# Modules imported at build time as the image's user, to prove every shared library is there.
SMOKE_IMPORTS = (
    "ssl",
    "hashlib",
    "asyncio",
    "uuid",
    "lzma",
    "bz2",
    "zlib",
    "ctypes",
    "yaml._yaml",
    "pydantic_core",
    "cryptography.hazmat.bindings._rust",
    "_cffi_backend",
    "zeroscaler.cli.webhook_main",
    "zeroscaler.cli.controller_main",
    "zeroscaler.cli.combined_main",
    "zeroscaler.cli",
    "zeroscaler.certs.command",
)
PASSWD = (
    "root:x:0:0:root:/root:/sbin/nologin\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
    "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
)
GROUP = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"


class BuildError(Exception):
    """A build step failed; the message names the step."""


@dataclass(frozen=True, slots=True)
class Spec:
    """What goes on top of the shared Debian base: locked wheels, our files, commands, a title."""

    repository: str
    title: str
    lock: Path
    requirements: Path | None  # what the lock is resolved from; None: pyproject's dependencies
    packages: tuple[str, ...]  # repository directories copied into site-packages
    files: dict[str, str]  # repository path -> absolute path in the image
    scripts: dict[str, tuple[str, str]]  # console script -> (module, function)
    smoke: tuple[str, ...]  # modules imported at build time as the image's user
    cmd: tuple[str, ...]
    platforms: tuple[Platform, ...] = (AMD64,)  # those with a lock of their own

    def lock_for(self, platform: Platform) -> Path:
        """The platform's wheel lock."""
        return python.lock_path(self.lock, platform)

    def name(self) -> str:
        """The reference the archive is loaded as, in full (containerd's form of NAME:TAG)."""
        return f"docker.io/library/{self.repository}:{version()}"


ZEROSCALER = Spec(
    repository=REPOSITORY,
    title="zeroscaler",
    lock=python.LOCK,
    requirements=None,
    packages=PACKAGES,
    files={},
    scripts=SCRIPTS,
    smoke=SMOKE_IMPORTS,
    cmd=("zeroscaler", "--help"),
    platforms=(AMD64, ARM64),
)
# The example kopf operator the demo puts to sleep: kopf and the official client, its one module.
BACKUP_OPERATOR = Spec(
    repository="backup-operator",
    title="backup-operator (zeroscaler example)",
    lock=REPO / "examples" / "backup-operator" / "requirements.lock",
    requirements=REPO / "examples" / "backup-operator" / "requirements.in",
    packages=(),
    files={"examples/backup-operator/operator.py": "/app/operator.py"},
    scripts={"kopf": ("kopf.cli", "main")},
    smoke=("ssl", "asyncio", "yaml", "aiohttp", "kopf", "kubernetes.client", "kopf.cli"),
    cmd=("kopf", "run", "--standalone", "/app/operator.py"),
)
SPECS = {"zeroscaler": ZEROSCALER, "backup-operator": BACKUP_OPERATOR}


@dataclass(frozen=True, slots=True)
class Result:
    """What a build wrote."""

    archive: Path
    digest: str
    names: list[str]
    layers: list[Layer]
    unpacked_bytes: int
    image: Image  # what the archive holds, for an index of several platforms


def version() -> str:
    """The project's version, which is also the image tag and the chart's appVersion."""
    return str(_PROJECT["version"])


def default_name() -> str:
    """The reference zeroscaler's archive is loaded as, in full (containerd's form of NAME:TAG)."""
    return f"docker.io/library/{REPOSITORY}:{version()}"


def assemble(
    root: Path,
    cache: Path,
    progress: Callable[[str], None],
    spec: Spec = ZEROSCALER,
    platform: Platform = AMD64,
) -> None:
    """Build the root filesystem in root (emptied first)."""
    if platform not in spec.platforms:
        raise BuildError(f"{spec.title} is built for {', '.join(p.debian for p in spec.platforms)}")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    packages = debian.load_lock(debian.lock_path(platform))
    debs = debian.fetch(packages, cache / "debs", progress, platform)
    emulator = debian.emulator(platform, cache, progress)
    progress(f"unpacking {len(debs)} Debian packages ({platform.debian})")
    debian.unpack(debs, root)
    _prune(root, platform)
    _write_etc(root)
    (root / "usr/bin/python3").symlink_to("python3.11")
    lock = spec.lock_for(platform)
    progress(f"installing the locked wheels ({lock.relative_to(REPO)})")
    site = root / SITE
    python.install(site, lock, platform)
    _drop_dependency_scripts(site)
    progress(f"adding {spec.title}'s files and console scripts")
    _install_project(root, spec)
    how = "" if emulator is None else f" under {emulator.name}"
    progress(f"compiling bytecode with the image's own interpreter{how}")
    _in_root(
        root,
        [
            PYTHON,
            "-m",
            "compileall",
            "-q",
            "--invalidation-mode",
            "unchecked-hash",
            "/usr/lib/python3.11",
            "/" + SITE,
        ],
        emulator=emulator,
    )
    progress(f"checking that it runs as 65532{how}")
    _smoke(root, spec, emulator)


def pack(
    root: Path,
    out: Path,
    names: list[str],
    progress: Callable[[str], None],
    spec: Spec = ZEROSCALER,
    platform: Platform = AMD64,
) -> Result:
    """Split the tree into three layers (Debian, dependencies, ours); write the archive."""
    ours = {root / SITE / p for p in spec.packages} | {root / BIN / name for name in spec.scripts}
    ours |= {root / dest.lstrip("/") for dest in spec.files.values()}
    if spec.packages:
        ours.add(root / SITE / f"{DIST_INFO}-{version()}.dist-info")
    layers_of: dict[str, list[Path]] = {"debian": [], "deps": [], "zeroscaler": []}
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in filenames + [d for d in dirnames if (base / d).is_symlink()]:
            path = base / name
            if any(path == o or o in path.parents for o in ours):
                layers_of["zeroscaler"].append(path)
            elif root / SITE in path.parents:
                layers_of["deps"].append(path)
            else:
                layers_of["debian"].append(path)
        # Empty directories (/tmp, /home/nonroot) still need an entry of their own.
        if not dirnames and not filenames and base != root:
            layers_of["debian"].append(base)
    comments = {
        "debian": f"Debian bookworm packages ({debian.lock_path(platform).relative_to(REPO)})",
        "deps": f"Python packages ({spec.lock_for(platform).relative_to(REPO)})",
        "zeroscaler": f"{spec.title} {version()}",
    }
    layers = []
    unpacked = 0
    for key, paths in layers_of.items():
        entries = archive.entries_from_tree(root, paths)
        entries = [_owned(e) for e in entries]
        layer = archive.make_layer(entries, comments[key])
        size = sum(len(e.data) for e in entries)
        unpacked += size
        progress(
            f"layer {key}: {len(entries)} entries, {size / 1e6:.1f} MB, "
            f"{layer.size / 1e6:.1f} MB compressed"
        )
        layers.append(layer)
    image = archive.Image(
        architecture=platform.debian,
        variant=platform.variant,
        layers=layers,
        names=names,
        user=f"{USER}:{USER}",
        env=ENV,
        cmd=list(spec.cmd),
        labels={
            "org.opencontainers.image.title": spec.title,
            "org.opencontainers.image.version": version(),
            "org.opencontainers.image.licenses": "Apache-2.0",
        },
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    digest = archive.write_archive(image, out)
    return Result(out, digest, names, layers, unpacked, image)


def _owned(entry: archive.Entry) -> archive.Entry:
    # The user's home is its own; everything else belongs to root and is read-only to the user.
    if entry.path == "/home/nonroot":
        return archive.Entry(entry.path, 0o700, entry.kind, uid=USER, gid=USER)
    return entry


def _prune(root: Path, platform: Platform) -> None:
    for rel in PRUNE:
        shutil.rmtree(root / rel.format(triplet=platform.triplet), ignore_errors=True)
    # Keep each package's copyright file: the licences travel with the binaries.
    for doc in (root / "usr/share/doc").glob("*/*"):
        if doc.name != "copyright":
            shutil.rmtree(doc) if doc.is_dir() and not doc.is_symlink() else doc.unlink()
    for ext in (root / "usr/lib/python3.11/lib-dynload").iterdir():
        if ext.name.startswith(DYNLOAD_PRUNE):
            ext.unlink()


def _write_etc(root: Path) -> None:
    etc = root / "etc"
    (etc / "passwd").write_text(PASSWD)
    (etc / "group").write_text(GROUP)
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
    tmp = root / "tmp"
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o1777)
    home = root / "home/nonroot"
    home.mkdir(parents=True)
    home.chmod(0o700)
    if os.geteuid() == 0:  # the Dockerfile copies the tree as it is; pack() sets owners itself
        os.chown(home, USER, USER)


def _drop_dependency_scripts(site: Path) -> None:
    # pip writes the dependencies' scripts with the build's own interpreter in their first line,
    # and their hashes into RECORD: both go, so the image depends on the pins, not the builder.
    shutil.rmtree(site / "bin", ignore_errors=True)
    for record in sorted(site.glob("*.dist-info/RECORD")):
        lines = record.read_text().splitlines(keepends=True)
        record.write_text("".join(line for line in lines if not line.startswith("../../bin/")))


def _install_project(root: Path, spec: Spec) -> None:
    site = root / SITE
    for src_name, dest_name in spec.files.items():
        dest = root / dest_name.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / src_name, dest)
    _write_scripts(root, spec)
    if not spec.packages:
        return
    for package in spec.packages:
        for dirpath, dirnames, filenames in os.walk(REPO / package, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            into = site / Path(dirpath).relative_to(REPO)
            into.mkdir(parents=True, exist_ok=True)
            for name in sorted(f for f in filenames if f.endswith(".py")):
                shutil.copyfile(Path(dirpath) / name, into / name)
    # Enough metadata for importlib.metadata to find the version and the entry points.
    info = site / f"{DIST_INFO}-{version()}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: {version()}\n"
    )
    lines = ["[console_scripts]"] + [f"{n} = {m}:{f}" for n, (m, f) in spec.scripts.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    (info / "INSTALLER").write_text("image\n")


def _write_scripts(root: Path, spec: Spec) -> None:
    bin_dir = root / BIN
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, (module, func) in spec.scripts.items():
        script = bin_dir / name
        # -s: no user site directory; the image's packages are the only ones.
        script.write_text(
            f"#!{PYTHON} -s\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n"
        )
        script.chmod(0o755)


def _smoke(root: Path, spec: Spec, emulator: Path | None = None) -> None:
    code = "import " + ", ".join(spec.smoke)
    _in_root(root, [PYTHON, "-c", code], user=USER, emulator=emulator)
    for name in spec.scripts:
        # Under an emulator nothing reads the script's #! line: the interpreter is named.
        script = [f"/{BIN}/{name}"] if emulator is None else [PYTHON, "-s", f"/{BIN}/{name}"]
        _in_root(root, [*script, "--help"], user=USER, emulator=emulator)


# Where the emulator sits in the tree while a foreign build runs commands in it; removed after.
_EMULATOR_IN_ROOT = ".build-emulator"


def _in_root(
    root: Path, cmd: list[str], user: int | None = None, emulator: Path | None = None
) -> None:
    """Run cmd with root as its root directory, and a clean environment like the image's.

    With an emulator (a static qemu), the foreign binary runs under it: the emulator is copied
    into the tree for the command's length, since nothing outside the chroot can be reached.
    """
    if emulator is not None:
        inside = root / _EMULATOR_IN_ROOT
        shutil.copy2(emulator, inside)
        try:
            _in_root(root, ["/" + _EMULATOR_IN_ROOT, *cmd], user)
        finally:
            inside.unlink()
        return
    env = dict(e.split("=", 1) for e in ENV)
    if os.geteuid() == 0:
        spec = [f"--userspec={user}:{user}"] if user is not None else []
        full = [shutil.which("chroot") or "/usr/sbin/chroot", *spec, str(root), *cmd]
    else:
        # Without root, a user namespace gives the chroot; the user switch is left out.
        full = [shutil.which("unshare") or "unshare", "--map-root-user", f"--root={root}", *cmd]
    proc = subprocess.run(full, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise BuildError(f"{' '.join(cmd[:3])} in the image failed: {proc.stderr.strip()[-1500:]}")
