"""Fixtures for tests against the real local control plane (one per test session)."""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from image import build as image_build
from localcluster import build, netns
from localcluster.cluster import Cluster, join_real_node, start
from localcluster.realnode import RealNode
from testkit.activator import deployed_guard
from testkit.admission_backend import Guard
from testkit.controller import WIDGET_GROUP, ControllerProcess, start_controller
from testkit.crds import create_crd
from testkit.namespaces import publish_root_ca

ENABLED_LABEL = "zeroscaler.io/enabled"
# The controllers, webhooks and commands these tests start import this checkout's code, even where
# the virtualenv's editable install points at another checkout (a git worktree sharing it).
_CHECKOUT = str(Path(__file__).resolve().parents[2])
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_CHECKOUT, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
)


def _say(message: str) -> None:
    print(f"[localcluster] {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A real etcd + kube-apiserver + controller-manager + scheduler + kwok, and a real node."""
    if os.environ.get(netns.REQUIRE_ENV) == "1" and not netns.in_isolation():
        pytest.exit(
            "system tests must run in a loopback-only network namespace (make test does)", 2
        )
    binaries = build.ensure_binaries(progress=_say, node=True)
    running = start(binaries, nodes=2, progress=_say)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def real_node(cluster: Cluster) -> RealNode:
    """The session cluster's real node, joined when a test first needs it (so a session, or a
    parallel worker, without such tests never starts one); where this machine cannot run one, a
    skip (a failure under CI=true)."""
    node = _joined(cluster)
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the cluster has no real node: {cluster.real_node_absent}")
        pytest.skip(f"no real node on this machine: {cluster.real_node_absent}")
    return node


def _joined(cluster: Cluster) -> RealNode | None:
    if cluster.real_node is None and not cluster.real_node_absent:
        join_real_node(cluster, progress=_say)
    return cluster.real_node


@pytest.fixture(autouse=True)
def _real_node_when_marked(request: pytest.FixtureRequest) -> None:
    """A test marked `real_node` (tests/conftest.py) finds the node joined, where this machine can
    run one, before its own fixtures run."""
    if request.node.get_closest_marker("real_node") is not None:
        _joined(request.getfixturevalue("cluster"))


@pytest.fixture(scope="session")
def api(cluster: Cluster) -> Iterator[k8s.ApiClient]:
    """The official Python client, as the cluster admin."""
    client = k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))
    yield client
    client.close()


def _namespace(
    api: k8s.ApiClient, cluster: Cluster, request: pytest.FixtureRequest, labels: dict[str, str]
) -> str:
    """A fresh namespace, with the controller manager's CA map in it already."""
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{secrets.token_hex(3)}"
    body = k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name, labels=labels))
    core = k8s.CoreV1Api(api)
    core.create_namespace(body)
    publish_root_ca(core, name, cluster.ca_file.read_text())
    return name


@pytest.fixture
def ns(api: k8s.ApiClient, cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    name = _namespace(api, cluster, request, {})
    yield name
    k8s.CoreV1Api(api).delete_namespace(name)


@pytest.fixture
def opted_ns(api: k8s.ApiClient, cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace opted in to zeroscaler by label."""
    name = _namespace(api, cluster, request, {ENABLED_LABEL: "true"})
    yield name
    k8s.CoreV1Api(api).delete_namespace(name)


@pytest.fixture
def policy_ns(api: k8s.ApiClient) -> Iterator[str]:
    """A fresh namespace for a webhook's policy ConfigMaps."""
    name = f"zs-policy-{secrets.token_hex(3)}"
    k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield name
    k8s.CoreV1Api(api).delete_namespace(name)


@pytest.fixture(scope="session")
def kubeconfig(cluster: Cluster) -> Path:
    return cluster.kubeconfig


@pytest.fixture(scope="session")
def widgets(api: k8s.ApiClient) -> None:
    """The Widget CRD the controller tests watch."""
    create_crd(api, WIDGET_GROUP, "Widget", "widgets")


@pytest.fixture
def controller(
    cluster: Cluster, opted_ns: str, tmp_path: Path, widgets: None
) -> Iterator[ControllerProcess]:
    """A controller leading in the test's opted-in namespace; its log tail shown on failure."""
    ctl = start_controller(cluster, opted_ns, tmp_path)
    yield ctl
    ctl.stop()
    print(ctl.log_tail(80))  # shown by pytest when the test failed


@pytest.fixture
def guard_image(cluster: Cluster, real_node: RealNode) -> str:
    """zeroscaler's image, which holds the webhook backends' server, on the real node."""
    archive = Path(
        os.environ.get("ZEROSCALER_IMAGE", image_build.REPO / "dist/zeroscaler-image.tar")
    )
    assert archive.exists(), f"{archive} is missing: `make image` builds it (`make test` does)"
    cluster.import_image(archive)
    return image_build.default_name()


@pytest.fixture
def guard(
    api: k8s.ApiClient, opted_ns: str, tmp_path: Path, guard_image: str, widgets: None
) -> Iterator[Guard]:
    """A webhook backend, awake and Ready, its webhooks registered for Widgets in its namespace
    (`testkit.activator.deployed_guard`)."""
    with deployed_guard(api, opted_ns, tmp_path, guard_image) as backend:
        yield backend
