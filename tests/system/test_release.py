"""The release as a user gets it: pushed to a registry, installed from it, pulled by the node.

`make release` builds dist/release before the loopback-only namespace is entered (it needs the
package archives). Here the CNCF distribution registry, built from its Go module, serves on
127.0.0.1 with its storage in a temporary directory; `make push`'s code pushes the image index
with crane and the chart with `helm push`; `helm install oci://...` installs the chart, and the
real node's containerd pulls the image from the registry over plain HTTP (a hosts.toml says so):
nothing is imported.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from image import build as image_build
from image import release
from localcluster import build, realnode
from localcluster.cluster import Cluster
from localcluster.processes import free_port
from testkit.controller import create_workload, grant_watch
from testkit.real_chart import real_node_values
from testkit.steps import step
from testkit.waiting import wait_for

RELEASE = Path(os.environ.get("ZEROSCALER_RELEASE", image_build.REPO / "dist" / "release"))
CHART = image_build.REPO / "charts" / "zeroscaler"
ENABLED_LABEL = "zeroscaler.io/enabled"
PATH = "zeroscaler"  # the registry path the release is pushed under


@dataclass(frozen=True)
class Registry:
    host: str  # 127.0.0.1:PORT
    log: Path
    tools: dict[str, Path]

    def access(self) -> list[str]:
        """The registry's access log lines so far."""
        return self.log.read_text().splitlines()


@dataclass(frozen=True)
class Pushed:
    registry: Registry
    record: dict[str, Any]  # release.json
    image: str  # REGISTRY/PATH/zeroscaler, no tag
    chart: str  # oci://REGISTRY/PATH/charts/zeroscaler
    seconds: float


@pytest.fixture(scope="module")
def registry(
    cluster: Cluster, real_node: realnode.RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registry]:
    assert (RELEASE / "SHA256SUMS").exists(), f"no release in {RELEASE}: `make release` builds it"
    tools = {**build.ensure_release_tools(), "helm": cluster.binaries["helm"]}
    work = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = {
        "version": 0.1,
        "log": {"level": "warn"},  # the access log is kept: it shows who fetched what
        "storage": {"filesystem": {"rootdirectory": str(work / "storage")}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }
    (work / "config.yml").write_text(yaml.safe_dump(config))
    log = work / "registry.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(tools["registry"]), "serve", str(work / "config.yml")],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    host = f"127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"http://{host}/v2/", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(up, "the registry to answer /v2/", 30)
        real_node.trust_plain_http_registry(host)
        yield Registry(host, log, tools)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def pushed(registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> Pushed:
    home = tmp_path_factory.mktemp("push-home")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    started = time.monotonic()
    result = release.push(
        RELEASE, f"{registry.host}/{PATH}", registry.tools, print, plain_http=True, env=env
    )
    seconds = time.monotonic() - started
    record = json.loads((RELEASE / "release.json").read_text())
    print(f"push of the release to a loopback registry: {seconds:.1f}s")
    return Pushed(
        registry,
        record,
        f"{registry.host}/{PATH}/zeroscaler",
        result["chart"],
        seconds,
    )


def test_the_pushed_index_validates_and_names_both_platforms(pushed: Pushed) -> None:
    crane = str(pushed.registry.tools["crane"])
    ref = f"{pushed.image}:{pushed.record['version']}"
    digest = subprocess.run([crane, "digest", ref], capture_output=True, text=True, check=True)
    assert digest.stdout.strip() == pushed.record["index"]["digest"]
    index = json.loads(
        subprocess.run([crane, "manifest", ref], capture_output=True, text=True, check=True).stdout
    )
    platforms = {
        "/".join(v for v in (p["os"], p["architecture"], p.get("variant", "")) if v)
        for p in (m["platform"] for m in index["manifests"])
    }
    assert platforms == {"linux/amd64", "linux/arm64/v8"}
    for platform in ("linux/amd64", "linux/arm64"):
        proc = subprocess.run(
            [crane, "validate", "--remote", ref, "--platform", platform],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("PASS")


def pulled_from(pushed: Pushed) -> dict[str, str]:
    """Image values naming the pushed image where it lives (the chart's registry and repository)."""
    registry, _, repository = pushed.image.partition("/")
    return {"registry": registry, "repository": repository, "pullPolicy": "IfNotPresent"}


def test_helm_installs_from_the_registry_and_the_node_pulls_the_image(
    cluster: Cluster, api: k8s.ApiClient, pushed: Pushed, tmp_path: Path
) -> None:
    version, digest = pushed.record["version"], pushed.record["index"]["digest"]
    name = f"zs-{secrets.token_hex(3)}"
    namespace = f"pulled-{name}"
    core = k8s.CoreV1Api(api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    values = real_node_values(cluster.server, free_port(), free_port(), controller_replicas=1)
    # The chart's own digest pins the image; only where it lives differs from its defaults.
    values["image"] = pulled_from(pushed)
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    home = tmp_path / "helm"
    try:
        proc = cluster.helm(home, "install", name, pushed.chart, "--version", version,
            "--plain-http", "-n", namespace, "-f", str(tmp_path / "values.yaml"),
            "--timeout", "300s",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        listed = cluster.helm(home, "list", "-n", namespace, "-o", "json", check=True)
        (installed,) = json.loads(listed.stdout)
        assert installed["chart"] == f"zeroscaler-{version}"
        assert installed["app_version"] == version

        for component in ("controller", "webhook"):
            pods = wait_for(
                partial(_ready, api, namespace, name, component), f"a Ready {component}", 240
            )
            (status,) = pods[0].status.container_statuses
            assert pods[0].spec.containers[0].image == f"{pushed.image}@{digest}"
            assert status.image_id == f"{pushed.image}@{digest}"

        # containerd fetched the index from the registry itself: the access log says so.
        path = f"/v2/{PATH}/zeroscaler/manifests/{digest}"
        fetched = [line for line in pushed.registry.access() if path in line]
        assert any("containerd" in line for line in fetched), fetched
        # The amd64 image itself is byte for byte the one earlier tests imported from
        # dist/zeroscaler-image.tar (the same builder and locks), so containerd may reuse content
        # it holds; the index, which no import holds, is what it had to pull from the registry.
        pulled = _blob_fetches(pushed.registry)
        print(f"containerd fetched {pulled} blobs of the amd64 image from the registry")
    finally:
        cluster.helm(home, "uninstall", name, "-n", namespace, "--wait", "--timeout", "120s")
        try:
            core.delete_namespace(namespace)
        except ApiException as e:
            if e.status != 404:
                raise


def test_upgrade_to_the_release_keeps_sleepers_asleep_and_the_awake_awake(
    cluster: Cluster, api: k8s.ApiClient, pushed: Pushed, tmp_path: Path
) -> None:
    """From the chart in the checkout to the released chart from the registry: the workloads'
    state survives the hand-over. Before, the pods name the amd64 image by its own manifest digest,
    after, by the index's: the pods roll, and both are pulled from the registry."""
    version, digest = pushed.record["version"], pushed.record["index"]["digest"]
    amd64 = pushed.record["images"]["linux/amd64"]["digest"]
    name = f"up-{secrets.token_hex(3)}"
    namespace = f"upgraded-{name}"
    core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    values = real_node_values(cluster.server, free_port(), free_port(), controller_replicas=1)
    values["image"] = {**pulled_from(pushed), "digest": amd64}
    (tmp_path / "before.yaml").write_text(yaml.safe_dump(values))
    values["image"] = pulled_from(pushed)
    (tmp_path / "after.yaml").write_text(yaml.safe_dump(values))
    home = tmp_path / "helm"
    operators = f"ops-{name}"
    try:
        with step("the checkout's chart installs, and its pods are Ready"):
            proc = cluster.helm(home, "install", name, str(CHART), "-n", namespace,
                "-f", str(tmp_path / "before.yaml"), "--timeout", "300s",
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            for component in ("controller", "webhook"):
                wait_for(
                    partial(_ready, api, namespace, name, component), f"a Ready {component}", 240
                )
        with step("the idle operator sleeps, the other stays awake"):
            core.create_namespace(
                k8s.V1Namespace(
                    metadata=k8s.V1ObjectMeta(name=operators, labels={ENABLED_LABEL: "true"})
                )
            )
            _operators(api, operators)
            wait_for(lambda: _asleep(api, operators, "sleeper"), "the idle operator to sleep", 120)
            assert _awake(api, operators, "awake")

        with step("helm upgrades to the released chart from the registry"):
            proc = cluster.helm(home, "upgrade", name, pushed.chart, "--version", version,
                "--plain-http", "-n", namespace, "-f", str(tmp_path / "after.yaml"),
                "--timeout", "300s",
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr

        with step("the pods roll to the release's image, and no workload changes state"):

            def upgraded() -> bool:
                pods = [
                    *_ready(api, namespace, name, "controller"),
                    *_ready(api, namespace, name, "webhook"),
                ]
                images = {p.spec.containers[0].image for p in pods}
                return len(pods) == 2 and images == {f"{pushed.image}@{digest}"}

            # Through the roll-out and well past the idle timeout after it, nothing changes state.
            deadline = time.monotonic() + 240
            while not upgraded():
                assert time.monotonic() < deadline, "the released pods did not become Ready"
                assert _asleep(api, operators, "sleeper")
                assert _awake(api, operators, "awake")
                time.sleep(1)
            settle = time.monotonic() + 15
            while time.monotonic() < settle:
                assert _asleep(api, operators, "sleeper")
                assert _awake(api, operators, "awake")
                time.sleep(1)
        with step("the released controller wakes the sleeper on a change"):
            core.create_namespaced_config_map(
                operators, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="wake"), data={"a": "b"})
            )
            wait_for(
                lambda: apps.read_namespaced_deployment("sleeper", operators).spec.replicas == 1,
                "the released controller to wake the operator",
                90,
            )
    finally:
        cluster.helm(home, "uninstall", name, "-n", namespace, "--wait", "--timeout", "120s")
        for ns in (operators, namespace):
            try:
                core.delete_namespace(ns)
            except ApiException as e:
                if e.status != 404:
                    raise


def _operators(api: k8s.ApiClient, namespace: str) -> None:
    """Two operators whose ServiceAccount may watch ConfigMaps (on kwok nodes): one left idle, one
    whose person-set idle timeout of an hour keeps it awake through the test."""
    grant_watch(api, namespace, [("", ["configmaps"])], sa="op", name="op")
    for name, notes in (("sleeper", {}), ("awake", {"zeroscaler.io/idle-timeout": "1h"})):
        create_workload(api, namespace, name, notes, replicas=1, sa="op")


def _state(api: k8s.ApiClient, namespace: str, name: str) -> tuple[int, dict[str, str]]:
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    annotations = deployment.metadata.annotations or {}
    return int(deployment.spec.replicas), {
        k: v for k, v in annotations.items() if k.startswith("zeroscaler.io/")
    }


def _asleep(api: k8s.ApiClient, namespace: str, name: str) -> bool:
    replicas, ours = _state(api, namespace, name)
    return (
        replicas == 0
        and ours.get("zeroscaler.io/state") == "asleep"
        and ours.get("zeroscaler.io/restore-replicas") == "1"
    )


def _awake(api: k8s.ApiClient, namespace: str, name: str) -> bool:
    replicas, ours = _state(api, namespace, name)
    return replicas == 1 and ours.get("zeroscaler.io/state") != "asleep"


def _ready(api: k8s.ApiClient, namespace: str, name: str, component: str) -> list[Any]:
    selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component={component}"
    pods = k8s.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items
    return [
        p
        for p in pods
        if p.status.phase == "Running"
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def _blob_fetches(registry: Registry) -> int:
    return sum(
        1
        for line in registry.access()
        if re.search(r'"GET /v2/\S+/blobs/sha256:', line) and "containerd" in line
    )
