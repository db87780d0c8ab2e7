"""Flapping detection: literal timestamps stand in for the clock, no mocks."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from zeroscaler.core.durations import parse_time
from zeroscaler.core.flapping import (
    ExternalWake,
    Streak,
    after_external_wake,
    quiet_at,
    replicas_manager,
)


def t(text: str) -> datetime:
    return parse_time(f"2026-01-01T{text}Z")


def wake(
    at: str, manager: str = "argocd-controller", replicas: int = 2, slept: int = 60
) -> ExternalWake:
    return ExternalWake(manager, replicas, t(at), timedelta(seconds=slept))


def streak_of(*wakes: ExternalWake) -> Streak:
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
def test_another_manager_or_count_starts_a_new_streak(third: ExternalWake) -> None:
    streak = streak_of(wake("10:00:00"), wake("10:05:00"), third)
    assert streak.wakes == (third,)
    assert not streak.is_flapping


def test_wakes_older_than_a_day_no_longer_count() -> None:
    old = wake("10:00:00")
    later = ExternalWake("argocd-controller", 2, t("10:00:00") + timedelta(hours=25), old.slept)
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
