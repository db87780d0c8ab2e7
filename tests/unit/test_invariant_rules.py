"""Each of the fault checker's promises on recorded sample sequences: it fires on a bad one, is
quiet on a good one, and refuses to judge nothing."""

from __future__ import annotations

import pytest

from chaos.invariants import (
    NothingToJudge,
    WorkloadRecord,
    check_premature,
    check_restore,
    check_wakes,
)
from tests.unit.recorded import BOUND, asleep, at, awake, record

# Promise 1: awake after activity.


def test_an_activity_that_finds_a_sleeper_and_never_wakes_it_fires() -> None:
    w = record(awake(0.0), asleep(3.3, 3.1), asleep(5.0, 3.1), asleep(25.0, 3.1), activity=(4.0,))
    report = check_wakes("op-0", w, [], BOUND)
    assert (report.wakes_expected, report.wakes_observed) == (1, 0)
    assert report.violations == [
        "op-0: activity at 14:15:34.000000 not woken within 15s of 14:15:34.000000: "
        "still asleep at 14:15:55.000000 since 14:15:33"
    ]


def test_a_wake_later_than_the_bound_fires() -> None:
    w = record(awake(0.0), asleep(3.3, 3.1), asleep(18.0, 3.1), awake(19.5, 3.1), activity=(4.0,))
    report = check_wakes("op-0", w, [], BOUND)
    assert (report.wakes_expected, report.wakes_observed) == (1, 0)
    assert report.violations == [
        "op-0: activity at 14:15:34.000000 not woken within 15s of 14:15:34.000000"
    ]


def test_a_sleep_in_the_second_after_an_activity_that_stays_asleep_fires() -> None:
    # Seen awake just after the activity at 0.5, asleep from 1.2 (written as second 1) for good:
    # too soon to be premature by the second-precision rule, too late to have found it asleep.
    w = record(awake(0.4), awake(0.6), asleep(1.4, 1.2), asleep(20.0, 1.2), activity=(0.5,))
    report = check_wakes("op-0", w, [], BOUND)
    assert report.wakes_expected == 0
    assert report.violations == [
        "op-0: activity at 14:15:30.500000 not woken within 15s of 14:15:30.500000: "
        "still asleep at 14:15:50.000000 since 14:15:31"
    ]
    assert check_premature("op-0", w) == []  # why the wake check must catch it


def test_a_sleep_written_in_the_activitys_own_second_that_stays_asleep_fires() -> None:
    # Written at 0.9 as second 0, before the activity at 0.5 by its stamp, after it in truth.
    w = record(awake(0.4), awake(0.6), asleep(1.0, 0.9), asleep(20.0, 0.9), activity=(0.5,))
    assert len(check_wakes("op-0", w, [], BOUND).violations) == 1


def test_a_woken_sleeper_that_sleeps_again_after_its_timeout_is_quiet() -> None:
    w = record(
        awake(0.0),
        asleep(3.3, 3.1),
        awake(4.6, 3.1),
        asleep(7.8, 7.6),
        asleep(25.0, 7.6),
        activity=(4.0,),
    )
    report = check_wakes("op-0", w, [], BOUND)
    assert (report.wakes_expected, report.wakes_observed, report.violations) == (1, 1, [])
    assert report.worst_delay == pytest.approx(0.6)


def test_a_sleep_a_full_timeout_after_a_late_answered_activity_is_quiet() -> None:
    # The soak on a loaded machine: a create sent at 0.95 and answered at 1.9; the controller saw
    # its event at once and slept 3 s later, at 3.96, written as second 3: 2.05 s after sending.
    w = record(
        awake(0.5), awake(2.0), asleep(4.1, 3.96), asleep(20.0, 3.96), activity=((0.95, 1.9),)
    )
    assert check_wakes("op-0", w, [], BOUND).violations == []
    assert check_premature("op-0", w) == []


def test_activity_during_a_fault_counts_from_the_recovery() -> None:
    w = record(awake(0.0), asleep(3.3, 3.1), asleep(30.0, 3.1), awake(31.0, 3.1), activity=(5.0,))
    faults = [(at(4.5), at(20.0))]
    report = check_wakes("op-0", w, faults, BOUND)
    assert (report.wakes_expected, report.wakes_observed, report.violations) == (1, 1, [])
    assert check_wakes("op-0", w, [], BOUND).violations != []  # without the fault: late


def test_the_wake_check_refuses_a_workload_without_activity_or_samples() -> None:
    with pytest.raises(NothingToJudge, match="op-0: no activity"):
        check_wakes("op-0", record(awake(0.0), asleep(3.3, 3.1)), [], BOUND)
    with pytest.raises(NothingToJudge, match="op-0: never sampled"):
        check_wakes("op-0", record(activity=(1.0,)), [], BOUND)


# Promise 2: no premature sleep.


def test_a_sleep_too_soon_after_activity_is_premature() -> None:
    w = record(awake(0.0), asleep(2.8, 2.5), activity=(0.5,))
    assert check_premature("op-0", w) == [
        "op-0: asleep since 14:15:32, 1.5s after activity (timeout 3s)"
    ]


def test_a_sleep_a_timeout_after_activity_is_not_premature() -> None:
    w = record(awake(0.0), asleep(3.8, 3.6), activity=(0.5,))
    assert check_premature("op-0", w) == []


def test_a_sleep_counts_from_when_its_activity_was_sent() -> None:
    # The soak at 1,000 workloads: the create was answered 0.8 s after it was sent, and the
    # controller had seen the object's watch event before that answer. Its sleep came 3 s after
    # the event, but reads as 1.2 s after the answer.
    w = record(awake(0.0), asleep(2.6, 2.1), activity=((0.0, 0.8),))
    assert check_premature("op-0", w) == []
    w = record(awake(0.0), asleep(2.6, 2.1), activity=((0.2, 0.8),))  # 1.8 s after sending
    assert len(check_premature("op-0", w)) == 1


def test_the_premature_check_refuses_no_sleep_or_no_activity() -> None:
    with pytest.raises(NothingToJudge, match="never seen asleep"):
        check_premature("op-0", record(awake(0.0), awake(1.0), activity=(0.5,)))
    with pytest.raises(NothingToJudge, match="no activity"):
        check_premature("op-0", record(awake(0.0), asleep(3.3, 3.1)))


# Promise 3: no restore count lost.


def test_a_sleep_remembering_a_count_it_never_had_fires() -> None:
    w = record(awake(0.0), asleep(3.3, 3.1, restore="1"), awake(4.5, 3.1), activity=(4.0,))
    assert check_restore("op-0", w) == [
        "op-0: asleep at 14:15:33.300000 with restore-replicas '1', expected 3"
    ]


def test_ending_short_of_its_count_fires() -> None:
    w = record(awake(0.0), asleep(3.3, 3.1), awake(4.5, 3.1, replicas=1), activity=(4.0,))
    assert check_restore("op-0", w) == [
        "op-0: ends awake at 1 replicas (restore '3'), expected awake at 3 or asleep remembering it"
    ]


def test_a_count_another_writer_set_is_remembered_quietly() -> None:
    w = record(awake(0.0), asleep(3.3, 3.1), awake(4.5, 3.1), activity=(4.0,))
    w.replicas, w.counts = 4, {3, 4}  # scaled to 4 by someone else while awake
    w.samples += [awake(5.0, 3.1, replicas=4), asleep(8.5, 8.2, restore="4")]
    assert check_restore("op-0", w) == []


def test_the_restore_check_refuses_a_workload_never_seen_asleep() -> None:
    with pytest.raises(NothingToJudge, match="never seen asleep at 0"):
        check_restore("op-0", record(awake(0.0), asleep(3.5, 3.1, replicas=3)))
    with pytest.raises(NothingToJudge):
        check_restore("op-0", WorkloadRecord(3, 3.0, {3}))
