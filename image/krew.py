"""The krew manifest of a release: `kubectl zeroscaler` from the self-contained archives.

Each Linux architecture's archive (`image.cli_bundle`) holds the `kubectl-zeroscaler` launcher
and the runtime it starts; the manifest names each archive where the release workflow attaches it
and its SHA-256. Other systems (macOS) install the command from the package index instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from image.build import DISTRIBUTION

HOME = "https://github.com/zeroscaler/zeroscaler"
BIN = "kubectl-zeroscaler"
# Where the release workflow attaches the release's files (.github/workflows/release.yml).
DOWNLOAD = HOME + "/releases/download/v{version}/{file}"


def manifest_name(version: str) -> str:
    return f"zeroscaler-{version}.krew.yaml"


def manifest(version: str, archives: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """The krew Plugin manifest (what a krew index holds): for each Linux architecture, its
    archive's file name and SHA-256 (`archives`: arch -> (file, sha256))."""
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
                "check` proves an install works; `status` lists the managed workloads, their "
                "state and what their sleeps saved; `explain` says why one is awake or asleep; "
                "`sleep` and `wake` put one to sleep or wake it, as you (your RBAC decides)."
            ),
            "caveats": (
                "Self-contained: it carries its own interpreter and needs nothing but /bin/sh. "
                f"On other systems: pipx install {DISTRIBUTION}=={version}.\n"
            ),
            "platforms": [
                {
                    "selector": {"matchLabels": {"os": "linux", "arch": arch}},
                    "uri": DOWNLOAD.format(version=version, file=file),
                    "sha256": sha256,
                    "bin": BIN,
                    "files": [{"from": "*", "to": "."}],
                }
                for arch, (file, sha256) in sorted(archives.items())
            ],
        },
    }


def write(version: str, out: Path, archives: Mapping[str, Path]) -> str:
    """Write the manifest for the archives (arch -> path) into `out`; returns its file name."""
    named = {
        arch: (path.name, hashlib.sha256(path.read_bytes()).hexdigest())
        for arch, path in archives.items()
    }
    text = yaml.safe_dump(manifest(version, named), sort_keys=False)
    (out / manifest_name(version)).write_text(text)
    return manifest_name(version)
