"""The fault scenarios' checker, on recorded sample sequences it once misjudged."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes import client as k8s

from chaos.invariants import (
    NothingToJudge,
    Observer,
    Sample,
    Unsettled,
    check_wakes,
    wait_settled,
)
from tests.unit.recorded import BOUND, HOLDERS, REPLICA_A, REPLICA_B, asleep, at, awake


def observed(*samples: Sample, activity: tuple[float, ...] = ()) -> Observer:
    """An observer of one workload (3 replicas, timeout 3 s) that holds recorded samples and
    never samples by itself."""
    obs = Observer(k8s.ApiClient, "ns")
    obs.expect("op-0", 3, 3.0)
    obs.workloads["op-0"].samples += samples
    for a in activity:
        obs.activity(["op-0"], at=at(a))
    return obs


def test_a_sleep_in_the_same_second_before_the_activity_is_not_rest() -> None:
    # The relist scenario: the sleep was written 0.1 s before the deletion (both in second 3),
    # the fault ended at 6.30 and the controller woke the workload at 6.34. The sample at 6.32
    # is the sleep from before the deletion, not the rest after it.
    obs = observed(awake(0.0), asleep(3.2, 3.13), asleep(6.32, 3.13), activity=(0.0, 3.235))
    obs.faults.append((at(3.24), at(6.30)))
    assert not obs.settled()
    obs.workloads["op-0"].samples += [asleep(6.36, 3.13, replicas=3), awake(6.5, 3.13)]
    assert obs.settled()
    obs.workloads["op-0"].samples.append(asleep(9.6, 9.5))  # asleep again, after the wake
    assert obs.settled()


def test_a_sample_from_before_the_activity_says_nothing_about_rest() -> None:
    obs = observed(awake(0.0), asleep(3.2, 3.1), activity=(0.0, 5.0))
    assert not obs.settled()
    obs.workloads["op-0"].samples.append(asleep(5.1, 3.1))  # still the old sleep
    assert not obs.settled()


def test_a_workload_is_seen_asleep_only_once_a_sample_shows_it() -> None:
    # Failover and webhook: acting once the workloads' own list showed them asleep, before the
    # observer did, let the wake land between two awake samples, so no wake was expected.
    obs = observed(awake(0.0), awake(2.9))
    assert not obs.seen_asleep()
    obs.workloads["op-0"].samples.append(asleep(3.3, 3.13))
    assert obs.seen_asleep()
    obs.workloads["op-0"].samples.append(asleep(3.5, 3.13, replicas=3))  # scaled up, not recorded
    assert not obs.seen_asleep()


def test_activity_after_a_seen_sleep_expects_a_wake() -> None:
    obs = observed(awake(0.0), asleep(3.3, 3.1), awake(3.6, 3.1), activity=(0.0, 3.4))
    report = check_wakes("op-0", obs.workloads["op-0"], obs.faults, BOUND)
    assert (report.wakes_expected, report.wakes_observed, report.violations) == (1, 1, [])


def test_a_wake_between_two_awake_samples_is_not_counted() -> None:
    # Why the scenarios wait for `seen_asleep`: without a sample of the sleep, nothing shows
    # that the activity found the workload asleep.
    obs = observed(awake(0.0), awake(2.9), awake(3.6, 3.1), activity=(0.0, 3.2))
    assert check_wakes("op-0", obs.workloads["op-0"], obs.faults, BOUND).wakes_expected == 0


def test_a_sleep_in_the_second_after_the_activity_is_not_rest() -> None:
    # Seen awake after the activity at 0.5, then asleep from 1.2: not the sleep the activity's
    # timeout ends in, so still owed a wake (or premature), not rest.
    obs = observed(awake(0.4), awake(0.6), asleep(1.4, 1.2), activity=(0.5,))
    assert not obs.settled()
    obs.workloads["op-0"].samples += [awake(1.8, 1.2), asleep(4.0, 3.8)]  # woken, then slept
    assert obs.settled()


def test_waiting_for_rest_fails_naming_what_did_not_settle() -> None:
    obs = observed(awake(0.0), asleep(3.3, 3.1), asleep(5.1, 3.1), activity=(0.0, 5.0))
    with pytest.raises(Unsettled, match=r"not at rest after 0s: op-0: asleep 0 restore=3 since="):
        wait_settled(obs, timeout=0)
    obs.expect("op-1", 3, 3.0)
    with pytest.raises(Unsettled, match="op-1: never sampled"):
        wait_settled(obs, timeout=0)


def test_waiting_for_rest_returns_once_all_are_at_rest() -> None:
    obs = observed(awake(0.0), asleep(3.3, 3.1), awake(5.5, 3.1), activity=(0.0, 5.0))
    wait_settled(obs, timeout=0)


def test_the_check_refuses_an_observer_that_expected_nothing(tmp_path: Path) -> None:
    obs = Observer(k8s.ApiClient, "ns")
    with pytest.raises(NothingToJudge, match="no workload was expected in ns"):
        obs.check(15.0, [])


def test_the_check_refuses_to_judge_one_writer_without_logs() -> None:
    obs = observed(awake(0.0), asleep(3.3, 3.1), awake(4.5, 3.1), activity=(0.0, 4.0))
    obs.holders += HOLDERS
    with pytest.raises(NothingToJudge, match="no controller log"):
        obs.check(15.0, [])


def test_the_trace_shows_changes_activity_faults_and_gaps(tmp_path: Path) -> None:
    obs = observed(awake(0.0), awake(0.2), asleep(3.3, 3.1), awake(6.5, 3.1), activity=(0.0, 4.0))
    obs.faults.append((at(4.1), at(6.0)))
    obs.holders += HOLDERS
    logs = [tmp_path / "controller-a.log", tmp_path / "controller-b.log"]
    for log, text in zip(logs, (REPLICA_A, REPLICA_B), strict=True):
        log.write_text(text)
    report = obs.check(15.0, logs)
    assert report.violations == []
    trace = report.trace
    assert [line.split(" ", 2)[2] for line in trace] == [
        "activity",
        "awake 3 restore=3 since=-",
        "then no sample for 3.1s",
        "asleep 0 restore=3 since=14:15:33",
        "then no sample for 3.2s",
        "activity",
        "fault",
        "recovered",
        "awake 3 restore=3 since=14:15:33",
    ]


def deployment(version: int, replicas: int, state: str) -> SimpleNamespace:
    annotations = {"zeroscaler.io/state": state, "zeroscaler.io/restore-replicas": "3"}
    meta = SimpleNamespace(name="op-0", resource_version=str(version), annotations=annotations)
    return SimpleNamespace(metadata=meta, spec=SimpleNamespace(replicas=replicas))


def test_a_copy_older_than_one_recorded_is_left_out() -> None:
    # A list answered late, after the watch delivered the wake record: its older copy would
    # read as asleep again after the wake.
    obs = observed()
    obs.record([deployment(10, 0, "asleep")])
    obs.record([deployment(12, 3, "awake")])
    obs.record([deployment(11, 3, "asleep")])
    obs.record([deployment(12, 3, "awake")])  # the same copy again: kept, a newer look at it
    assert [(s.state, s.replicas) for s in obs.workloads["op-0"].samples] == [
        ("asleep", 0),
        ("awake", 3),
        ("awake", 3),
    ]
