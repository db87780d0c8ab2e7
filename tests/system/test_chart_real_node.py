"""The chart installed as a user installs it: zeroscaler's own image in containers on a real node.

Nothing of zeroscaler runs on the host. `make image` builds the image (before the loopback-only
namespace is entered: it needs the package archives); the test imports it into the real node's
containerd and `helm install`s the chart with its default certificate mode, so the `zeroscaler
certs` Job runs in a pod too. There is no pod network on the real node: the pods use the host
network (`hostNetwork`), the webhook is registered by URL on 127.0.0.1 and in-cluster config is
pointed at the API server on 127.0.0.1 (`apiServer.*`).

Two controller replicas on one node's host network would bind the same port, so the scheduler
keeps the second one Pending; the hand-over test kills the leader and sees the other replica take
the Lease once it has the node.

Every test runs in both modes: split (a controller and a webhook Deployment) and combined (one
Deployment whose pods run both in one process).
"""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
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
from testkit.controller import create_workload, grant_watch
from testkit.real_chart import real_node_values
from testkit.steps import step
from testkit.waiting import wait_for
from zeroscaler.certs.issue import new_ca

CHART = Path(__file__).resolve().parents[2] / "charts" / "zeroscaler"
ARCHIVE = Path(os.environ.get("ZEROSCALER_IMAGE", image_build.REPO / "dist/zeroscaler-image.tar"))
ENABLED_LABEL = "zeroscaler.io/enabled"
IDLE_TIMEOUT = "5s"  # real_node_values' default


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    fullname: str
    home: Path
    values: Path
    mode: str

    @property
    def serving(self) -> str:
        """The component label of the pods that answer the API server's reviews."""
        return "controller" if self.mode == "combined" else "webhook"


@pytest.fixture(scope="module")
def node(cluster: Cluster, real_node: realnode.RealNode) -> realnode.RealNode:
    """The real node, with the image `make image` built imported into it."""
    assert ARCHIVE.exists(), f"{ARCHIVE} is missing: `make image` builds it (`make test` does)"
    cluster.import_image(ARCHIVE)
    return real_node


def _install(cluster: Cluster, api: k8s.ApiClient, home: Path, mode: str) -> Release:
    name = f"zs-{secrets.token_hex(3)}"
    namespace = f"real-{name}"
    k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    values = home / "values.yaml"
    values.write_text(
        yaml.safe_dump(real_node_values(cluster.server, free_port(), free_port(), mode=mode))
    )
    # No --wait: with one node, the second controller replica cannot be placed (see above).
    proc = cluster.helm(home, "install", name, str(CHART), "-n", namespace, "-f", str(values),
        "--timeout", "300s",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return Release(name, namespace, f"{name}-zeroscaler", home, values, mode)


def _remove(cluster: Cluster, api: k8s.ApiClient, release: Release) -> None:
    """Uninstall the release if it is still there, and delete its namespace."""
    cluster.helm(release.home, "uninstall", release.name, "-n", release.namespace,
        "--ignore-not-found", "--wait", "--timeout", "120s",
    )  # fmt: skip
    try:
        k8s.CoreV1Api(api).delete_namespace(release.namespace)
    except ApiException as e:
        if e.status != 404:
            raise


class Releases:
    """The one release of a mode at a time, installed when a test first needs it.

    Tests that leave the release as they found it share it; a test that changes or removes it takes
    it for itself, and the next test gets a new one. Two releases never run at once: both would act
    on every opted-in namespace.
    """

    def __init__(self, install: Callable[[], Release], remove: Callable[[Release], None]) -> None:
        self._install, self._remove = install, remove
        self._current: Release | None = None

    def shared(self) -> Release:
        if self._current is None:
            self._current = self._install()
        return self._current

    def take(self) -> Release:
        release = self.shared()
        self._current = None
        return release

    def close(self) -> None:
        if self._current is not None:
            self._remove(self.take())


@pytest.fixture(scope="module", params=["split", "combined"])
def releases(
    cluster: Cluster,
    api: k8s.ApiClient,
    node: realnode.RealNode,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Releases]:
    mode = str(request.param)
    holder = Releases(
        lambda: _install(cluster, api, tmp_path_factory.mktemp("helm"), mode),
        partial(_remove, cluster, api),
    )
    yield holder
    holder.close()


@pytest.fixture
def release(releases: Releases) -> Release:
    """The release of this mode at its installed values, shared with other tests."""
    return releases.shared()


@pytest.fixture
def own_release(cluster: Cluster, api: k8s.ApiClient, releases: Releases) -> Iterator[Release]:
    """A release for this test alone, to change or uninstall; removed afterwards."""
    release = releases.take()
    yield release
    _remove(cluster, api, release)


# --- reading pods and leases ----------------------------------------------------------------------


def _pods(api: k8s.ApiClient, release: Release, component: str) -> list[Any]:
    selector = f"app.kubernetes.io/instance={release.name},app.kubernetes.io/component={component}"
    pods = k8s.CoreV1Api(api).list_namespaced_pod(release.namespace, label_selector=selector)
    return [p for p in pods.items if p.metadata.deletion_timestamp is None]


def _is_ready(pod: Any) -> bool:
    conditions = pod.status.conditions or []
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )


def _ready_pods(api: k8s.ApiClient, release: Release, component: str) -> list[Any]:
    return [p for p in _pods(api, release, component) if _is_ready(p)]


def _holder(api: k8s.ApiClient, release: Release) -> str:
    try:
        lease = k8s.CoordinationV1Api(api).read_namespaced_lease(
            f"{release.fullname}-controller", release.namespace
        )
    except ApiException as e:
        if e.status == 404:
            return ""
        raise
    return str(lease.spec.holder_identity or "")


def _leader(api: k8s.ApiClient, release: Release) -> Any:
    """The ready controller pod that holds the Lease, if there is one."""
    holder = _holder(api, release)
    return next(
        (p for p in _ready_pods(api, release, "controller") if p.metadata.name == holder), None
    )


# --- install --------------------------------------------------------------------------------------


def test_certs_job_ran_in_a_pod_and_wrote_the_secret_and_the_ca_bundle(
    api: k8s.ApiClient, release: Release
) -> None:
    secret = k8s.CoreV1Api(api).read_namespaced_secret(
        f"{release.fullname}-webhook-tls", release.namespace
    )
    assert {"tls.crt", "tls.key", "ca.crt"} <= set(secret.data)
    config = k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(
        release.fullname
    )
    (entry,) = config.webhooks
    assert entry.client_config.url.startswith("https://127.0.0.1:")
    assert entry.client_config.ca_bundle == secret.data["ca.crt"]
    assert b"BEGIN CERTIFICATE" in base64.b64decode(entry.client_config.ca_bundle)


def test_both_components_run_in_containers_on_the_real_node_and_pass_their_probes(
    api: k8s.ApiClient, release: Release
) -> None:
    with step("a webhook pod is Ready, and a controller pod leads"):
        webhook = wait_for(
            lambda: _ready_pods(api, release, release.serving), "a Ready webhook pod", 180
        )
        leader = wait_for(
            lambda: _leader(api, release), "a Ready controller pod holding the Lease", 180
        )
    with step("both run in containers on the real node, each as its own account"):
        commands = {"split": "zeroscaler-controller", "combined": "zeroscaler-combined"}
        assert leader.spec.containers[0].command == [commands[release.mode]]
        assert _pods(api, release, "webhook") == [] or release.mode == "split"
        for pod in [*webhook, leader]:
            assert pod.spec.node_name == realnode.NODE_NAME
            assert pod.spec.host_network is True
            (status,) = pod.status.container_statuses
            assert status.ready
            assert status.image.endswith(f"zeroscaler:{image_build.version()}")
            assert status.image_id.startswith("sha256:")
            # The ServiceAccount token is projected into the container; nothing else grants access.
            assert pod.spec.service_account_name.startswith(release.fullname)
            mounts = {m.mount_path for m in pod.spec.containers[0].volume_mounts}
            assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts


def test_the_second_controller_replica_waits_for_a_node_with_free_ports(
    api: k8s.ApiClient, release: Release
) -> None:
    with step("a controller pod leads"):
        wait_for(lambda: _leader(api, release), "a leading controller pod", 180)

    with step("the other replica waits, unschedulable for want of free ports"):

        def pending() -> Any:
            for pod in _pods(api, release, "controller"):
                for c in pod.status.conditions or []:
                    if (
                        c.type == "PodScheduled"
                        and c.status == "False"
                        and "free ports" in (c.message or "")
                    ):
                        return pod
            return None

        wait_for(pending, "the other controller replica to be unschedulable for want of free ports")


# --- what the components do ----------------------------------------------------------------------


def _operator(api: k8s.ApiClient, namespace: str, *deployments: tuple[str, int]) -> None:
    """Operators whose ServiceAccount may watch ConfigMaps: Deployments of (name, replicas)."""
    grant_watch(api, namespace, [("", ["configmaps"])], sa="op", name="op")
    for name, replicas in deployments or (("op", 1),):
        create_workload(api, namespace, name, {}, replicas=replicas, sa="op")


def _replicas(api: k8s.ApiClient, namespace: str, name: str = "op") -> int:
    return int(k8s.AppsV1Api(api).read_namespaced_deployment(name, namespace).spec.replicas)


def _ours(api: k8s.ApiClient, namespace: str, name: str) -> dict[str, str]:
    """The zeroscaler annotations on a Deployment."""
    meta = k8s.AppsV1Api(api).read_namespaced_deployment(name, namespace).metadata
    return {k: v for k, v in (meta.annotations or {}).items() if k.startswith("zeroscaler.io/")}


def _asleep(api: k8s.ApiClient, namespace: str, name: str, restore: int) -> bool:
    ours = _ours(api, namespace, name)
    return (
        _replicas(api, namespace, name) == 0
        and ours.get("zeroscaler.io/state") == "asleep"
        and ours.get("zeroscaler.io/restore-replicas") == str(restore)
    )


def _touch(api: k8s.ApiClient, namespace: str) -> None:
    name = f"wake-{secrets.token_hex(3)}"
    k8s.CoreV1Api(api).create_namespaced_config_map(
        namespace, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=name), data={"a": "b"})
    )


@contextmanager
def _operators(
    api: k8s.ApiClient, release: Release, *deployments: tuple[str, int]
) -> Iterator[str]:
    """An opted-in namespace with operators in it, once the release's pods are ready."""
    wait_for(lambda: _ready_pods(api, release, release.serving), "a Ready webhook pod", 180)
    wait_for(lambda: _leader(api, release), "a leading controller pod", 180)
    name = f"op-{secrets.token_hex(3)}"
    k8s.CoreV1Api(api).create_namespace(
        k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name, labels={ENABLED_LABEL: "true"}))
    )
    try:
        _operator(api, name, *deployments)
        yield name
    finally:  # a failed test must not leave opted-in workloads to the tests after it
        k8s.CoreV1Api(api).delete_namespace(name)


@pytest.fixture
def operator_ns(api: k8s.ApiClient, release: Release) -> Iterator[str]:
    with _operators(api, release) as name:
        yield name


def test_webhook_pod_annotates_and_controller_pod_sleeps_and_wakes_the_operator(
    api: k8s.ApiClient, release: Release, operator_ns: str
) -> None:
    with step("the webhook annotated the operator from the chart's policy"):
        annotations = (
            k8s.AppsV1Api(api).read_namespaced_deployment("op", operator_ns).metadata.annotations
        )
        assert annotations["zeroscaler.io/idle-timeout"] == IDLE_TIMEOUT
        assert "ConfigMap" in annotations["zeroscaler.io/watched-kinds"]
    with step("the controller puts the idle operator to sleep"):
        wait_for(
            lambda: _replicas(api, operator_ns) == 0, "the idle operator to be put to sleep", 90
        )
    with step("a ConfigMap change wakes it"):
        _touch(api, operator_ns)
        wait_for(
            lambda: _replicas(api, operator_ns) == 1, "a ConfigMap change to wake the operator"
        )


def test_killing_the_leading_controller_pod_hands_over_to_the_other_replica(
    api: k8s.ApiClient, release: Release, operator_ns: str
) -> None:
    with step("the leading controller pod is killed"):
        old = wait_for(lambda: _leader(api, release), "a leading controller pod", 180)
        k8s.CoreV1Api(api).delete_namespaced_pod(old.metadata.name, release.namespace)

    with step("another controller pod takes the Lease"):

        def new_leader() -> Any:
            pod = _leader(api, release)
            return pod if pod is not None and pod.metadata.name != old.metadata.name else None

        wait_for(new_leader, "another controller pod to take the Lease", 180)
    with step("the new leader does the work: the operator wakes, sleeps and wakes again"):
        _touch(api, operator_ns)
        wait_for(lambda: _replicas(api, operator_ns) == 1, "the operator to be awake", 90)
        wait_for(lambda: _replicas(api, operator_ns) == 0, "the new leader to put it to sleep", 90)
        _touch(api, operator_ns)
        wait_for(lambda: _replicas(api, operator_ns) == 1, "the new leader to wake it")


# --- zeroscaler check ----------------------------------------------------------------------------

ZEROSCALER = Path(sys.executable).parent / "zeroscaler"


def _check(cluster: Cluster, release: Release, ns: str) -> Checked:
    """`zeroscaler check` as a user runs it: exit code, each part's ok/FAIL, and what it said."""
    proc = subprocess.run(
        [str(ZEROSCALER), "check", f"--kubeconfig={cluster.kubeconfig}", "-n", ns,
         "--instance", release.name],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    parts = {}
    for line in proc.stdout.splitlines():  # `ok    part                 what was seen`
        status = line[:5].strip()
        if status in ("ok", "FAIL"):
            parts[line[6:26].strip()] = status
    return proc.returncode, parts, proc.stdout + proc.stderr


Checked = tuple[int, dict[str, str], str]


def _check_until(
    cluster: Cluster, release: Release, ns: str, done: Callable[[Checked], bool], what: str
) -> Checked:
    """Run `zeroscaler check` until its result is `done` (the cluster settles in its own time)."""

    def attempt() -> Checked | None:
        result = _check(cluster, release, ns)
        return result if done(result) else None

    return wait_for(attempt, what, 90)


def test_zeroscaler_check_passes_on_a_healthy_install(
    cluster: Cluster, release: Release, operator_ns: str
) -> None:
    # Once the leader has written the activator's probe (within its probe interval of leading).
    _, parts, said = _check_until(
        cluster, release, operator_ns, lambda r: r[0] == 0, "zeroscaler check to pass"
    )
    assert set(parts) >= {
        "webhook endpoints", "webhook certificate", "webhook called", "controller leads",
        "activator",
    }, said  # fmt: skip
    assert set(parts.values()) == {"ok"}, said
    assert any(p.startswith("rbac ") for p in parts), said
    assert "came back with idle-timeout=" in said


def _webhook_configuration(api: k8s.ApiClient, release: Release) -> Any:
    return k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(release.fullname)


def _patch_client(api: k8s.ApiClient, release: Release, client: dict[str, Any]) -> None:
    k8s.AdmissionregistrationV1Api(api).patch_mutating_webhook_configuration(
        release.fullname,
        {"webhooks": [{"name": "workloads.zeroscaler.io", "clientConfig": client}]},
    )


def test_zeroscaler_check_names_the_part_that_fails(
    cluster: Cluster, api: k8s.ApiClient, own_release: Release
) -> None:
    release = own_release
    # The running webhook keeps the caBundle equal to its Secret's CA (in-process renewal): off
    # here, so that a wrong one stays wrong. The certificate Job still writes the right one.
    proc = cluster.helm(release.home, "upgrade", release.name, str(CHART), "-n", release.namespace,
        "-f", str(release.values), "--set", "certificates.job.renewal.enabled=false",
        "--set", "controller.replicas=1", "--timeout", "300s",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with _operators(api, release) as ns:
        _check_until(cluster, release, ns, lambda r: r[0] == 0, "zeroscaler check to pass")
        original = _webhook_configuration(api, release).webhooks[0].client_config
        bundle = str(original.ca_bundle)  # base64, as the API holds it

        # A caBundle of another CA.
        other = base64.b64encode(new_ca("not-zeroscaler").cert_pem).decode()
        _patch_client(api, release, {"caBundle": other})
        code, parts, said = _check(cluster, release, ns)
        assert code == 1, said
        assert parts["webhook certificate"] == "FAIL", said
        assert "does not hold the CA of Secret" in said
        _patch_client(api, release, {"caBundle": bundle})

        # The webhook's Service, with no endpoints, as the API server's way to it.
        service = f"{release.fullname}-webhook"
        k8s.CoreV1Api(api).patch_namespaced_service(
            service, release.namespace, {"spec": {"selector": {"zeroscaler-check": "nothing"}}}
        )
        _patch_client(api, release, {
            "url": None, "caBundle": bundle,
            "service": {"namespace": release.namespace, "name": service, "port": 443,
                        "path": "/mutate"},
        })  # fmt: skip
        code, parts, said = _check_until(
            cluster, release, ns, lambda r: r[1].get("webhook called") == "FAIL",
            "check to see the webhook not called",
        )  # fmt: skip
        assert code == 1, said
        assert parts["webhook endpoints"] == "FAIL", said
        assert f"Service {release.namespace}/{service} has no ready endpoints" in said
        _patch_client(api, release, {"service": None, "url": original.url, "caBundle": bundle})

        # The controller scaled to zero.
        controller = f"{release.fullname}-controller"
        k8s.AppsV1Api(api).patch_namespaced_deployment_scale(
            controller, release.namespace, {"spec": {"replicas": 0}}
        )
        wait_for(lambda: not _pods(api, release, "controller"), "the controller pods to go", 120)
        code, parts, said = _check_until(
            cluster, release, ns, lambda r: r[1].get("controller leads") == "FAIL",
            "check to see no controller leading",
        )  # fmt: skip
        assert code == 1, said
        assert f"Deployment {release.namespace}/{controller} has no Ready replica" in said


# --- upgrade and uninstall -----------------------------------------------------------------------


def test_helm_upgrade_with_a_changed_value_rolls_the_pods(
    cluster: Cluster, api: k8s.ApiClient, own_release: Release
) -> None:
    release = own_release
    with step("the release's pods are Ready, and a controller pod leads"):
        # Pods of the release as installed, so the ones the upgrade makes can be told apart.
        wait_for(lambda: _ready_pods(api, release, release.serving), "a Ready webhook pod", 180)
        wait_for(lambda: _leader(api, release), "a leading controller pod", 180)
        before = {p.metadata.name for p in _pods(api, release, release.serving)}
    with step("helm upgrade changes the log level"):
        # One controller replica from now on: with more replicas than nodes, a host-network rollout
        # cannot go on (the one running pod is the only available one and holds the ports).
        proc = cluster.helm(release.home, "upgrade", release.name, str(CHART),
            "-n", release.namespace, "-f", str(release.values),
            "--set", "logLevel=debug", "--set", "controller.replicas=1", "--timeout", "300s",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr

    with step("the pods roll: a new serving pod with the changed flag is Ready"):

        def rolled(component: str) -> list[Any]:
            return [
                p
                for p in _ready_pods(api, release, component)
                if "--log-level=debug" in p.spec.containers[0].args
                and p.metadata.name not in before
            ]

        wait_for(
            lambda: rolled(release.serving),
            "a new webhook pod with the changed flag to be Ready",
            180,
        )

    with step("a controller pod with the changed flag leads"):

        def leading_new_controller() -> Any:
            pod = _leader(api, release)
            return (
                pod
                if pod is not None and "--log-level=debug" in pod.spec.containers[0].args
                else None
            )

        wait_for(leading_new_controller, "a controller pod with the changed flag to lead", 180)


def _names(items: list[Any]) -> set[str]:
    return {i.metadata.name for i in items}


@pytest.fixture
def sleepers(api: k8s.ApiClient, own_release: Release) -> Iterator[tuple[str, dict[str, int]]]:
    """Three operators, annotated by the webhook, asleep (their pods on kwok nodes)."""
    counts = {"one": 1, "two": 2, "three": 3}
    with _operators(api, own_release, *counts.items()) as name:
        for op, count in counts.items():
            wait_for(partial(_asleep, api, name, op, count), f"{op} to be put to sleep", 90)
        yield name, counts


def test_helm_uninstall_wakes_every_sleeper_and_leaves_nothing_behind(
    cluster: Cluster,
    api: k8s.ApiClient,
    own_release: Release,
    node: realnode.RealNode,
    sleepers: tuple[str, dict[str, int]],
) -> None:
    release = own_release
    with step("uninstall wakes every sleeper and leaves nothing of zeroscaler on them"):
        proc = cluster.helm(release.home, "uninstall", release.name, "-n", release.namespace,
            "--wait", "--timeout", "300s",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        # The pre-delete hook ran before anything went: each sleeper is awake at its count, and
        # nothing zeroscaler wrote (status or the webhook's annotations) is left on any workload.
        sleepers_ns, counts = sleepers
        for name, count in counts.items():
            assert _replicas(api, sleepers_ns, name) == count, name
            assert _ours(api, sleepers_ns, name) == {}, name
        woken = k8s.CoreV1Api(api).list_namespaced_event(
            sleepers_ns, field_selector="involvedObject.name=three,reason=Woken"
        )
        assert any("zeroscaler uninstalled" in (e.message or "") for e in woken.items)
    with step("every object of the release goes, and what its programs wrote"):
        core, apps, rbac = k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.RbacAuthorizationV1Api(api)
        ns, mine = release.namespace, f"app.kubernetes.io/instance={release.name}"
        listings: dict[str, Callable[[], list[Any]]] = {
            "pods": lambda: core.list_namespaced_pod(ns).items,
            "deployments": lambda: apps.list_namespaced_deployment(ns).items,
            "jobs": lambda: k8s.BatchV1Api(api).list_namespaced_job(ns).items,
            "services": lambda: core.list_namespaced_service(ns).items,
            "configmaps": lambda: core.list_namespaced_config_map(ns, label_selector=mine).items,
            "roles": lambda: rbac.list_namespaced_role(ns).items,
            "rolebindings": lambda: rbac.list_namespaced_role_binding(ns).items,
            "clusterroles": lambda: rbac.list_cluster_role(label_selector=mine).items,
            "clusterrolebindings": lambda: (
                rbac.list_cluster_role_binding(label_selector=mine).items
            ),
            "webhook configurations": lambda: (
                k8s.AdmissionregistrationV1Api(api)
                .list_mutating_webhook_configuration(label_selector=mine)
                .items
            ),
            "service accounts": lambda: [
                a
                for a in core.list_namespaced_service_account(ns).items
                if a.metadata.name != "default"
            ],
        }

        def left() -> dict[str, set[str]]:
            return {kind: names for kind, list_ in listings.items() if (names := _names(list_()))}

        wait_for(lambda: not left(), "every object of the release to be deleted", 120)
        # What the programs wrote at run time went too: the serving certificate and the Lease.
        assert _names(core.list_namespaced_secret(ns).items) == set()
        assert _names(k8s.CoordinationV1Api(api).list_namespaced_lease(ns).items) == set()

    with step("no container of the release is left on the node"):

        def containers() -> str:
            cmd = [
                str(node.ctr),
                "--address",
                str(node.socket),
                "-n",
                "k8s.io",
                "containers",
                "list",
            ]
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout

        image = f"zeroscaler:{image_build.version()}"
        wait_for(lambda: image not in containers(), "the release's containers to be removed", 120)
