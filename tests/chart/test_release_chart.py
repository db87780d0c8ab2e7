"""The release's chart: packaged with its version and the image index's digest, and rendered into
the plain manifest for `kubectl apply` users (helm, so here rather than in the pure unit tests)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import yaml

from image import release
from tests.chart.conftest import Helm

DIGEST = "sha256:" + "ab" * 32


def test_packaged_chart_carries_the_version_and_pins_the_digest(helm: Helm, tmp_path: Path) -> None:
    chart = tmp_path / "zeroscaler-9.8.7.tgz"
    release.package_chart("9.8.7", DIGEST, chart, helm.binary, lambda _: None)
    with tarfile.open(chart) as tar:
        meta = yaml.safe_load(tar.extractfile("zeroscaler/Chart.yaml").read())  # type: ignore[union-attr]
        values = yaml.safe_load(tar.extractfile("zeroscaler/values.yaml").read())  # type: ignore[union-attr]
    assert (meta["version"], meta["appVersion"]) == ("9.8.7", "9.8.7")
    assert values["image"]["digest"] == DIGEST
    # The checkout's chart is left as it was.
    assert yaml.safe_load((release.CHART / "values.yaml").read_text())["image"]["digest"] == ""

    manifest = tmp_path / "plain.yaml"
    release.render_manifest(chart, manifest, helm.binary)
    docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "zeroscaler"}}
    images = {
        c["image"]
        for d in docs
        if d["kind"] in ("Deployment", "Job")
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    image = yaml.safe_load((release.CHART / "values.yaml").read_text())["image"]
    assert images == {f"{image['registry']}/{image['repository']}@{DIGEST}"}
    namespaced = [
        d
        for d in docs[1:]
        if not d["kind"].startswith("Cluster")
        and "Webhook" not in d["kind"]
        and "AdmissionPolicy" not in d["kind"]
    ]
    assert {d["metadata"].get("namespace") for d in namespaced} == {"zeroscaler"}
    hooks = {d["metadata"].get("annotations", {}).get("helm.sh/hook", "") for d in docs}
    assert not any("delete" in h and "install" not in h for h in hooks)
