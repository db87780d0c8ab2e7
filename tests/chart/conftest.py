"""The helm binary for rendering the chart. It comes with the control plane (`make controlplane`),
so these tests run in `make test`, not in the pure, build-free `make unit`."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcluster import build

CHART = Path(__file__).resolve().parents[2] / "charts" / "zeroscaler"
RELEASE, NAMESPACE = "zs", "zeroscaler"
# The cluster version `helm template` assumes (the chart's kubeVersion is checked against it).
KUBE_VERSION = "1.37.2"  # the pinned release (localcluster/versions.toml)


@dataclass(frozen=True, slots=True)
class Helm:
    """The helm binary and an environment that keeps its state out of the user's home."""

    binary: Path
    env: dict[str, str]

    def template(self, *args: str, release: str = RELEASE) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.binary), "template", release, str(CHART), "--namespace", NAMESPACE]
        cmd += ["--kube-version", KUBE_VERSION, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=self.env)


def _pinned(name: str, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """A pinned helm (`helm`: Helm 3, `helm4`: Helm 4): the cached build, else built now (which
    needs the Go module proxy)."""
    versions = build.load_versions()
    found = build.find_binaries(versions)
    binary = found[name] if name in found else build.ensure_helms(versions)[name]
    home = tmp_path_factory.mktemp(name)
    state = {
        k: str(home / k.lower()) for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")
    }
    return Helm(binary, {**os.environ, **state})


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """Helm 3, which everything renders with."""
    return _pinned("helm", tmp_path_factory)


@pytest.fixture(scope="session")
def helm4(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """Helm 4, for what the two validate or render differently."""
    return _pinned("helm4", tmp_path_factory)
