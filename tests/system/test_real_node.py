"""The real node runs real containers: probes, logs, exec, deletion; its stop leaves nothing."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from localcluster import build, realnode
from localcluster.cluster import Cluster, start
from localcluster.processes import free_port
from testkit.steps import step
from testkit.waiting import wait_for

IMAGE = build.BUSYBOX_IMAGE


@pytest.fixture(scope="session")
def busybox(cluster: Cluster, real_node: realnode.RealNode) -> str:
    """The test image, imported into the real node once per session."""
    cluster.import_image(cluster.binaries["busybox.tar"])
    return IMAGE


def _pod(name: str, script: str, *, port: int | None = None, tolerate: bool = True) -> k8s.V1Pod:
    probe = None
    if port is not None:
        probe = k8s.V1Probe(
            http_get=k8s.V1HTTPGetAction(host="127.0.0.1", port=port, path="/"),
            period_seconds=1,
        )
    tolerations = [k8s.V1Toleration(key=realnode.LABEL, operator="Exists", effect="NoSchedule")]
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V1PodSpec(
            host_network=True,  # no pod network on the real node: every pod shares 127.0.0.1
            node_selector={realnode.LABEL: "true"},
            tolerations=tolerations if tolerate else None,
            termination_grace_period_seconds=5,
            automount_service_account_token=False,
            containers=[
                k8s.V1Container(
                    name="main",
                    image=IMAGE,
                    image_pull_policy="Never",
                    command=["sh", "-c", script],
                    readiness_probe=probe,
                )
            ],
        ),
    )


def _serve(port: int) -> str:
    """A shell script that logs a line, then serves "ok" over HTTP on 127.0.0.1:port."""
    return (
        "echo hello from the real node; mkdir -p /tmp/www; echo ok > /tmp/www/index.html; "
        f"exec httpd -f -p 127.0.0.1:{port} -h /tmp/www"
    )


def _wait_default_sa(api: k8s.ApiClient, ns: str) -> None:
    core = k8s.CoreV1Api(api)
    wait_for(
        lambda: any(
            sa.metadata.name == "default" for sa in core.list_namespaced_service_account(ns).items
        ),
        "the namespace's default ServiceAccount",
    )


def _ready(api: k8s.ApiClient, ns: str, name: str) -> bool:
    pod = k8s.CoreV1Api(api).read_namespaced_pod(name, ns)
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _processes_with(text: str) -> list[int]:
    """Host PIDs whose command line contains `text` (the node's PID namespace is nested in ours)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                if text.encode() in (entry / "cmdline").read_bytes().replace(b"\0", b" "):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _get(port: int) -> str | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).text
    except httpx.HTTPError:
        return None


@pytest.fixture
def served(api: k8s.ApiClient, ns: str, busybox: str) -> tuple[str, int]:
    """A Ready pod on the real node serving HTTP on a port of its own."""
    _wait_default_sa(api, ns)
    port = free_port()
    k8s.CoreV1Api(api).create_namespaced_pod(ns, _pod("web", _serve(port), port=port))
    wait_for(lambda: _ready(api, ns, "web"), "the real pod to pass its readiness probe")
    return "web", port


def test_a_real_pod_runs_on_the_real_node_and_passes_its_probe(
    api: k8s.ApiClient, ns: str, served: tuple[str, int]
) -> None:
    name, port = served
    pod = k8s.CoreV1Api(api).read_namespaced_pod(name, ns)
    assert pod.spec.node_name == realnode.NODE_NAME
    assert pod.status.phase == "Running"
    assert _get(port) == "ok\n", "nothing of the pod answers on its port"


def test_kubectl_logs_and_exec_reach_the_kubelet(
    cluster: Cluster, ns: str, served: tuple[str, int]
) -> None:
    name, _port = served
    logs = cluster.kubectl("logs", "-n", ns, name).stdout
    assert logs.splitlines()[0] == "hello from the real node"
    out = cluster.kubectl("exec", "-n", ns, name, "--", "cat", "/tmp/www/index.html").stdout
    assert out == "ok\n"


def test_deleting_the_pod_ends_its_process_and_cgroup(
    api: k8s.ApiClient, ns: str, served: tuple[str, int], real_node: realnode.RealNode
) -> None:
    with step("the pod's server is a process on this machine, in a cgroup of its own"):
        name, port = served
        core = k8s.CoreV1Api(api)
        uid = core.read_namespaced_pod(name, ns).metadata.uid
        pids = _processes_with(f"127.0.0.1:{port}")
        assert pids, "the pod's server is not a process on this machine"
        pod_cgroups = [
            d
            for m in realnode.cgroup_mounts()
            for d in (m / real_node.cgroup_root).glob(f"kubepods*/**/pod{uid}")
        ]
        assert pod_cgroups, "the pod has no cgroup under the node's cgroup root"

    with step("deleting the pod ends its process and removes its cgroups"):
        core.delete_namespaced_pod(name, ns)
        wait_for(
            lambda: not [p for p in pids if Path(f"/proc/{p}").exists()], "the pod's process to end"
        )
        wait_for(lambda: not any(d.exists() for d in pod_cgroups), "the pod's cgroups to go")
        assert _get(port) is None


def test_pods_that_do_not_tolerate_the_taint_never_land_there(
    api: k8s.ApiClient, ns: str, busybox: str
) -> None:
    _wait_default_sa(api, ns)
    core = k8s.CoreV1Api(api)
    core.create_namespaced_pod(ns, _pod("intolerant", "sleep 600", tolerate=False))

    def unschedulable() -> bool:
        pod = core.read_namespaced_pod("intolerant", ns)
        return any(
            c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
            for c in pod.status.conditions or []
        )

    wait_for(unschedulable, "the scheduler to refuse the pod")
    assert core.read_namespaced_pod("intolerant", ns).spec.node_name is None


def _mounts_under(path: Path) -> list[str]:
    text = Path("/proc/self/mountinfo").read_text()
    return [line for line in text.splitlines() if str(path) in line]


def test_a_stopped_cluster_leaves_no_process_mount_or_cgroup(real_node: realnode.RealNode) -> None:
    """On a cluster of its own: stop it with a container running, then look for leftovers."""
    binaries = build.ensure_binaries(node=True)
    cluster = start(binaries, nodes=1, real_node=True)
    workdir = cluster.workdir
    try:
        node = cluster.real_node
        assert node is not None
        cluster.import_image(binaries["busybox.tar"])
        marker = f"sleep {600 + secrets.randbelow(1000)}"
        api = k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))
        with api:
            k8s.CoreV1Api(api).create_namespaced_pod("default", _pod("sleeper", f"exec {marker}"))
            wait_for(lambda: bool(_processes_with(marker)), "the container's process to start")
        namespace_pids = [node.init_pid, *_processes_with(marker)]
        cgroup_roots = [m / node.cgroup_root for m in realnode.cgroup_mounts()]
        assert any(d.is_dir() for d in cgroup_roots)
        # containerd's mounts (overlays, the bind mounts) exist only in the node's namespace.
        assert _mounts_under(workdir) == []
    finally:
        cluster.stop()
    assert [p for p in namespace_pids if Path(f"/proc/{p}").exists()] == []
    assert _processes_with(str(workdir)) == []
    assert [str(d) for d in cgroup_roots if d.exists()] == []
    assert _mounts_under(workdir) == []
    assert not workdir.exists()
