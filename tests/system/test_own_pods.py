"""A controller-runtime operator that watches Pods and ReplicaSets in every namespace, on the real
node (examples/widget-operator with --watch-pods): its own Pod and ReplicaSet, which its sleep
removes and its wake makes, never wake it; a Pod anywhere else still does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from localcluster import realnode
from localcluster.cluster import Cluster
from testkit import go_operator
from testkit.controller import (
    IMAGE,
    ControllerProcess,
    Ref,
    config_for,
    create_workload,
    grant_watch,
    reasons,
    state_of,
    wait_asleep,
    wait_event,
)
from testkit.go_operator import GoOperator
from testkit.steps import step
from testkit.waiting import wait_for

pytestmark = pytest.mark.cluster

KINDS = f"Pod,ReplicaSet.apps,{go_operator.WATCHED_KIND}"


@pytest.fixture
def watcher(
    cluster: Cluster,
    api: k8s.ApiClient,
    opted_ns: str,
    ns: str,
    controller: ControllerProcess,
    real_node: realnode.RealNode,
) -> Iterator[GoOperator]:
    """The operator in the opted-in namespace, woken by Pods and ReplicaSets there and in `ns`
    (it watches them everywhere; other tests' namespaces are left out of what wakes it)."""
    config = config_for("5s", KINDS, watch_namespaces=f"{opted_ns},{ns}")
    with go_operator.installed(
        cluster, api, opted_ns, annotations=config, registration="url", watch_pods=True
    ) as op:
        yield op


def own_pods(api: k8s.ApiClient, op: GoOperator) -> list[str]:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(
        op.namespace, label_selector=f"app.kubernetes.io/name={go_operator.NAME}"
    )
    return [p.metadata.name for p in pods.items]


def test_its_own_pods_and_replicaset_coming_and_going_never_wake_it(
    api: k8s.ApiClient, opted_ns: str, ns: str, watcher: GoOperator
) -> None:
    with step("it sleeps once it watches Pods"):
        op = watcher
        ref = Ref(opted_ns, go_operator.NAME)
        go_operator.wait_ready(api, op)
        wait_for(lambda: "saw pod" in go_operator.logs(api, op), "the operator watching Pods")
        wait_asleep(api, ref, 1, timeout=120)
        since = state_of(api, ref)[1]["zeroscaler.io/asleep-since"]
    with step("the sleep removes its own Pod"):
        # The sleep scales its ReplicaSet to zero and deletes its Pod: neither wakes it.
        wait_for(lambda: not own_pods(api, op), "its own Pod gone")
    with step(
        "neither its Pod's end nor its ReplicaSet's writes woke it: a 20 s witness slept first"
    ):
        # Twenty seconds at least, long past its Pod's end and its ReplicaSet's last status write:
        # a witness with a 20 s timeout, made now, has to fall asleep first.
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        twenty = config_for("20s", "ConfigMap", watch_namespaces=opted_ns)
        witness = create_workload(api, opted_ns, "witness", twenty, paused=True)
        wait_asleep(api, witness, 3, timeout=120)
        replicas, annotations = state_of(api, ref)
        assert replicas == 0
        assert annotations["zeroscaler.io/asleep-since"] == since
        assert "Woken" not in reasons(api, ref)
    with step("a Pod made elsewhere wakes it"):
        # A Pod made elsewhere (a kwok node runs it) wakes it, as the operator would want to see it.
        pod = {
            "metadata": {"name": "elsewhere"},
            "spec": {"containers": [{"name": "main", "image": IMAGE}]},
        }
        k8s.CoreV1Api(api).create_namespaced_pod(ns, pod)
        event = wait_event(api, ref, "Woken", f"Pod {ns}/elsewhere created")
        assert "ReplicaSet" not in event.message
        go_operator.wait_ready(api, op)
