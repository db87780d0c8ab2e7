"""The chart installed, upgraded and rolled back by Helm 3 and by Helm 4, on the real node.

Helm 4 applies objects server-side and waits with its own status checks; Helm 3 patches them
client-side. Each release here goes through the same steps with one of the two pinned binaries
(`helm`, `helm4`): install (the certificate Job's hooks run), the pods Ready and a controller
leading; an upgrade with a changed value rolls the pods; a rollback to the first revision rolls
them back; `helm uninstall` runs the pre-delete hook and leaves nothing of the release.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from image import build as image_build
from localcluster import realnode
from localcluster.cluster import Cluster
from localcluster.processes import free_port
from testkit.real_chart import real_node_values
from testkit.steps import step
from testkit.waiting import wait_for

pytestmark = pytest.mark.cluster

CHART = image_build.REPO / "charts" / "zeroscaler"
ARCHIVE = Path(os.environ.get("ZEROSCALER_IMAGE", image_build.REPO / "dist/zeroscaler-image.tar"))


@pytest.fixture(scope="module")
def node(cluster: Cluster, real_node: realnode.RealNode) -> realnode.RealNode:
    assert ARCHIVE.exists(), f"{ARCHIVE} is missing: `make image` builds it (`make test` does)"
    cluster.import_image(ARCHIVE)
    return real_node


@pytest.fixture
def namespace(api: k8s.ApiClient) -> Iterator[str]:
    name = f"helms-{secrets.token_hex(3)}"
    k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield name
    try:
        k8s.CoreV1Api(api).delete_namespace(name)
    except ApiException as e:
        if e.status != 404:
            raise


def _controller_pods(api: k8s.ApiClient, ns: str, release: str) -> list[Any]:
    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component=controller"
    pods = k8s.CoreV1Api(api).list_namespaced_pod(ns, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def _ready_with(api: k8s.ApiClient, ns: str, release: str, level: str) -> Any:
    """A Ready controller pod running with --log-level=`level`, if there is one."""
    for pod in _controller_pods(api, ns, release):
        ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
        if ready and f"--log-level={level}" in pod.spec.containers[0].args:
            return pod
    return None


@pytest.mark.parametrize("helm", ["helm", "helm4"])
def test_install_upgrade_rollback_and_uninstall(
    cluster: Cluster,
    api: k8s.ApiClient,
    node: realnode.RealNode,
    namespace: str,
    tmp_path: Path,
    helm: str,
) -> None:
    home, name = tmp_path / "home", f"zs-{secrets.token_hex(2)}"
    version = cluster.helm(home, "version", "--short", binary=helm, check=True).stdout
    assert version.startswith("v4." if helm == "helm4" else "v3."), version
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            real_node_values(
                cluster.server, free_port(), free_port(), controller_replicas=1, mode="combined"
            )
        )
    )
    common = ["-n", namespace, "--timeout", "300s"]

    def run(*args: str) -> str:
        proc = cluster.helm(home, *args, binary=helm)
        assert proc.returncode == 0, f"{helm} {args[0]}: {proc.stderr}"
        return proc.stdout

    try:
        with step("it installs, and a controller is Ready"):
            run("install", name, str(CHART), "-f", str(values), *common)
            wait_for(lambda: _ready_with(api, namespace, name, "info"), "a Ready controller", 180)

        with step("an upgrade with a changed value rolls the pods"):
            run("upgrade", name, str(CHART), "-f", str(values), "--set", "logLevel=debug", *common)
            wait_for(lambda: _ready_with(api, namespace, name, "debug"), "the upgrade's pod", 180)

        with step("a rollback to the first revision rolls them back"):
            run("rollback", name, "1", *common)
            wait_for(lambda: _ready_with(api, namespace, name, "info"), "the rollback's pod", 180)
            history = json.loads(run("history", name, "-n", namespace, "-o", "json"))
            assert [h["revision"] for h in history] == [1, 2, 3]
            assert history[-1]["status"] == "deployed"
            assert "Rollback to 1" in history[-1]["description"]
            listed = json.loads(run("get", "values", name, "-n", namespace, "-o", "json"))
            assert "logLevel" not in listed  # the first revision's values again
    finally:
        cluster.helm(home, "uninstall", name, *common, "--wait", "--ignore-not-found",
                     binary=helm)  # fmt: skip
    with step("the uninstall leaves nothing of the release"):
        deployments = k8s.AppsV1Api(api).list_namespaced_deployment(namespace).items
        assert deployments == []
        configurations = k8s.AdmissionregistrationV1Api(api).list_mutating_webhook_configuration(
            label_selector=f"app.kubernetes.io/instance={name}"
        )
        assert configurations.items == []
