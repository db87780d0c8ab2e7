"""A real controller's /metrics: a workload's own series appear while it is managed and are gone
once it is deleted; turned off, only the cluster totals are there."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.controller import (
    ControllerProcess,
    config_for,
    create_configmap,
    create_workload,
    grant_watch,
    patch_workload,
    start_controller,
    wait_asleep,
    wait_woken,
)
from testkit.steps import step
from testkit.waiting import wait_for

pytestmark = pytest.mark.cluster


def series_of(ctl: ControllerProcess, workload: str) -> dict[str, float]:
    """The samples labelled with this workload, by name (and reason, where there is one)."""
    return {
        name + (f"{{{labels['reason']}}}" if "reason" in labels else ""): value
        for (name, pairs), value in ctl.metrics().items()
        if (labels := dict(pairs)).get("workload") == workload
    }


def test_a_workloads_series_appear_while_it_is_managed_and_go_when_it_is_deleted(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("it sleeps, and its series say so"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        config = config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
        ref = create_workload(api, opted_ns, "measured", config, replicas=2, paused=True)
        opted_out = {**config, "zeroscaler.io/enabled": "false"}
        create_workload(api, opted_ns, "left-alone", opted_out, paused=True)
        wait_asleep(api, ref, 2)
        wait_for(
            lambda: series_of(controller, "measured").get("zeroscaler_workload_asleep") == 1,
            "the workload's asleep series says 1",
        )
        labels = {"namespace": opted_ns, "workload": "measured", "kind": "Deployment"}
        assert (
            controller.metrics()[
                (
                    "zeroscaler_workload_sleeps_total",
                    tuple(sorted({**labels, "reason": "idle"}.items())),
                )
            ]
            == 1
        )
    with step("a ConfigMap wakes it, and its wake is counted by reason"):
        create_configmap(api, opted_ns, "wake-up")
        wait_woken(api, ref, f"ConfigMap {opted_ns}/wake-up created", 2)
        wait_for(
            lambda: (
                series_of(controller, "measured").get("zeroscaler_workload_wakes_total{activity}")
                == 1
            ),
            "the workload's wake counted by reason",
        )
        seen = series_of(controller, "measured")
        assert seen["zeroscaler_workload_asleep"] == 0
        assert seen["zeroscaler_workload_wake_latency_seconds_count"] == 1
        assert seen["zeroscaler_workload_wake_latency_seconds_sum"] > 0
        # Asleep a few seconds at two replicas.
        assert seen["zeroscaler_workload_saved_replica_seconds_total"] > 0
        assert series_of(controller, "left-alone") == {}  # not managed: no series
    with step("asleep again, a scale-up by someone else counts as external"):
        wait_asleep(api, ref, 2)
        patch_workload(api, ref, {"spec": {"replicas": 2}})
        wait_for(
            lambda: (
                series_of(controller, "measured").get("zeroscaler_workload_wakes_total{external}")
                == 1
            ),
            "the wake by someone else counted as external",
        )
        again = series_of(controller, "measured")
        assert again["zeroscaler_workload_sleeps_total{idle}"] == 2
        assert again["zeroscaler_workload_wakes_total{activity}"] == 1
    with step("deleted, its series go and the cluster totals keep what it did"):
        k8s.AppsV1Api(api).delete_namespaced_deployment("measured", opted_ns)
        wait_for(
            lambda: series_of(controller, "measured") == {}, "the deleted workload's series gone"
        )
        # The cluster totals keep what it did (zeroscaler's own wakes: not the external one).
        assert controller.metric("zeroscaler_sleeps_total") == 2
        assert controller.metric("zeroscaler_wakes_total") == 1


def test_turned_off_the_controller_exposes_the_cluster_totals_only(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    ctl = start_controller(cluster, opted_ns, tmp_path, extra=["--no-workload-metrics"])
    try:
        with step("it sleeps"):
            grant_watch(api, opted_ns, [("", ["configmaps"])])
            config = config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
            ref = create_workload(api, opted_ns, "unmeasured", config, replicas=1, paused=True)
            wait_asleep(api, ref, 1)
        with step("the sleep is counted in the cluster totals only"):
            wait_for(lambda: ctl.metric("zeroscaler_sleeps_total") == 1, "the sleep counted")
            assert "zeroscaler_workload_" not in ctl.get("/metrics").text
            assert ctl.metric("zeroscaler_managed_workloads", state="asleep") == 1
    finally:
        ctl.stop()
        print(ctl.log_tail(80))
