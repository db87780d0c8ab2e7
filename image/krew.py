"""The kubectl plugin in a release: an archive krew installs, and the krew manifest naming it.

The `zeroscaler` command is a Python program, so the archive holds no binary of its own: its
`kubectl-zeroscaler` is a small POSIX shell launcher that runs an installed `zeroscaler` of the
release's version, else that version through `pipx run` (which keeps it in pipx's cache). It runs
on every Unix that has Python 3.11 and pipx; krew offers it for Linux and macOS.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path
from typing import Any

import yaml

from image import build

HOME = "https://github.com/zeroscaler/zeroscaler"
BIN = "kubectl-zeroscaler"
# Where the release workflow attaches the release's files (.github/workflows/release.yml).
DOWNLOAD = HOME + "/releases/download/v{version}/{file}"
PLATFORMS = (("linux", "amd64"), ("linux", "arm64"), ("darwin", "amd64"), ("darwin", "arm64"))
# A fixed time for every archive entry, so an archive depends only on the version.
_MTIME = 1_700_000_000

LAUNCHER = """#!/bin/sh
# kubectl zeroscaler: the zeroscaler command as a kubectl plugin. It runs an installed
# zeroscaler {version}, else zeroscaler {version} through pipx
# (pipx install kube-zeroscaler=={version} makes the first start faster).
version={version}
if command -v zeroscaler >/dev/null 2>&1 && \\
    [ "$(zeroscaler --version 2>/dev/null)" = "zeroscaler $version" ]; then
  exec zeroscaler "$@"
fi
if command -v pipx >/dev/null 2>&1; then
  exec pipx run --spec "kube-zeroscaler==$version" zeroscaler "$@"
fi
echo "kubectl zeroscaler needs zeroscaler $version: pipx install kube-zeroscaler==$version" \\
  "(Python 3.11 or newer)" >&2
exit 1
"""


def archive_name(version: str) -> str:
    return f"{BIN}-{version}.tar.gz"


def manifest_name(version: str) -> str:
    return f"zeroscaler-{version}.krew.yaml"


def archive(version: str) -> bytes:
    """The plugin's archive: the launcher and the licence, byte for byte the same each time."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries = (
            (BIN, LAUNCHER.format(version=version).encode(), 0o755),
            ("LICENSE", (build.REPO / "LICENSE").read_bytes(), 0o644),
        )
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, _MTIME
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def manifest(version: str, sha256: str) -> dict[str, Any]:
    """The krew Plugin manifest (what a krew index holds) for the archive with this digest."""
    uri = DOWNLOAD.format(version=version, file=archive_name(version))
    return {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "zeroscaler"},
        "spec": {
            "version": f"v{version}",
            "homepage": HOME,
            "shortDescription": "See and control operators that zeroscaler scales to zero",
            "description": (
                "zeroscaler scales idle Kubernetes operators to zero and wakes them on the first "
                "change to what they watch. This plugin is its command line: `kubectl zeroscaler "
                "status` lists the managed workloads, their state and what their sleeps saved; "
                "`explain` says why one is awake or asleep; `sleep` and `wake` put one to sleep "
                "or wake it, as you (your RBAC decides)."
            ),
            "caveats": (
                "The plugin runs the zeroscaler Python package, version "
                f"{version}: an installed one (pipx install kube-zeroscaler=={version}), else the "
                "same version through pipx run. It needs Python 3.11 or newer and pipx.\n"
            ),
            "platforms": [
                {
                    "selector": {"matchLabels": {"os": os, "arch": arch}},
                    "uri": uri,
                    "sha256": sha256,
                    "bin": BIN,
                    "files": [{"from": BIN, "to": "."}, {"from": "LICENSE", "to": "."}],
                }
                for os, arch in PLATFORMS
            ],
        },
    }


def write(version: str, out: Path) -> tuple[str, str]:
    """Write the archive and its manifest into `out`; returns their file names."""
    data = archive(version)
    (out / archive_name(version)).write_bytes(data)
    text = yaml.safe_dump(manifest(version, hashlib.sha256(data).hexdigest()), sort_keys=False)
    (out / manifest_name(version)).write_text(text)
    return archive_name(version), manifest_name(version)
