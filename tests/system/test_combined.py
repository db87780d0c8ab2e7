"""`zeroscaler-combined`: the controller and the webhook as one real process, one cluster view."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from localcluster.processes import free_port
from testkit.controller import (
    Ref,
    create_configmap,
    grant_watch,
    state_of,
    wait_asleep,
    wait_woken,
)
from testkit.steps import step
from testkit.waiting import wait_for
from testkit.webhook import INJECTED, Webhook, admitted_until, create_workload, deployment
from zeroscaler.core.durations import parse_time

pytestmark = pytest.mark.cluster

COMBINED = Path(sys.executable).parent / "zeroscaler-combined"
WATCHED = "zeroscaler.io/watched-kinds"
LEASE = "zeroscaler-combined-test"


def test_one_process_annotates_while_another_leads_then_sleeps_and_wakes_once_it_leads(
    cluster: Cluster, api: k8s.ApiClient, opted_ns: str, policy_ns: str, tmp_path: Path
) -> None:
    with step("another replica holds the Lease"):
        grant_watch(api, opted_ns, [("", ["configmaps"])], sa="op")
        # Another replica holds the Lease: this process must still answer the API server's reviews.
        leases = k8s.CoordinationV1Api(api)
        leases.create_namespaced_lease(
            opted_ns,
            k8s.V1Lease(
                metadata=k8s.V1ObjectMeta(name=LEASE),
                spec=k8s.V1LeaseSpec(
                    holder_identity="someone-else",
                    lease_duration_seconds=3600,
                    renew_time=datetime.now(UTC),
                ),
            ),
        )
    with step("one process runs both halves, its webhook registered"):
        port = free_port()
        controller_flags = [
            str(COMBINED),
            "--kubeconfig", str(cluster.kubeconfig),
            "--metrics-host", "127.0.0.1",
            "--metrics-port", str(port),
            "--lease-namespace", opted_ns,
            "--lease-name", LEASE,
            "--policy-namespace", policy_ns,  # the webhook's: one policy watch for both halves
            "--id", "combined-a",
            "--lease-duration", "3",
            "--discovery-interval", "2",
            "--access-review-ttl", "1",
            "--log-level", "debug",
            "--",
        ]  # fmt: skip
        hook = Webhook(cluster, tmp_path, policy_ns)  # its own namespace is never mutated
        hook.start(command=controller_flags)
        hook.register(api)
    try:
        with step("the webhook half annotates a workload, while the controller half does not lead"):
            hook.enrol(api, opted_ns)
            # The webhook half infers the kinds from the ServiceAccount's RBAC; the timeout is ours.
            obj = deployment("op", {"zeroscaler.io/idle-timeout": "3s"}, service_account="op")
            admitted_until(
                cluster,
                opted_ns,
                obj,
                lambda a: a.annotations.get(WATCHED) == "ConfigMap",
                "the combined webhook to infer ConfigMap from the new RBAC",
            )
            created = create_workload(cluster, opted_ns, obj)
            assert WATCHED in created.annotations[INJECTED]
            metrics = f"http://127.0.0.1:{port}/metrics"
            assert "zeroscaler_leader 0.0" in httpx.get(metrics, timeout=5).text
        with step("the controller half manages it, and leaves it awake past its timeout"):
            # The controller half has reconciled it (only a reconcile counts it managed), then
            # its idle timeout runs out: a leader would put it to sleep now; this one, not
            # leading, may not.
            ref = Ref(opted_ns, "op")
            awake = 'zeroscaler_managed_workloads{state="awake"} 1.0'
            wait_for(lambda: awake in httpx.get(metrics, timeout=5).text, "the standby managing it")
            idle_by = datetime.now(UTC) + timedelta(seconds=3)
            wait_for(lambda: datetime.now(UTC) > idle_by, "its idle timeout to run out")
            assert state_of(api, ref)[0] == 1
        with step("once the Lease is free it leads and puts the workload to sleep, only then"):
            # Once the Lease is free, the controller half of the same process leads: it puts the
            # workload to sleep, and only then (not at any time before it led), and wakes it.
            leases.delete_namespaced_lease(LEASE, opted_ns)
            wait_asleep(api, ref, 1)
            acquired = leases.read_namespaced_lease(LEASE, opted_ns).spec.acquire_time
            asleep_since = parse_time(state_of(api, ref)[1]["zeroscaler.io/asleep-since"])
            assert asleep_since >= acquired.replace(
                microsecond=0
            )  # the annotation is to the second
        with step("a change wakes it"):
            create_configmap(api, opted_ns, "wake-up")
            wait_woken(api, ref, f"ConfigMap {opted_ns}/wake-up created", 1)
            text = httpx.get(metrics, timeout=5).text
            assert "zeroscaler_leader 1.0" in text
            assert "zeroscaler_wakes_total 1.0" in text
        with step("each half counts its own, and one scrape carries both"):
            hooked = hook.get("/metrics").text
            assert 'zeroscaler_webhook_reviews_total{outcome="patched"}' in hooked
            assert 'zeroscaler_webhook_policy_loads_total{result="ok"} 1.0' in hooked
            # The Lease the controller half found deleted is its failed request, not the webhook's:
            # each half counts its own, though they share connections.
            lease_gone = '_api_errors_total{code="404",method="GET"}'
            assert f"zeroscaler{lease_gone}" in text
            assert f"zeroscaler_webhook{lease_gone}" not in hooked
            # One scrape of the metrics port carries the webhook half's series too, and each
            # process-wide series once: the chart's single ServiceMonitor in mode combined.
            assert 'zeroscaler_webhook_reviews_total{outcome="patched"}' in text
            assert text.count("# TYPE process_resident_memory_bytes ") == 1
            assert text.count("# TYPE zeroscaler_build_info ") == 1
    finally:
        hook.unregister(api)
        hook.stop()
        print(hook.log_tail(80))
    assert hook.proc is not None
    assert hook.proc.returncode == 0, hook.log_tail()
