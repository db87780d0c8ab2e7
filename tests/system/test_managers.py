"""The managers above a workload, played against the real API server: OLM's reinstall (a full
update of the Deployment from its CSV, zeroscaler's annotations dropped) while asleep, and
OpenShift's release manifests, which are never put to sleep."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from testkit.controller import (
    ControllerProcess,
    Ref,
    config_for,
    create_configmap,
    create_workload,
    grant_watch,
    read_workload,
    reasons,
    state_of,
    wait_asleep,
    wait_event,
    workload_body,
)
from testkit.steps import step
from testkit.waiting import wait_for
from zeroscaler.core.durations import parse_time

pytestmark = pytest.mark.cluster

OLM_LABELS = {"olm.owner.kind": "ClusterServiceVersion", "olm.owner": "op.v1.2.0"}
CSV_ANNOTATIONS = {"olm.operatorGroup": "global-operators", "olm.targetNamespaces": ""}
STATE, RESTORE = "zeroscaler.io/state", "zeroscaler.io/restore-replicas"


def csv_deployment(ns: str, name: str, replicas: int) -> dict[str, Any]:
    """The Deployment as OLM builds it from the CSV: its labels and annotations, the operator's
    own zeroscaler settings (the CSV's author wrote them), no status of zeroscaler's."""
    config = config_for("3s", "ConfigMap", watch_namespaces=ns)
    body = workload_body(name, "Deployment", replicas, {**config, **CSV_ANNOTATIONS}, "operator",
                         paused=True)  # fmt: skip
    body["metadata"]["labels"] = dict(OLM_LABELS)
    return body


def reinstall(api: k8s.ApiClient, ref: Ref, replicas: int) -> None:
    """OLM's reinstall: a full Update of the Deployment from the CSV, as field manager olm."""
    body = csv_deployment(ref.namespace, ref.name, replicas)
    body["metadata"]["resourceVersion"] = read_workload(api, ref).metadata.resource_version
    k8s.AppsV1Api(api).replace_namespaced_deployment(
        ref.name, ref.namespace, body, field_manager="olm"
    )


def install(api: k8s.ApiClient, ns: str, name: str, replicas: int) -> Ref:
    k8s.AppsV1Api(api).create_namespaced_deployment(
        ns, csv_deployment(ns, name, replicas), field_manager="olm"
    )
    return Ref(ns, name)


def test_an_olm_reinstall_while_asleep_is_a_wake_that_keeps_the_count_to_restore(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("installed by OLM, it sleeps"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        ref = install(api, opted_ns, "csv-op", 2)
        wait_asleep(api, ref, 2)
    with step("an OLM reinstall wakes it, keeping the count to restore"):
        # An upgrade of the CSV: OLM writes the whole Deployment again with the CSV's replicas.
        reinstall(api, ref, 1)
        event = wait_event(api, ref, "WokenExternally", "written back (restore-replicas 2)")
        assert "OLM (ClusterServiceVersion op.v1.2.0), field manager olm" in event.message
        replicas, annotations = state_of(api, ref)
        assert replicas == 1
        assert annotations[STATE] == "awake"
        assert annotations[RESTORE] == "2"  # the count to restore, intact
        woken_at = parse_time(annotations["zeroscaler.io/last-activity"])
    with step("it runs a whole idle timeout, then sleeps again"):
        # It runs its new version a whole idle timeout before it sleeps again, then wakes on change.
        wait_asleep(api, ref, 1)
        asleep_since = parse_time(state_of(api, ref)[1]["zeroscaler.io/asleep-since"])
        assert (asleep_since - woken_at).total_seconds() >= 3
        assert "Flapping" not in reasons(api, ref)
    with step("a change wakes it"):
        create_configmap(api, opted_ns, "settings")
        wait_event(api, ref, "Woken", f"ConfigMap {opted_ns}/settings created")


def test_a_full_update_at_zero_writes_the_status_back_and_it_sleeps_on(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("installed by OLM, it sleeps"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        ref = install(api, opted_ns, "csv-zero", 2)
        wait_asleep(api, ref, 2)
    with step("a full update at zero drops its status, which is written back, and it sleeps on"):
        reinstall(api, ref, 0)  # a manager that keeps the live count, and drops our annotations
        wait_event(api, ref, "StatusRestored", "removed by an update")
        wait_asleep(api, ref, 2)  # asleep, with the count to restore written back
    with step("a change wakes it to the count kept"):
        create_configmap(api, opted_ns, "settings")
        wait_event(api, ref, "Woken", "scaled from 0 to 2 replicas")


def test_the_cluster_version_operators_manifests_are_never_put_to_sleep(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("a workload of the cluster's release is said to be managed above"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        release = {"include.release.openshift.io/self-managed-high-availability": "true"}
        config = config_for("2s", "ConfigMap", watch_namespaces=opted_ns)
        cvo = create_workload(api, opted_ns, "console-operator", {**config, **release}, paused=True)
        event = wait_event(api, cvo, "ManagedAbove", "cluster-version operator")
        assert event.type == "Warning"
    with step("a witness with the same timeout sleeps, it does not"):
        # A witness with the same timeout, made now, falls asleep; the release's workload does not.
        witness = create_workload(api, opted_ns, "witness", config, paused=True)
        wait_asleep(api, witness, 3)
        replicas, annotations = state_of(api, cvo)
        assert replicas == 3
        assert annotations.get(STATE) != "asleep"
        assert "Sleeping" not in reasons(api, cvo)
        wait_for(lambda: "Sleeping" in reasons(api, witness), "the witness's Sleeping Event")
