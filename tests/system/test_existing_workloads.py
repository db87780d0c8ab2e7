"""Workloads there before zeroscaler, or before their namespace opted in, managed by policy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.controller import (
    WIDGET,
    WIDGET_GROUP,
    ControllerProcess,
    create_workload,
    grant_watch,
    start_controller,
    state_of,
    wait_asleep,
    wait_event,
)
from testkit.steps import step
from testkit.waiting import wait_for
from testkit.webhook import events_for, put_policy

pytestmark = pytest.mark.cluster

IDLE = "zeroscaler.io/idle-timeout"
INJECTED = "zeroscaler.io/injected"
KINDS = "zeroscaler.io/watched-kinds"


@pytest.fixture
def controller(
    cluster: Cluster, policy_ns: str, tmp_path: Path, widgets: None
) -> Iterator[ControllerProcess]:
    ctl = start_controller(cluster, policy_ns, tmp_path, extra=["--policy-namespace", policy_ns])
    yield ctl
    ctl.stop()
    print(ctl.log_tail(80))  # shown by pytest when the test failed


def opt_in(api: k8s.ApiClient, namespace: str) -> None:
    body = {"metadata": {"labels": {"zeroscaler.io/enabled": "true"}}}
    k8s.CoreV1Api(api).patch_namespace(namespace, body)


def annotation(api: k8s.ApiClient, ref: object, key: str) -> str | None:
    return state_of(api, ref)[1].get(key)  # type: ignore[arg-type]


def wait_taken_up_to(api: k8s.ApiClient, opted_ns: str, name: str, idle: str) -> None:
    """Create a workload and wait until policy gives it `idle`: the controller takes workloads
    in the order it hears of them, so by then it has taken up every one it heard of before, with
    that policy in force. After this, what it left alone, it chose to leave alone."""
    marker = create_workload(api, opted_ns, name, {})
    wait_for(lambda: annotation(api, marker, IDLE) == idle, f"policy on the marker {name}")


def test_operators_there_before_opt_in_are_managed_and_follow_policy(
    api: k8s.ApiClient,
    cluster: Cluster,
    ns: str,
    opted_ns: str,
    policy_ns: str,
    tmp_path: Path,
    widgets: None,
) -> None:
    put_policy(api, policy_ns, "base", "defaults: {idleTimeout: 3s}")
    grant_watch(api, ns, [(WIDGET_GROUP, ["widgets"])])
    grant_watch(api, opted_ns, [(WIDGET_GROUP, ["widgets"])])
    # Both applied before zeroscaler runs and before the namespace opts in, as most are.
    plain = create_workload(api, ns, "plain", {})
    chosen = create_workload(api, ns, "chosen", {IDLE: "4s"})
    ctl = start_controller(cluster, policy_ns, tmp_path, extra=["--policy-namespace", policy_ns])
    try:
        with step("a controller runs, and the workloads there before opt-in are left alone"):
            wait_taken_up_to(api, opted_ns, "marker-before", "3s")
            assert IDLE not in state_of(api, plain)[1]  # not opted in yet: left alone
        with step(
            "once their namespace opts in, both are managed: the plain one from policy, both sleep"
        ):
            opt_in(api, ns)
            wait_asleep(api, plain, 3)
            _, ann = state_of(api, plain)
            assert ann[IDLE] == "3s"
            assert ann[KINDS] == WIDGET
            assert ann[INJECTED].split(",") == [
                IDLE,
                "zeroscaler.io/max-sleep",
                "zeroscaler.io/watch-namespaces",
                KINDS,
            ]
            wait_event(api, plain, "PolicyApplied", f"{IDLE}=3s")
            wait_asleep(api, chosen, 3)
            assert annotation(api, chosen, IDLE) == "4s"
            assert IDLE not in annotation(api, chosen, INJECTED).split(",")  # type: ignore[union-attr]

        with step("a policy edit reaches what came from policy, never what a person wrote"):
            # A policy edit reaches what came from policy, never what a person wrote.
            put_policy(api, policy_ns, "base", "defaults: {idleTimeout: 7m}")
            wait_for(lambda: annotation(api, plain, IDLE) == "7m", "plain follows the new policy")
            wait_taken_up_to(api, ns, "marker-after", "7m")  # chosen was looked at again before it
            assert annotation(api, chosen, IDLE) == "4s"

        with step("an invalid edit is refused with an Event, and the last valid policy stays"):
            # An invalid edit is refused with an Event; the last valid policy stays.
            put_policy(api, policy_ns, "base", "defaults: {idleTimeout: soon}")
            wait_for(
                lambda: any(
                    e.reason == "InvalidPolicy" and e.source.component == "zeroscaler-controller"
                    for e in events_for(api, policy_ns, "ConfigMap", "base")
                ),
                "InvalidPolicy Event from the controller",
            )
            assert annotation(api, plain, IDLE) == "7m"
    finally:
        ctl.stop()
        print(ctl.log_tail(80))


def test_an_rbac_change_infers_the_injected_kinds_again(
    api: k8s.ApiClient, opted_ns: str, policy_ns: str, controller: ControllerProcess
) -> None:
    with step("kinds are inferred from what its account may watch"):
        put_policy(api, policy_ns, "base", "defaults: {idleTimeout: 1h}")
        grant_watch(api, opted_ns, [(WIDGET_GROUP, ["widgets"])])
        ref = create_workload(api, opted_ns, "grows", {})
        wait_for(lambda: annotation(api, ref, KINDS) == WIDGET, "kinds inferred from RBAC")
    with step("an RBAC change infers them again"):
        grant_watch(api, opted_ns, [("", ["configmaps"])], name="more")
        wait_for(
            lambda: annotation(api, ref, KINDS) == f"ConfigMap,{WIDGET}",
            "kinds inferred again after the RBAC change",
        )
