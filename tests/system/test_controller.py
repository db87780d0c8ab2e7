"""The scaler controller, run as a real process against the real local control plane."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from localcluster.cluster import Cluster
from testkit.controller import (
    WIDGET,
    WIDGET_GROUP,
    WIDGETS,
    ControllerProcess,
    Ref,
    assert_not_activity,
    config_for,
    create_configmap,
    create_widget,
    create_workload,
    events_of,
    grant_watch,
    patch_workload,
    reasons,
    refusing_updates,
    start_controller,
    state_of,
    wait_asleep,
    wait_awake,
    wait_event,
    wait_woken,
)
from testkit.crds import create_crd
from testkit.operators import ibm_annotated_deployment, ibm_readme_annotate_args
from testkit.steps import step
from testkit.waiting import wait_for
from testkit.webhook import times_reported
from zeroscaler.core.annotations import LEADER_ANNOTATION, STATUS_KEYS

pytestmark = pytest.mark.cluster


def test_seed_demo_sleeps_and_wakes_to_the_previous_count(
    api: k8s.ApiClient, opted_ns: str, ns: str, controller: ControllerProcess
) -> None:
    with step("sleeps: both workloads, each with a Sleeping Event"):
        grant_watch(api, opted_ns, [("", ["configmaps"]), (WIDGET_GROUP, ["widgets"])])
        create_widget(api, opted_ns, "w1")
        config = config_for("3s", f"{WIDGET}, ConfigMap", watch_namespaces=opted_ns)
        refs = [
            create_workload(api, opted_ns, "dep-operator", config),
            create_workload(api, opted_ns, "sts-operator", config, kind="StatefulSet"),
        ]
        custom = k8s.CustomObjectsApi(api)
        core = k8s.CoreV1Api(api)
        for ref in refs:
            wait_asleep(api, ref, 3)
            wait_event(api, ref, "Sleeping", "scaled from 3 to 0 replicas")

    with step("wakes on a ConfigMap created, to its count, and sleeps again"):
        create_configmap(api, opted_ns, "trigger")
        for ref in refs:
            wait_woken(api, ref, f"ConfigMap {opted_ns}/trigger created", 3)
            wait_asleep(api, ref, 3)

    with step("wakes on a Widget changed, and sleeps again"):
        custom.patch_namespaced_custom_object(
            WIDGET_GROUP, "v1", opted_ns, "widgets", "w1", {"spec": {"size": 2}}
        )
        for ref in refs:
            wait_woken(api, ref, f"Widget {opted_ns}/w1 changed", 3)
            wait_asleep(api, ref, 3)

    with step("wakes on a ConfigMap deleted, and sleeps again"):
        core.delete_namespaced_config_map("trigger", opted_ns)
        for ref in refs:
            wait_woken(api, ref, f"ConfigMap {opted_ns}/trigger deleted", 3)
            wait_asleep(api, ref, 3)

    with step("a status change and a change outside the scope are not activity"):
        assert_not_activity(
            controller,
            WIDGETS,
            lambda: custom.patch_namespaced_custom_object_status(
                WIDGET_GROUP, "v1", opted_ns, "widgets", "w1", {"status": {"ready": True}}
            ),
        )
        # A namespace outside every scope is not watched: its change is never even received. A
        # leader lock in scope (received, never activity) comes after it on any watch that had it.
        seen = controller.events_seen("configmaps")
        create_configmap(api, ns, "outside-the-scope")
        lock = {LEADER_ANNOTATION: "{}"}
        assert_not_activity(
            controller,
            "configmaps",
            lambda: create_configmap(api, opted_ns, "lock", annotations=lock),
        )
        assert controller.events_seen("configmaps") == seen + 1
    with step("every sleep and wake is counted, in Events and metrics"):
        for ref in refs:
            assert state_of(api, ref)[0] == 0
            # Four sleeps with the same message are one Event counted four times.
            sleeping = [e for e in events_of(api, ref) if e.reason == "Sleeping"]
            assert times_reported(sleeping, "Sleeping") == 4
            assert len({e.message for e in sleeping}) == len(sleeping)
        assert controller.metric("zeroscaler_managed_workloads", state="asleep") == 2
        assert controller.metric("zeroscaler_sleeps_total") == 8
        assert controller.metric("zeroscaler_wakes_total") == 6
        assert controller.metric("zeroscaler_wake_latency_seconds_count") == 6
        assert controller.metric("zeroscaler_saved_replica_seconds_total") > 0
        # Process figures for watching memory in production; every wake succeeded.
        assert controller.metric("process_resident_memory_bytes") > 0
        assert "process_cpu_seconds_total" in {name for name, _ in controller.metrics()}
        assert controller.metric("zeroscaler_wake_failures_total") == 0
        assert controller.metric("zeroscaler_pending_wakes") == 0
        # The Events above were read from the API server: the backlog they passed through is empty.
        wait_for(lambda: controller.metric("zeroscaler_pending_events") == 0, "every Event written")


def test_one_write_wakes_every_workload_watching_it_to_its_own_count(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    # Scale writes of all of them go before any of them is recorded awake: check nothing mixes up.
    with step("eight workloads sleep, each at its own count"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        config = config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
        refs = [
            create_workload(api, opted_ns, f"fan-{i}", config, replicas=i + 1) for i in range(8)
        ]
        for i, ref in enumerate(refs):
            wait_asleep(api, ref, i + 1)
    with step("one write wakes them all, each to its own count"):
        create_configmap(api, opted_ns, "shared-trigger")
    with step("each sleeps again, woken once"):
        for i, ref in enumerate(refs):
            wait_woken(api, ref, f"ConfigMap {opted_ns}/shared-trigger created", i + 1)
        for i, ref in enumerate(refs):
            wait_asleep(api, ref, i + 1)
            assert times_reported(events_of(api, ref), "Woken") == 1
            assert "WokenExternally" not in reasons(api, ref)
        assert controller.metric("zeroscaler_wakes_total") == 8


def test_owned_object_wakes_only_through_a_controller_reference(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("a workload watching Widgets and the Secrets they own sleeps"):
        grant_watch(api, opted_ns, [("", ["secrets"]), (WIDGET_GROUP, ["widgets"])])
        owner = create_widget(api, opted_ns, "owner")
        config = config_for("3s", WIDGET, owned_kinds="Secret", watch_namespaces=opted_ns)
        ref = create_workload(api, opted_ns, "owning-operator", config)
        wait_asleep(api, ref, 3)
        core = k8s.CoreV1Api(api)

    def secret(name: str, controller_ref: bool | None) -> None:
        meta: dict[str, object] = {"name": name}
        if controller_ref is not None:
            meta["ownerReferences"] = [
                {
                    "apiVersion": f"{WIDGET_GROUP}/v1",
                    "kind": "Widget",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                    "controller": controller_ref,
                }
            ]
        core.create_namespaced_secret(opted_ns, {"metadata": meta, "stringData": {"k": "v"}})

    with step("a Secret without an owner, or owned but not controlled, is not activity"):
        assert_not_activity(controller, "secrets", lambda: secret("unrelated", None))
        assert_not_activity(controller, "secrets", lambda: secret("not-controlled", False))
    with step("a Secret a Widget controls wakes it"):
        secret("owned", True)
        wait_woken(api, ref, f"Secret {opted_ns}/owned (controlled by a Widget) created", 3)


def test_renewing_a_leader_lock_does_not_keep_an_operator_awake(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    grant_watch(api, opted_ns, [("coordination.k8s.io", ["leases"]), ("", ["configmaps"])])
    coordination = k8s.CoordinationV1Api(api)
    core = k8s.CoreV1Api(api)
    coordination.create_namespaced_lease(
        opted_ns, {"metadata": {"name": "operator-lock"}, "spec": {"holderIdentity": "op-0"}}
    )
    create_configmap(
        api,
        opted_ns,
        "operator-lock",
        annotations={"control-plane.alpha.kubernetes.io/leader": "{}"},
    )
    stop = threading.Event()
    renewals = [0]

    def renew() -> None:
        while not stop.wait(0.3):
            now = datetime.now(UTC)
            coordination.patch_namespaced_lease(
                "operator-lock", opted_ns, {"spec": {"renewTime": now.isoformat()}}
            )
            record = f'{{"holderIdentity":"op-0","renewTime":"{now.isoformat()}"}}'
            core.patch_namespaced_config_map(
                "operator-lock",
                opted_ns,
                {"metadata": {"annotations": {"control-plane.alpha.kubernetes.io/leader": record}}},
            )
            renewals[0] += 1

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        with step("a workload watching a renewed Lease and a leader-election ConfigMap sleeps"):
            config = config_for(
                "3s", "Lease.coordination.k8s.io, ConfigMap", watch_namespaces=opted_ns
            )
            ref = create_workload(api, opted_ns, "lock-renewing-operator", config)
            wait_asleep(api, ref, 3)
        with step("the renewals were received, and none was activity"):
            assert renewals[0] > 5
            assert controller.events_seen("leases.coordination.k8s.io") > 5
            assert controller.metric("zeroscaler_activity_total") == 0
    finally:
        stop.set()
        renewer.join()


def test_ibm_annotated_manifests_work_unchanged(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, controller: ControllerProcess
) -> None:
    with step(
        "an IBM-annotated StatefulSet and Deployment, annotated by the README's kubectl command"
    ):
        create_crd(api, "istio.banzaicloud.io", "Istio", "istios", version_name="v1beta1")
        grant_watch(
            api, opted_ns, [("istio.banzaicloud.io", ["istios"]), ("apps", ["deployments"])]
        )
        grant_watch(api, opted_ns, [("apps", ["deployments"])], sa="default", name="default-watch")
        sts = create_workload(api, opted_ns, "istio-operator", {}, kind="StatefulSet", replicas=2)
        patch_workload(api, sts, {"metadata": {"labels": {"controller-tools.k8s.io": "1.0"}}})
        cluster.kubectl(*ibm_readme_annotate_args(opted_ns))
        manifest = ibm_annotated_deployment(opted_ns)
        k8s.AppsV1Api(api).create_namespaced_deployment(opted_ns, manifest)

    with step("the StatefulSet sleeps, and an Istio created wakes it"):
        wait_asleep(api, sts, 2)
        k8s.CustomObjectsApi(api).create_namespaced_custom_object(
            "istio.banzaicloud.io",
            "v1beta1",
            opted_ns,
            "istios",
            {
                "apiVersion": "istio.banzaicloud.io/v1beta1",
                "kind": "Istio",
                "metadata": {"name": "i"},
            },
        )
        wait_woken(api, sts, f"Istio {opted_ns}/i created", 2)
    with step("the Deployment is managed too"):
        # The 60s example is managed too (shown by `zeroscaler status`, counted as awake).
        wait_for(
            lambda: controller.metric("zeroscaler_managed_workloads", state="awake") == 2,
            "both IBM-annotated workloads managed",
        )
    with step("status shows both as the controller sees them"):
        status = subprocess.run(
            [
                str(Path(sys.executable).parent / "zeroscaler"),
                "status",
                "--kubeconfig",
                str(cluster.kubeconfig),
                "-n",
                opted_ns,
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        shown = {item["name"]: item for item in json.loads(status)["items"]}
        mine = shown["mycontroller"]
        assert (mine["kind"], mine["state"], mine["replicas"], mine["restore"]) == (
            "Deployment",
            "awake",
            2,
            None,
        )
        assert mine["watched"] == ["Deployment.v1.apps"]
        assert shown["istio-operator"]["lastWakeReason"] == f"Istio {opted_ns}/i created"


def test_a_crd_installed_after_the_workload_is_picked_up(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("its kind is not served yet: said in Events, and it is kept awake"):
        group = f"{opted_ns}.example.com"
        grant_watch(api, opted_ns, [(group, ["gadgets"])])
        ref = create_workload(api, opted_ns, "early-operator", config_for("3s", f"Gadget.{group}"))
        wait_event(api, ref, "UnknownKind", f"Gadget.{group} is not served")
        wait_event(api, ref, "NoKindToWakeOn")
        assert state_of(api, ref)[0] == 3
    try:
        with step("once the CRD is installed, it sleeps"):
            create_crd(api, group, "Gadget", "gadgets")
            wait_asleep(api, ref, 3)
        with step("a Gadget created wakes it"):
            k8s.CustomObjectsApi(api).create_namespaced_custom_object(
                group,
                "v1",
                opted_ns,
                "gadgets",
                {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g"}},
            )
            wait_woken(api, ref, f"Gadget {opted_ns}/g created", 3)
    finally:
        k8s.ApiextensionsV1Api(api).delete_custom_resource_definition(f"gadgets.{group}")


def test_removing_annotations_or_the_namespace_label_stops_management(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("its annotations removed, a sleeper is woken and its watch cancelled"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        config = config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
        first = create_workload(api, opted_ns, "first", config)
        wait_asleep(api, first, 3)
        assert controller.metric("zeroscaler_watched_types") == 1
        patch_workload(api, first, {"metadata": {"annotations": dict.fromkeys(config)}})
        wait_awake(api, first, 3)
        wait_event(api, first, "Woken", "no longer managed")
        wait_for(lambda: controller.metric("zeroscaler_watched_types") == 0, "watch cancelled")

    with step("opted out by an annotation, a sleeper is woken, its status removed"):
        opted_out = create_workload(api, opted_ns, "opted-out", config)
        wait_asleep(api, opted_out, 3)
        patch_workload(
            api, opted_out, {"metadata": {"annotations": {"zeroscaler.io/enabled": "false"}}}
        )
        wait_released(api, opted_out, 3)
        wait_event(api, opted_out, "Woken", 'opted out (zeroscaler.io/enabled: "false")')
        wait_for(lambda: controller.metric("zeroscaler_watched_types") == 0, "watch cancelled")

    with step(
        "its namespace opted out, a sleeper is woken, its status removed and its configuration kept"
    ):
        second = create_workload(api, opted_ns, "second", config)
        wait_asleep(api, second, 3)
        assert controller.metric("zeroscaler_watched_types") == 1
        k8s.CoreV1Api(api).patch_namespace(
            opted_ns, {"metadata": {"labels": {"zeroscaler.io/enabled": None}}}
        )
        wait_released(api, second, 3)
        wait_event(api, second, "Woken", f"namespace {opted_ns} not opted in")
        wait_for(lambda: controller.metric("zeroscaler_watched_types") == 0, "watch cancelled")
        assert controller.metric("zeroscaler_managed_workloads", state="asleep") == 0
        # Its configuration is the user's (or the webhook's): only the status went.
        assert set(config) <= set(state_of(api, second)[1])


def wait_released(api: k8s.ApiClient, ref: Ref, replicas: int) -> None:
    """Awake at `replicas`, with none of the controller's status annotations left."""

    def released() -> bool:
        count, ann = state_of(api, ref)
        return count == replicas and not set(STATUS_KEYS) & set(ann)

    wait_for(released, f"{ref.name} awake at {replicas} without zeroscaler status annotations")


def test_a_tenant_is_never_woken_by_a_kind_its_account_cannot_watch(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("a tenant whose account may not watch ConfigMaps is told so; both sleep"):
        grant_watch(api, opted_ns, [(WIDGET_GROUP, ["widgets"])], sa="tenant", name="tenant")
        grant_watch(api, opted_ns, [("", ["configmaps"])], sa="trusted", name="trusted")
        create_widget(api, opted_ns, "w")
        tenant = create_workload(
            api,
            opted_ns,
            "tenant-operator",
            config_for("3s", f"{WIDGET}, ConfigMap", watch_namespaces=opted_ns),
            sa="tenant",
        )
        trusted = create_workload(
            api,
            opted_ns,
            "trusted-operator",
            config_for("3s", "ConfigMap", watch_namespaces=opted_ns),
            sa="trusted",
        )
        wait_event(api, tenant, "NotPermitted", f"{opted_ns}/tenant may not watch configmaps")
        wait_asleep(api, tenant, 3)
        wait_asleep(api, trusted, 3)
    with step("a ConfigMap created wakes the trusted one alone"):
        seen, activity = (
            controller.events_seen("configmaps"),
            controller.metric("zeroscaler_activity_total"),
        )
        create_configmap(api, opted_ns, "probe")
        wait_for(lambda: controller.events_seen("configmaps") > seen, "the ConfigMap event seen")
        assert (
            controller.metric("zeroscaler_activity_total") == activity + 1
        )  # the trusted one only
        wait_woken(api, trusted, f"ConfigMap {opted_ns}/probe created")
        assert state_of(api, tenant)[0] == 0
        assert "Woken" not in reasons(api, tenant)


def test_malformed_annotations_give_events_and_no_crash(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("four workloads with malformed annotations, and a good one"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        scope = {"zeroscaler.io/watch-namespaces": opted_ns}
        bad_duration = create_workload(
            api,
            opted_ns,
            "bad-duration",
            {**config_for("ten minutes", "ConfigMap"), **scope},
        )
        unknown = create_workload(
            api,
            opted_ns,
            "unknown-kind",
            {**config_for("3s", "Nonexistent.nowhere.example"), **scope},
        )
        negative = create_workload(
            api,
            opted_ns,
            "negative",
            {**config_for("3s", "ConfigMap", wake_replicas="-2"), **scope},
        )
        huge = create_workload(
            api, opted_ns, "huge", {**config_for("3s", "ConfigMap," + "x" * 100_000), **scope}
        )
        good = create_workload(api, opted_ns, "good", {**config_for("3s", "ConfigMap"), **scope})

    with step("each malformed annotation is said in an Event"):
        wait_event(
            api, bad_duration, "InvalidAnnotation", "zeroscaler.io/idle-timeout: 'ten minutes'"
        )
        wait_event(api, unknown, "UnknownKind", "Nonexistent.nowhere.example is not served")
        wait_event(api, negative, "InvalidAnnotation", "zeroscaler.io/wake-replicas: '-2'")
        event = wait_event(api, huge, "InvalidAnnotation", "zeroscaler.io/watched-kinds")
        assert len(event.message) <= 1024
    with step(
        "the good one and the bad wake count's sleep and wake; the rest are left as they are"
    ):
        wait_asleep(api, good, 3)
        wait_asleep(api, negative, 3)  # the bad wake-replicas is ignored, not fatal
        create_configmap(api, opted_ns, "wake-up")
        wait_woken(api, negative, f"ConfigMap {opted_ns}/wake-up created")  # 3, not -2
        wait_woken(api, good, f"ConfigMap {opted_ns}/wake-up created")
        for ref in (bad_duration, unknown, huge):
            assert state_of(api, ref)[0] == 3
        assert controller.alive()


def test_a_workload_targeted_by_an_hpa_never_sleeps(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("a workload an HPA targets, and a plain one"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        config = config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
        k8s.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler(
            opted_ns,
            {
                "metadata": {"name": "scaled"},
                "spec": {
                    "scaleTargetRef": {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "scaled",
                    },
                    "minReplicas": 1,
                    "maxReplicas": 5,
                },
            },
        )
        scaled = create_workload(api, opted_ns, "scaled", config)
        plain = create_workload(api, opted_ns, "plain", config)
    with step("the HPA's is said and kept awake, while the plain one sleeps"):
        wait_event(api, scaled, "HPATargeted", "HorizontalPodAutoscaler scaled")
        wait_asleep(api, plain, 3)
        replicas, ann = state_of(api, scaled)
        assert replicas > 0
        assert "zeroscaler.io/state" not in ann


def test_dry_run_changes_nothing(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path, widgets: None
) -> None:
    ctl = start_controller(cluster, opted_ns, tmp_path, extra=["--dry-run"])
    try:
        with step("a workload under a controller in dry run"):
            grant_watch(api, opted_ns, [("", ["configmaps"])])
            ref = create_workload(
                api, opted_ns, "dry", config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
            )
        with step("it is told what would happen, and nothing changes"):
            wait_event(api, ref, "WouldSleep", "would sleep")
            create_configmap(api, opted_ns, "poke")
            wait_event(api, ref, "WouldWake", f"ConfigMap {opted_ns}/poke created")
            replicas, ann = state_of(api, ref)
            assert replicas == 3
            assert "zeroscaler.io/state" not in ann
            assert ctl.metric("zeroscaler_sleeps_total") == 0
    finally:
        ctl.stop()


def test_kinds_are_inferred_from_rbac_when_none_are_annotated(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("kinds are inferred from what its account may watch, and it sleeps"):
        grant_watch(api, opted_ns, [(WIDGET_GROUP, ["widgets"])])
        ref = create_workload(api, opted_ns, "unannotated", {"zeroscaler.io/idle-timeout": "3s"})
        wait_event(api, ref, "KindsInferred", f"watched {WIDGET}")
        wait_asleep(api, ref, 3)
    with step("a Widget created wakes it"):
        create_widget(api, opted_ns, "inferred")
        wait_woken(api, ref, f"Widget {opted_ns}/inferred created", 3)


def test_rbac_resource_names_limit_what_wakes_an_inferred_workload(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("its account may watch one ConfigMap by name: that kind is inferred, and it sleeps"):
        core = k8s.CoreV1Api(api)
        rbac = k8s.RbacAuthorizationV1Api(api)
        core.create_namespaced_service_account(opted_ns, {"metadata": {"name": "operator"}})
        create_configmap(api, opted_ns, "operator-config")
        rule = {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["operator-config"],
            "verbs": ["get", "list", "watch"],
        }
        rbac.create_namespaced_role(opted_ns, {"metadata": {"name": "named"}, "rules": [rule]})
        rbac.create_namespaced_role_binding(
            opted_ns,
            {
                "metadata": {"name": "named"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "named",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": opted_ns}],
            },
        )
        ref = create_workload(api, opted_ns, "named-operator", {"zeroscaler.io/idle-timeout": "3s"})
        wait_event(api, ref, "KindsInferred", "watched ConfigMap")
        wait_asleep(api, ref, 3)
    with step("another ConfigMap is not activity"):
        assert_not_activity(
            controller, "configmaps", lambda: create_configmap(api, opted_ns, "not-its-own")
        )
    with step("the one it may watch wakes it"):
        core.patch_namespaced_config_map("operator-config", opted_ns, {"data": {"k": "changed"}})
        wait_woken(api, ref, f"ConfigMap {opted_ns}/operator-config changed")


def test_a_paused_workload_is_held_as_it_is(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("paused, it is held awake while the sentinel sleeps"):
        grant_watch(api, opted_ns, [(WIDGET_GROUP, ["widgets"])])
        config = config_for("3s", WIDGET, watch_namespaces=opted_ns)
        held = create_workload(api, opted_ns, "held", {**config, "zeroscaler.io/paused": "true"})
        # The same settings without the pause: what happens to it shows what the pause held back.
        sentinel = create_workload(api, opted_ns, "sentinel", config)
        wait_event(api, held, "Paused", "held at 3 replicas")
        wait_asleep(api, sentinel, 3)
        assert state_of(api, held)[0] == 3  # idle longer than the sentinel, yet not put to sleep

    with step("resumed, it sleeps; paused again, it is held asleep"):
        patch_workload(api, held, {"metadata": {"annotations": {"zeroscaler.io/paused": None}}})
        wait_asleep(api, held, 3)
        patch_workload(api, held, {"metadata": {"annotations": {"zeroscaler.io/paused": "true"}}})
        wait_for(lambda: times_reported(events_of(api, held), "Paused") == 2, "paused again")
        create_widget(api, opted_ns, "while-held")
        wait_woken(api, sentinel, f"Widget {opted_ns}/while-held created")
        wait_asleep(api, sentinel, 3)
    with step("leaving the opt-in releases the sentinel, not the paused one"):
        # Leaving the opt-in hands the sentinel back; the paused one stays at zero.
        k8s.CoreV1Api(api).patch_namespace(
            opted_ns, {"metadata": {"labels": {"zeroscaler.io/enabled": None}}}
        )
        wait_released(api, sentinel, 3)
        replicas, ann = state_of(api, held)
        assert (replicas, ann["zeroscaler.io/state"]) == (0, "asleep")
        assert "Woken" not in reasons(api, held)


def test_a_refused_wake_is_counted_pending_and_retried(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    """The API server refuses the scale-up (an admission policy here): the wake failure, the
    failed write and the API error are counted, the workload shows as pending, and once the
    refusal goes the retry wakes it."""
    with step("asleep, its scale-up refused: the failure counted, the wake pending"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        # A Scale at zero replicas leaves the field out: sleeping stays allowed.
        allowed = "!has(object.spec.replicas) || object.spec.replicas == 0"
        with refusing_updates(
            api,
            opted_ns,
            f"no-scale-up-{opted_ns}",
            "deployments/scale",
            allowed,
            "no scale-ups here",
        ):
            ref = create_workload(api, opted_ns, "refused", config_for("2s", "ConfigMap"))
            wait_asleep(api, ref, 3)

            def refused() -> bool:
                return controller.metric("zeroscaler_wake_failures_total") > 0

            # A policy takes a moment to reach the API server's admission chain: touch until
            # refused.
            def touched_and_refused() -> bool:
                create_configmap(api, opted_ns, f"poke-{secrets.token_hex(2)}")
                return wait_for_quietly(refused)

            wait_for(touched_and_refused, "the scale-up to be refused and counted")
            assert controller.metric("zeroscaler_pending_wakes") == 1
            assert state_of(api, ref)[0] == 0
            failed = controller.metrics()
            assert any(
                name == "zeroscaler_failed_writes_total"
                and dict(labels)["write"] == "scale"
                and v > 0
                for (name, labels), v in failed.items()
            ), failed
            assert any(
                name == "zeroscaler_api_errors_total"
                and dict(labels)["method"] == "PATCH"
                and v > 0
                for (name, labels), v in failed.items()
            ), failed
    with step("once the refusal goes, the retry wakes it"):
        wait_awake(api, ref, 3)
        wait_for(lambda: controller.metric("zeroscaler_pending_wakes") == 0, "nothing pending")


def wait_for_quietly(check: Callable[[], bool], timeout: float = 3.0) -> bool:
    """`check` within `timeout` seconds, without failing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_a_wake_whose_record_fails_is_recorded_again_not_read_as_someone_elses(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    """The scale-up lands but the API server refuses the annotation patch that records it (an
    admission policy here): the controller keeps the wake as its own and records it once the
    refusal goes, with no WokenExternally Event and at the restore count."""
    with step("a workload sleeps"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        ref = create_workload(api, opted_ns, "unrecorded", config_for("2s", "ConfigMap"))
        wait_asleep(api, ref, 3)
    state = "object.metadata.annotations['zeroscaler.io/state']"
    old_state = "oldObject.metadata.annotations['zeroscaler.io/state']"
    allowed = f"!({old_state} == 'asleep' && {state} == 'awake')"
    apps = k8s.AppsV1Api(api)
    record = {"metadata": {"annotations": {"zeroscaler.io/state": "awake"}}}

    def in_force() -> bool:  # a policy takes a moment to reach the admission chain
        try:
            apps.patch_namespaced_deployment(ref.name, opted_ns, record, dry_run="All")
        except ApiException as e:
            return e.status in (403, 422)
        return False

    # Not deployments/scale: the wake itself passes.
    name = f"no-wake-record-{opted_ns}"
    with refusing_updates(api, opted_ns, name, "deployments", allowed, "no wake records here"):
        with step("a policy refuses the record of a wake, not the wake itself"):
            wait_for(in_force, "the policy refusing a wake's record")

        with step("a change wakes it, its record refused: counted, and it reads as asleep"):

            def record_refused() -> bool:
                return any(
                    metric == "zeroscaler_failed_writes_total"
                    and dict(labels)["write"] == "annotations"
                    and v > 0
                    for (metric, labels), v in controller.metrics().items()
                )

            create_configmap(api, opted_ns, "poke")
            wait_for(record_refused, "the wake's record to be refused")
            replicas, ann = state_of(api, ref)
            assert (replicas, ann["zeroscaler.io/state"]) == (3, "asleep")
    with step("once the refusal goes, the wake is recorded as the controller's own"):
        wait_awake(api, ref, 3)
        wait_woken(api, ref, f"ConfigMap {opted_ns}/poke created", 3)
        assert "WokenExternally" not in reasons(api, ref)
        assert "woken externally" not in controller.log.read_text()
        assert controller.metric("zeroscaler_wakes_total") == 1
