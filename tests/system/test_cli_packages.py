"""The `zeroscaler` command as users get it, run against the real API server.

- the wheel (and the sdist), each installed by `make package-check` into an empty virtualenv
  without the server extra (outside the loopback-only namespace: pip needs the package index);
- the release's self-contained archive of each architecture (`make release`), unpacked as a
  user unpacks it: amd64 runs here, arm64 under the release's own pinned qemu.

Each runs `status` on a workload the test made, and `check`, which must fail cleanly (exit 1, one
line on stderr) for a release that is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from kubernetes import client as k8s

from image import build as image_build
from image import cli_bundle, debian
from image.platform import PLATFORMS
from testkit.controller import create_workload

pytestmark = pytest.mark.cluster

REPO = image_build.REPO
RELEASE = Path(os.environ.get("ZEROSCALER_RELEASE", REPO / "dist" / "release"))
PACKAGES = REPO / "dist" / "package-check"


def _run(
    argv: list[str], kubeconfig: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # An environment like a user's shell, not the test's virtualenv.
    base = {"PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent), "KUBECONFIG": str(kubeconfig)}
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=300, env={**base, **(env or {})}
    )


def _assert_status_and_check(
    command: list[str], kubeconfig: Path, ns: str, env: dict[str, str] | None = None
) -> None:
    status = _run([*command, "status", "-n", ns, "-o", "json"], kubeconfig, env)
    assert status.returncode == 0, status.stderr
    [item] = json.loads(status.stdout)["items"]
    assert (item["name"], item["namespace"]) == ("packaged", ns)
    # Other tests' releases may be installed meanwhile: a release of no such name is asked for.
    check = _run([*command, "check", "--instance", "none-here"], kubeconfig, env)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "no zeroscaler webhook configuration of release none-here" in check.stderr
    assert "Traceback" not in check.stderr


@pytest.fixture
def workload(api: k8s.ApiClient, opted_ns: str) -> str:
    create_workload(api, opted_ns, "packaged", {"zeroscaler.io/idle-timeout": "10m"})
    return opted_ns


@pytest.mark.parametrize("built_from", ["whl", "tar.gz"])
def test_the_installed_wheel_and_sdist_run_status_against_the_cluster(
    kubeconfig: Path, workload: str, built_from: str
) -> None:
    venv = PACKAGES / f"cli-{built_from}"
    assert (venv / "bin" / "zeroscaler").exists(), f"{venv}: `make package-check` makes it"
    version = _run([str(venv / "bin" / "zeroscaler"), "--version"], kubeconfig)
    assert version.stdout.split() == ["zeroscaler", image_build.version()]
    _assert_status_and_check([str(venv / "bin" / "zeroscaler")], kubeconfig, workload)


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_the_self_contained_command_runs_status_on_each_architecture(
    kubeconfig: Path, workload: str, arch: str, tmp_path: Path
) -> None:
    record = json.loads((RELEASE / "release.json").read_text())
    platform = PLATFORMS[arch]
    archive = RELEASE / record["commands"][platform.oci]["file"]
    launcher = cli_bundle.unpack(archive, tmp_path / "cli")
    env: dict[str, str] = {}
    if not platform.native:
        emulator = debian.emulator(platform, debian.cache_dir(), print)
        assert emulator is not None
        assert emulator.exists(), "`make release` unpacked the emulator"
        env["ZEROSCALER_EMULATOR"] = str(emulator)
    # As a kubectl plugin (krew's name) and as the plain command.
    plugin = _run([str(launcher), "--version"], kubeconfig, env)
    assert plugin.stdout.strip() == f"kubectl zeroscaler {image_build.version()}", plugin.stderr
    plain = _run([str(launcher.parent / "zeroscaler"), "--version"], kubeconfig, env)
    assert plain.stdout.strip() == f"zeroscaler {image_build.version()}", plain.stderr
    _assert_status_and_check([str(launcher)], kubeconfig, workload, env)
