"""Access answered from the RBAC the controller watches, against the real API server."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.controller import (
    WIDGET,
    WIDGET_GROUP,
    ControllerProcess,
    config_for,
    create_configmap,
    create_widget,
    create_workload,
    events_of,
    grant_watch,
    start_controller,
    state_of,
    wait_asleep,
    wait_event,
    wait_woken,
)
from testkit.steps import step
from testkit.waiting import wait_for
from testkit.webhook import times_reported

pytestmark = pytest.mark.cluster
ANSWERS = "zeroscaler_access_answers_total"
ACTIVITY = "zeroscaler_activity_total"


def test_a_role_binding_grant_wakes_without_a_review_and_its_deletion_stops_the_wakes(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("both sleep, their access answered from RBAC without a review"):
        grant_watch(api, opted_ns, [(WIDGET_GROUP, ["widgets"])], name="widgets")
        grant_watch(api, opted_ns, [("", ["configmaps"])], name="configmaps")
        # Another account's workload keeps the ConfigMap watch open once the first may not use it.
        grant_watch(api, opted_ns, [("", ["configmaps"])], sa="trusted", name="trusted")
        create_widget(api, opted_ns, "w")
        ref = create_workload(
            api, opted_ns, "op", config_for("3s", f"{WIDGET}, ConfigMap", watch_namespaces=opted_ns)
        )
        trusted = create_workload(
            api,
            opted_ns,
            "trusted",
            config_for("3s", "ConfigMap", watch_namespaces=opted_ns),
            sa="trusted",
        )
        wait_asleep(api, ref, 3)
        wait_asleep(api, trusted, 3)
        assert controller.metric(ANSWERS, source="rbac") >= 2  # widgets and configmaps
        assert controller.metric(ANSWERS, default=0.0, source="review") == 0  # none asked yet
    with step("a ConfigMap the RoleBinding grants wakes it, and it sleeps again"):
        create_configmap(api, opted_ns, "probe")
        wait_woken(api, ref, f"ConfigMap {opted_ns}/probe created")
        wait_asleep(api, ref, 3)

    with step("the RoleBinding deleted, a review refuses the watch"):
        k8s.RbacAuthorizationV1Api(api).delete_namespaced_role_binding("configmaps", opted_ns)
        # The deletion alone makes it look again: RBAC no longer grants it, the review refuses.
        wait_event(api, ref, "NotPermitted", f"{opted_ns}/operator may not watch configmaps")
        assert controller.metric(ANSWERS, source="review") >= 1
    with step("a later ConfigMap no longer wakes it"):
        seen, activity = controller.events_seen("configmaps"), controller.metric(ACTIVITY)
        create_configmap(api, opted_ns, "late")
        wait_for(lambda: controller.events_seen("configmaps") > seen, "the ConfigMap event seen")
        assert controller.metric(ACTIVITY) == activity + 1  # the trusted one only
        assert state_of(api, ref)[0] == 0
        assert times_reported(events_of(api, ref), "Woken") == 1


def test_with_access_from_rbac_off_every_answer_is_a_review(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    grant_watch(api, opted_ns, [("", ["configmaps"])])
    ctl = start_controller(cluster, opted_ns, tmp_path, extra=["--no-access-from-rbac"])
    try:
        with step("it sleeps"):
            ref = create_workload(
                api, opted_ns, "op", config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
            )
            wait_asleep(api, ref, 3)

        with step("access is asked by a review, never answered from RBAC"):

            def asked() -> bool:  # none is 0 until the first review
                return ctl.metric(ANSWERS, default=0.0, source="review") >= 1

            wait_for(asked, "a SubjectAccessReview asked")
            # None: access from RBAC is off.
            assert ctl.metric(ANSWERS, default=0.0, source="rbac") == 0
        with step("a ConfigMap wakes it"):
            create_configmap(api, opted_ns, "probe")
            wait_woken(api, ref, f"ConfigMap {opted_ns}/probe created")
    finally:
        ctl.stop()
        print(ctl.log_tail(80))
