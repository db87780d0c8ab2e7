"""Restarts and leader election: state lives in the cluster, and only the leader acts."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.controller import (
    ControllerProcess,
    Ref,
    config_for,
    create_configmap,
    create_workload,
    events_of,
    grant_watch,
    patch_workload,
    reasons,
    start_controller,
    state_of,
    wait_asleep,
    wait_event,
    wait_woken,
)
from testkit.steps import step
from testkit.waiting import wait_for
from zeroscaler.core.durations import parse_time

pytestmark = pytest.mark.cluster


def _settled(ctl: ControllerProcess) -> bool:
    """The restarted controller has the workload asleep and has listed its watched ConfigMaps."""
    return (
        ctl.metric("zeroscaler_managed_workloads", state="asleep") == 1
        and ctl.metric("zeroscaler_watched_types") == 1
        and ctl.events_seen("configmaps") >= 1
    )


def _sleep_under_a_killed_controller(
    cluster: Cluster, api: k8s.ApiClient, ref: Ref, workdir: Path, id: str, extra: list[str]
) -> None:
    """A controller puts `ref` to sleep and is SIGKILLed: it releases nothing."""
    ctl = start_controller(cluster, ref.namespace, workdir, id=id, extra=extra)
    try:
        wait_asleep(api, ref, 3)
    finally:
        ctl.stop(signal.SIGKILL)


def _change_settings_while_down(api: k8s.ApiClient, ref: Ref) -> None:
    """Change the watched ConfigMap `settings`, in a later second than `ref`'s sleep."""
    # Times are to the second: a change in the second of the sleep would not read as newer.
    slept = parse_time(state_of(api, ref)[1]["zeroscaler.io/asleep-since"])
    wait_for(lambda: datetime.now(UTC) >= slept + timedelta(seconds=1), "a second after the sleep")
    k8s.CoreV1Api(api).patch_namespaced_config_map(
        "settings", ref.namespace, {"data": {"changed": "while the controller was down"}}
    )


def test_restart_keeps_sleepers_asleep_and_catches_changes_made_meanwhile(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    with step("sleeps under a first controller"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        create_configmap(api, opted_ns, "settings")
        ref = create_workload(
            api, opted_ns, "restarted", config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
        )
        first = start_controller(cluster, opted_ns, tmp_path, id="first")
        try:
            wait_asleep(api, ref, 3)
        finally:
            first.stop()

    with step("a restarted controller keeps it asleep"):
        second = start_controller(cluster, opted_ns, tmp_path, id="second")
        try:
            wait_for(lambda: _settled(second), "restarted controller settled")
            # The end of its catch-up is logged (the scale row times restarts by that line).
            wait_for(
                lambda: 'msg="caught up"' in second.log.read_text(), "the catch-up's end logged"
            )
            assert second.metric("zeroscaler_activity_total") == 0
            assert state_of(api, ref)[0] == 0
            assert "Woken" not in reasons(api, ref)
        finally:
            second.stop()

    with step("a change made while no controller ran wakes it after the next start"):
        k8s.CoreV1Api(api).patch_namespaced_config_map(
            "settings", opted_ns, {"data": {"changed": "while the controller was down"}}
        )
        third = start_controller(cluster, opted_ns, tmp_path, id="third")
        try:
            # Two findings race at the relist and either may be first: the ConfigMap itself, newer
            # than the sleep, or the census of the workload's scope, whose digest moved.
            woken = wait_event(api, ref, "Woken", "changed while zeroscaler was not watching")
            assert woken.message.startswith(
                (f"ConfigMap {opted_ns}/settings changed", "ConfigMap objects changed")
            ), woken.message
            assert woken.message.endswith("scaled from 0 to 3 replicas"), woken.message
        finally:
            third.stop()


def _asleep_since_after(api: k8s.ApiClient, ref: Ref, moment: datetime) -> dict[str, str] | None:
    """`ref`'s annotations once it is asleep from a sleep at or after `moment`, else None."""
    replicas, ann = state_of(api, ref)
    since = ann.get("zeroscaler.io/asleep-since")
    if replicas == 0 and ann.get("zeroscaler.io/state") == "asleep" and since:
        return ann if parse_time(since) >= moment else None
    return None


def test_a_wake_after_a_restart_stays_awake_its_whole_timeout_from_the_wake(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    """A restarted controller sees a change seconds before it acts; the clock starts at the wake."""
    with step("a first controller puts it to sleep and is killed, keeping the Lease"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        create_configmap(api, opted_ns, "settings")
        ref = create_workload(
            api, opted_ns, "late-wake", config_for("4s", "ConfigMap", watch_namespaces=opted_ns)
        )
        # Killed, the first leader keeps the Lease: the next one (another id) waits out its 8 s.
        lease = ["--lease-duration", "8"]
        _sleep_under_a_killed_controller(cluster, api, ref, tmp_path, "first", lease)
    with step("a watched ConfigMap changes while no controller runs"):
        _change_settings_while_down(api, ref)
    second = start_controller(
        cluster, opted_ns, tmp_path, id="second", extra=lease, wait_leader=False
    )
    try:
        with step("the next leader wakes it for that change, and it sleeps again"):
            woken = wait_woken(
                api, ref, f"ConfigMap {opted_ns}/settings changed while zeroscaler was not watching"
            )
            # By its status, not its Events: the first controller's Sleeping Event may have died
            # with it.
            ann = wait_for(
                lambda: _asleep_since_after(api, ref, woken.first_timestamp), "asleep again"
            )
    finally:
        second.stop()
    with step("its idle clock started at the wake, not at the change"):
        # All three times are written to the second, the Event's just after the scale-up's answer.
        # The clock restarts at the wake, not at the change made while down (seconds before it), and
        # the pods' Ready may start it a little later still (the idle clock waits for Ready).
        woken_at = woken.first_timestamp
        last_activity = parse_time(ann["zeroscaler.io/last-activity"])
        asleep_since = parse_time(ann["zeroscaler.io/asleep-since"])
        assert last_activity >= woken_at - timedelta(seconds=1)
        assert asleep_since - last_activity >= timedelta(seconds=4)
        assert asleep_since - woken_at >= timedelta(seconds=3)


def test_only_the_leader_acts_and_a_standby_takes_over(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    with step("a leader and a standby"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        leader = start_controller(cluster, opted_ns, tmp_path, id="leader")
        standby = start_controller(cluster, opted_ns, tmp_path, id="standby", wait_leader=False)
    try:
        with step("only the leader puts a workload to sleep; the standby keeps it in memory"):
            assert leader.is_leader()
            assert not standby.is_leader()
            ref = create_workload(
                api, opted_ns, "led", config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
            )
            wait_asleep(api, ref, 3)
            wait_event(api, ref, "Sleeping")
            ours = [
                e for e in events_of(api, ref) if e.reporting_component == "zeroscaler-controller"
            ]
            assert {e.reporting_instance for e in ours} == {"leader"}
            assert standby.metric("zeroscaler_managed_workloads", state="asleep") == 1
            assert standby.metric("zeroscaler_sleeps_total") == 0

        with step("the leader killed, the standby leads and wakes it"):
            leader.stop(signal.SIGKILL)
            wait_for(standby.is_leader, "the standby leading")
            create_configmap(api, opted_ns, "after-takeover")
            woken = wait_woken(api, ref, f"ConfigMap {opted_ns}/after-takeover created", 3)
            assert woken.reporting_instance == "standby"
    finally:
        leader.stop()
        standby.stop()


LONG_LEASE = ["--lease-duration", "30"]
SOONER = 12.0  # seconds: well before a 30 s Lease could expire


def _holder(api: k8s.ApiClient, namespace: str) -> str:
    lease = k8s.CoordinationV1Api(api).read_namespaced_lease("zeroscaler-controller", namespace)
    return str(lease.spec.holder_identity or "")


def test_a_terminated_leader_hands_the_lease_to_a_standby_before_it_expires(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    leader = start_controller(cluster, opted_ns, tmp_path, id="leaving", extra=LONG_LEASE)
    standby = start_controller(
        cluster, opted_ns, tmp_path, id="staying", extra=LONG_LEASE, wait_leader=False
    )
    try:
        with step("a leader terminated hands its Lease to the standby before it expires"):
            assert not standby.is_leader()
            assert _holder(api, opted_ns) == "leaving"
            leader.stop(signal.SIGTERM)
            assert "stopped leading" in leader.log.read_text()
            wait_for(standby.is_leader, "the standby leading", timeout=SOONER)
            assert _holder(api, opted_ns) == "staying"
    finally:
        leader.stop()
        standby.stop()


def test_a_killed_controller_restarted_with_its_id_leads_and_wakes_before_its_lease_expires(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    with step("a controller is killed with the Lease, and a watched ConfigMap changes meanwhile"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        create_configmap(api, opted_ns, "settings")
        ref = create_workload(
            api, opted_ns, "same-pod", config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
        )
        _sleep_under_a_killed_controller(cluster, api, ref, tmp_path, "pod-0", LONG_LEASE)
        assert _holder(api, opted_ns) == "pod-0"  # killed: nothing released it
        _change_settings_while_down(api, ref)
    again = start_controller(
        cluster, opted_ns, tmp_path, id="pod-0", extra=LONG_LEASE, wait_leader=False
    )
    try:
        with step("restarted with its id, it leads and wakes it before the Lease expires"):
            wait_for(again.is_leader, "the restarted controller leading", timeout=SOONER)
            reason = f"ConfigMap {opted_ns}/settings changed while zeroscaler was not watching"
            wait_event(api, ref, "Woken", reason, timeout=SOONER)
    finally:
        again.stop()


def test_a_crash_between_recording_and_scaling_strands_nothing(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    """The status says asleep but the scale never happened: it is awake, and sleeps again later."""
    with step("a workload whose status says asleep at full scale, under a controller"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        half_done = {
            **config_for("3s", "ConfigMap", watch_namespaces=opted_ns),
            "zeroscaler.io/state": "asleep",
            "zeroscaler.io/restore-replicas": "3",
            "zeroscaler.io/asleep-since": "2026-01-01T00:00:00Z",
        }
        ref = create_workload(api, opted_ns, "interrupted", half_done)
        ctl = start_controller(cluster, opted_ns, tmp_path)
    try:
        with step("it is awake, and sleeps again later"):
            wait_event(api, ref, "WokenExternally", "scaled to 3 replicas by someone else")
            wait_asleep(api, ref, 3)
            assert "Woken" not in reasons(api, ref)
    finally:
        ctl.stop()


def _asleep_then_stopped(
    api: k8s.ApiClient, cluster: Cluster, ns: str, workdir: Path, name: str
) -> Ref:
    """A workload watching ConfigMaps in `ns`, put to sleep by a controller that then stops."""
    grant_watch(api, ns, [("", ["configmaps"])])
    create_configmap(api, ns, "settings")
    create_configmap(api, ns, "other")
    ref = create_workload(api, ns, name, config_for("3s", "ConfigMap", watch_namespaces=ns))
    first = start_controller(cluster, ns, workdir, id="first")
    try:
        wait_asleep(api, ref, 3)
    finally:
        first.stop()
    assert "zeroscaler.io/census" in state_of(api, ref)[1]
    return ref


@pytest.mark.parametrize("lists", [[], ["--streaming-lists"]], ids=["in pages", "streamed"])
def test_a_watched_object_deleted_while_the_controller_is_down_wakes_its_sleeper(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path, lists: list[str]
) -> None:
    ref = _asleep_then_stopped(api, cluster, opted_ns, tmp_path, "deleted-meanwhile")
    k8s.CoreV1Api(api).delete_namespaced_config_map("settings", opted_ns)
    second = start_controller(cluster, opted_ns, tmp_path, id="second", extra=lists)
    try:
        reason = "1 ConfigMap object deleted while zeroscaler was not watching (3 in scope at sleep"
        wait_event(api, ref, "Woken", reason)
    finally:
        second.stop()


def test_a_change_in_the_second_of_the_sleep_wakes_its_sleeper_after_a_restart(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    """The sleep is recorded in the second of the change, so no managedFields time is newer."""
    ref = _asleep_then_stopped(api, cluster, opted_ns, tmp_path, "same-second")
    changed = k8s.CoreV1Api(api).patch_namespaced_config_map(
        "settings", opted_ns, {"data": {"changed": "in the second of the sleep"}}
    )
    second_of_change = max(e.time for e in changed.metadata.managed_fields)
    patch_workload(
        api,
        ref,
        {
            "metadata": {
                "annotations": {
                    "zeroscaler.io/asleep-since": f"{second_of_change:%Y-%m-%dT%H:%M:%SZ}"
                }
            }
        },
    )
    second = start_controller(cluster, opted_ns, tmp_path, id="second")
    try:
        wait_event(api, ref, "Woken", "ConfigMap objects changed while zeroscaler was not watching")
        assert second.metric("zeroscaler_activity_total") == 1  # the list alone saw nothing new
    finally:
        second.stop()
