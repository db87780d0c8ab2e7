"""Flapping detection: literal timestamps stand in for the clock, no mocks."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from zeroscaler.core.durations import parse_time
from zeroscaler.core.flapping import (
    HOLD,
    MAX_HOLD,
    Streak,
    Wake,
    activity_cause,
    after_external_wake,
    after_wake,
    external_wake,
    quiet_at,
    replicas_manager,
)


def t(text: str) -> datetime:
    return parse_time(f"2026-01-01T{text}Z")


def wake(at: str, manager: str = "argocd-controller", replicas: int = 2, slept: int = 60) -> Wake:
    return external_wake(manager, replicas, t(at), timedelta(seconds=slept))


def streak_of(*wakes: Wake) -> Streak:
    streak = Streak()
    for w in wakes:
        streak = after_external_wake(streak, w)
    return streak


def test_the_same_manifest_three_times_after_a_sleep_is_flapping() -> None:
    two = streak_of(wake("10:00:00"), wake("10:05:00"))
    assert not two.is_flapping
    three = after_external_wake(two, wake("10:10:00"))
    assert three.is_flapping
    assert three.reason() == (
        "woken 3 times in 10m by field manager argocd-controller setting replicas to 2"
    )


@pytest.mark.parametrize(
    "third",
    [
        wake("10:10:00", manager="kubectl"),  # someone else's hand
        wake("10:10:00", replicas=3),  # another count: not the same manifest
    ],
)
def test_another_manager_or_count_starts_a_new_streak(third: Wake) -> None:
    streak = streak_of(wake("10:00:00"), wake("10:05:00"), third)
    assert streak.wakes == (third,)
    assert not streak.is_flapping


def test_wakes_older_than_a_day_no_longer_count() -> None:
    old = wake("10:00:00")
    later = external_wake("argocd-controller", 2, t("10:00:00") + timedelta(hours=25), old.slept)
    streak = streak_of(old, wake("10:05:00"), later)
    assert not streak.is_flapping
    assert len(streak.wakes) == 1


def test_it_is_quiet_after_twice_the_longest_sleep_of_the_streak() -> None:
    streak = streak_of(wake("10:00:00", slept=60), wake("10:05:00", slept=90))
    assert quiet_at(streak, t("11:00:00")) == t("11:03:00")
    assert quiet_at(Streak(), t("11:00:00")) == t("12:00:00")  # streak lost in a restart


def entry(manager: str, time: str, fields: dict[str, object], **more: str) -> dict[str, object]:
    return {"manager": manager, "time": f"2026-01-01T{time}Z", "fieldsV1": fields, **more}


REPLICAS: dict[str, object] = {"f:spec": {"f:replicas": {}}}
TEMPLATE: dict[str, object] = {"f:spec": {"f:template": {}}}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ([], None),
        (None, None),
        ([entry("zeroscaler", "10:00:00", REPLICAS, subresource="scale")], None),
        ([entry("gitops-agent", "09:00:00", TEMPLATE)], None),
        (
            [
                entry("kubectl", "09:00:00", REPLICAS),
                entry("gitops-agent", "10:00:00", REPLICAS, operation="Apply"),
                entry("zeroscaler", "11:00:00", REPLICAS, subresource="scale"),
            ],
            "gitops-agent",
        ),
        ([entry("gitops-agent", "not a time", REPLICAS)], None),
    ],
)
def test_who_last_set_the_replicas(fields: object, expected: str | None) -> None:
    assert replicas_manager(fields) == expected


def woken_by(cause: str, at: str, slept: int) -> Wake:
    return Wake(cause, t(at), timedelta(seconds=slept))


def test_the_same_object_waking_it_right_after_each_sleep_is_a_fight() -> None:
    rs = activity_cause(
        "ReplicaSet", "ops", "op-7847f58c69", "ReplicaSet ops/op-7847f58c69 changed", "ops"
    )
    streak = Streak()
    for at in ("10:00:00", "10:01:00", "10:02:00"):
        streak = after_wake(streak, woken_by(rs, at, slept=2))
    assert streak.is_flapping
    assert streak.is_fight
    assert streak.reason() == "woken 3 times in 2m by ReplicaSet ops/op-7847f58c69"
    assert streak.hold() == HOLD
    for at in ("10:03:00", "10:04:00", "10:05:00", "10:06:00"):
        streak = after_wake(streak, woken_by(rs, at, slept=2))
    assert streak.hold() == HOLD * 16
    for n in range(20):
        streak = after_wake(streak, woken_by(rs, f"11:{n:02d}:00", slept=2))
    assert streak.hold() == MAX_HOLD


def test_a_change_it_watches_that_comes_at_its_own_pace_is_its_work_not_flapping() -> None:
    streak = Streak()
    for at in ("10:00:00", "10:20:00", "10:40:00"):
        streak = after_wake(streak, woken_by("ConfigMap ops/schedule", at, slept=600))
    assert not streak.is_flapping
    assert not streak.is_fight


def test_a_manifest_re_applied_after_each_sleep_flaps_but_only_right_after_is_a_fight() -> None:
    slow = streak_of(wake("10:00:00", slept=600), wake("10:20:00", slept=600), wake("10:40:00"))
    assert slow.is_flapping
    assert not slow.is_fight
    fast = streak_of(
        wake("10:00:00", slept=5), wake("10:01:00", slept=5), wake("10:02:00", slept=5)
    )
    assert fast.is_fight


def test_another_cause_breaks_the_streak() -> None:
    streak = after_wake(Streak(), woken_by("Pod ops/a", "10:00:00", 2))
    streak = after_wake(streak, woken_by("Pod ops/b", "10:01:00", 2))
    assert [w.cause for w in streak.wakes] == ["Pod ops/b"]
    assert after_external_wake is after_wake


def test_a_census_wake_names_its_count_not_an_object() -> None:
    assert activity_cause("Secret", "", "", "2 Secret objects deleted", "ops") == (
        "2 Secret objects deleted"
    )
    assert activity_cause("Node", "", "n1", "Node n1 changed", "ops") == "Node n1"
    # A Secret elsewhere is named by its namespace only, as in the Event.
    assert activity_cause("Secret", "vault", "db-root", "x", "ops") == "Secret in namespace vault"
