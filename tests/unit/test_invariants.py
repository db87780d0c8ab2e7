"""The fault scenarios' checker, on recorded sample sequences it once misjudged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from kubernetes import client as k8s

from tests.support.invariants import Observer, Sample

T0 = datetime(2026, 12, 1, 14, 15, 30, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def second(seconds: float) -> datetime:
    """A time as the controller writes it: to the second."""
    return at(seconds).replace(microsecond=0)


def asleep(when: float, since: float, replicas: int = 0) -> Sample:
    return Sample(at(when), replicas, "asleep", "3", second(since))


def awake(when: float, since: float | None = None) -> Sample:
    return Sample(at(when), 3, "awake", "3", None if since is None else second(since))


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
    report = obs.check(bound=15.0)
    assert (report.wakes_expected, report.wakes_observed, report.violations) == (1, 1, [])


def test_a_sleep_too_soon_after_activity_is_premature() -> None:
    obs = observed(awake(0.0), asleep(2.8, 2.5), activity=(0.5,))
    assert obs.check(bound=15.0).violations == [
        "op-0: asleep since 14:15:32, 1.5s after activity (timeout 3s)"
    ]


def test_a_sleep_counts_from_when_its_activity_was_sent() -> None:
    # The soak at 1,000 workloads: the create was answered 0.8 s after it was sent, and the
    # controller had seen the object's watch event before that answer. Its sleep came 3 s after
    # the event, but reads as 1.2 s after the answer.
    obs = observed(awake(0.0), asleep(2.6, 2.1))
    obs.activity(["op-0"], at=at(0.8), began=at(0.0))
    assert obs.check(bound=15.0).violations == []
    obs = observed(awake(0.0), asleep(2.6, 2.1))
    obs.activity(["op-0"], at=at(0.8), began=at(0.2))  # sent 1.8 s before the sleep: too soon
    assert len(obs.check(bound=15.0).violations) == 1


def test_a_wake_between_two_awake_samples_is_not_counted() -> None:
    # Why the scenarios wait for `seen_asleep`: without a sample of the sleep, nothing shows
    # that the activity found the workload asleep.
    obs = observed(awake(0.0), awake(2.9), awake(3.6, 3.1), activity=(0.0, 3.2))
    assert obs.check(bound=15.0).wakes_expected == 0


def test_the_trace_shows_changes_activity_faults_and_gaps() -> None:
    obs = observed(awake(0.0), awake(0.2), asleep(3.3, 3.1), awake(6.5, 3.1), activity=(0.0, 4.0))
    obs.faults.append((at(4.1), at(6.0)))
    trace = obs.check(bound=15.0).trace
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
