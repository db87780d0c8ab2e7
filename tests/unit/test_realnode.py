"""The real node's settings, each avoiding a failure seen on this kind of machine, and its cache."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from localcluster import build, realnode


def test_kubelet_config_runs_on_cgroup_v1_as_a_tainted_loopback_node(tmp_path: Path) -> None:
    config = realnode.kubelet_config(
        "zeroscaler-x", 10250, tmp_path / "ca", tmp_path / "c", tmp_path / "k", tmp_path
    )
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == "/zeroscaler-x"
    assert config["failSwapOn"] is False
    assert config["address"] == "127.0.0.1"
    assert config["registerWithTaints"] == [realnode.TAINT]
    assert config["authentication"]["anonymous"] == {"enabled": False}
    assert config["authorization"] == {"mode": "Webhook"}


def test_containerd_config_restricts_oom_score_and_pins_the_local_sandbox_image(
    tmp_path: Path,
) -> None:
    binaries = {"runc": tmp_path / "runc", "cni-loopback": tmp_path / "cni" / "loopback"}
    text = realnode.containerd_config(
        binaries, tmp_path / "net.d", build.PAUSE_IMAGE, tmp_path / "hosts"
    )
    config = tomllib.loads(text)
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["BinaryName"] == str(
        tmp_path / "runc"
    )
    assert runtime["cni"]["bin_dirs"] == [str(tmp_path / "cni")]
    images = config["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == build.PAUSE_IMAGE
    assert images["registry"]["config_path"] == str(tmp_path / "hosts")


def test_each_node_part_is_cached_under_its_own_version() -> None:
    versions = build.load_versions()
    newer = dataclasses.replace(versions, containerd="9.9.9")
    before = {p.directory for p in build._node_parts(versions, print)}
    after = {p.directory for p in build._node_parts(newer, print)}
    assert before - after == {f"containerd-{versions.containerd}"}
    assert after - before == {"containerd-9.9.9"}
    assert newer.key == versions.key, (
        "a node part's version must not move the control plane's cache"
    )
