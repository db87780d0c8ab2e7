"""A mass wake under the API server's own throttling: one write wakes fifty workloads while API
Priority and Fairness rejects the controller's excess requests with 429 and Retry-After."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.controller import (
    config_for,
    create_configmap,
    create_workload,
    grant_watch,
    start_controller,
    wait_asleep,
)
from testkit.standin import service_account_kubeconfig
from testkit.steps import step
from testkit.waiting import wait_for

pytestmark = pytest.mark.cluster

WORKLOADS = 50
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"


@dataclass(frozen=True)
class Throttled:
    kubeconfig: Path
    level: str  # the PriorityLevelConfiguration's name


@pytest.fixture
def throttled(cluster: Cluster, opted_ns: str, tmp_path: Path) -> Iterator[Throttled]:
    """A ServiceAccount allowed everything, whose requests APF admits a few at a time, rejecting
    the rest at once (a priority level of the smallest share that borrows nothing)."""
    name = f"zs-throttled-{secrets.token_hex(3)}"
    sa = "controller"
    with cluster.client() as http:
        http.post(
            f"/api/v1/namespaces/{opted_ns}/serviceaccounts", json={"metadata": {"name": sa}}
        ).raise_for_status()
        subject = {"kind": "ServiceAccount", "name": sa, "namespace": opted_ns}
        http.post(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json={
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [subject],
            },
        ).raise_for_status()
        level = http.post(
            f"{FLOWCONTROL}/prioritylevelconfigurations",
            json={
                "metadata": {"name": name},
                "spec": {
                    "type": "Limited",
                    "limited": {
                        "nominalConcurrencyShares": 1,
                        "lendablePercent": 0,
                        "borrowingLimitPercent": 0,
                        "limitResponse": {"type": "Reject"},
                    },
                },
            },
        )
        level.raise_for_status()
        http.post(
            f"{FLOWCONTROL}/flowschemas",
            json={
                "metadata": {"name": name},
                "spec": {
                    "priorityLevelConfiguration": {"name": name},
                    "matchingPrecedence": 500,
                    "distinguisherMethod": {"type": "ByUser"},
                    "rules": [
                        {
                            "subjects": [
                                {
                                    "kind": "ServiceAccount",
                                    "serviceAccount": {"name": sa, "namespace": opted_ns},
                                }
                            ],
                            "resourceRules": [
                                {
                                    "verbs": ["*"],
                                    "apiGroups": ["*"],
                                    "resources": ["*"],
                                    "clusterScope": True,
                                    "namespaces": ["*"],
                                }
                            ],
                            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                        }
                    ],
                },
            },
        ).raise_for_status()
    kubeconfig = service_account_kubeconfig(cluster, opted_ns, sa, tmp_path / "throttled.yaml")
    uid = str(level.json()["metadata"]["uid"])
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]

    def classified() -> bool:  # the API server names the priority level of every answer
        with cluster.client() as http:
            resp = http.get("/version", headers={"Authorization": f"Bearer {token}"})
        return bool(resp.headers.get("X-Kubernetes-PF-PriorityLevel-UID") == uid)

    wait_for(classified, "the controller's account classified into the tiny priority level")
    yield Throttled(kubeconfig, name)
    with cluster.client() as http:
        for path in ("flowschemas", "prioritylevelconfigurations"):
            http.delete(f"{FLOWCONTROL}/{path}/{name}")
        http.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}")


def _rejected(cluster: Cluster, level: str) -> float:
    """How many requests the API server rejected at a priority level, from its own metrics."""
    with cluster.client() as http:
        text = http.get("/metrics").text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_flowcontrol_rejected_requests_total{") and (
            f'priority_level="{level}"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_one_write_wakes_fifty_workloads_through_429s_without_losing_one(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path, throttled: Throttled
) -> None:
    with step("fifty workloads, and a controller whose account the API server throttles"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        config = config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
        refs = [create_workload(api, opted_ns, f"mass-{i:02d}", config) for i in range(WORKLOADS)]
        ctl = start_controller(cluster, opted_ns, tmp_path, kubeconfig=throttled.kubeconfig)
    try:
        with step("all fifty sleep"):
            for ref in refs:
                wait_asleep(api, ref, 3)
        with step("one write wakes each of them once, through the 429s"):
            create_configmap(api, opted_ns, "the-one-write")
            # Each is woken once by that write (with the short timeout, some sleep again before the
            # last is woken). Slowly: a few requests at a time, and the 429s wait their Retry-After.
            reason = f"ConfigMap {opted_ns}/the-one-write created"

            def woken() -> set[str]:
                events = k8s.CoreV1Api(api).list_namespaced_event(opted_ns).items
                return {
                    e.involved_object.name
                    for e in events
                    if e.reason == "Woken" and (e.message or "").startswith(reason)
                }

            wait_for(lambda: len(woken()) == WORKLOADS, f"a Woken Event on all {WORKLOADS}", 300)
        with step(
            "the API server refused requests, the controller sent them again, and none woke twice"
        ):
            # The API server rejected requests of this account, and the controller sent them again.
            assert _rejected(cluster, throttled.level) > 0
            assert ctl.metric("zeroscaler_api_throttled_responses_total") > 0, ctl.log_tail()
            assert ctl.metric("zeroscaler_wakes_total") == WORKLOADS  # none twice
    finally:
        ctl.stop()
        print(ctl.log_tail(80))
