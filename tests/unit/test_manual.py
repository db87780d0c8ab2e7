"""A person's sleep and wake: what each request comes to, and what is refused."""

from __future__ import annotations

import pytest

from zeroscaler.core.annotations import WorkloadConfig, WorkloadStatus, read_config
from zeroscaler.core.durations import parse_time
from zeroscaler.core.manual import Manual, Refused, plan_sleep, plan_wake, unmanaged_reason

NOW = parse_time("2026-01-01T12:00:00Z")
CONFIG = WorkloadConfig(idle_timeout=600.0)
AWAKE = WorkloadStatus("awake")
ASLEEP = WorkloadStatus(
    "asleep", restore_replicas=3, asleep_since=parse_time("2026-01-01T11:00:00Z")
)
PAUSED = {"zeroscaler.io/paused": "true"}


def test_sleep_remembers_the_replicas_and_starts_asleep_now() -> None:
    plan = plan_sleep(CONFIG, AWAKE, 2, {}, "", NOW)
    assert plan == Manual(
        "sleep",
        2,
        {
            "zeroscaler.io/state": "asleep",
            "zeroscaler.io/restore-replicas": "2",
            "zeroscaler.io/asleep-since": "2026-01-01T12:00:00Z",
            "zeroscaler.io/last-activity": "2026-01-01T12:00:00Z",
        },
    )


@pytest.mark.parametrize(
    ("status", "replicas", "annotations", "unmanaged", "refused"),
    [
        (AWAKE, 2, PAUSED, "", "paused"),
        (AWAKE, 2, {}, "namespace x is not opted in", "nothing would wake it"),
        (AWAKE, 0, {}, "", "scaled down by someone else"),
    ],
)
def test_sleep_is_refused_where_it_would_be_undone_or_lost(
    status: WorkloadStatus, replicas: int, annotations: dict[str, str], unmanaged: str, refused: str
) -> None:
    with pytest.raises(Refused, match=refused):
        plan_sleep(CONFIG, status, replicas, annotations, unmanaged, NOW)


def test_sleep_of_a_sleeper_does_nothing() -> None:
    assert plan_sleep(CONFIG, ASLEEP, 0, {}, "", NOW).action == "none"


def test_wake_scales_to_what_the_controller_would_and_restarts_the_clock() -> None:
    plan = plan_wake(CONFIG, ASLEEP, 0, {}, "", NOW)
    assert (plan.action, plan.replicas) == ("wake", 3)
    assert plan.annotations == {
        "zeroscaler.io/state": "awake",
        "zeroscaler.io/last-activity": "2026-01-01T12:00:00Z",
    }
    override, _ = read_config(
        {"zeroscaler.io/idle-timeout": "1m", "zeroscaler.io/wake-replicas": "5"}
    )
    assert plan_wake(override, ASLEEP, 0, {}, "", NOW).replicas == 5


def test_wake_of_an_awake_workload_restarts_its_idle_clock() -> None:
    plan = plan_wake(CONFIG, AWAKE, 2, {}, "", NOW)
    assert (plan.action, plan.annotations["zeroscaler.io/last-activity"]) == (
        "restart-clock",
        "2026-01-01T12:00:00Z",
    )


def test_wake_of_one_we_slept_works_even_if_no_longer_managed() -> None:
    assert plan_wake(CONFIG, ASLEEP, 0, {}, "opted out", NOW).action == "wake"


@pytest.mark.parametrize(
    ("status", "replicas", "annotations", "unmanaged", "refused"),
    [
        (ASLEEP, 0, PAUSED, "", "paused"),
        (AWAKE, 0, {}, "", "no count to restore"),
        (AWAKE, 2, {}, "opted out", "no idle clock"),
    ],
)
def test_a_manual_wake_is_refused_when_paused_countless_or_unmanaged(
    status: WorkloadStatus, replicas: int, annotations: dict[str, str], unmanaged: str, refused: str
) -> None:
    with pytest.raises(Refused, match=refused):
        plan_wake(CONFIG, status, replicas, annotations, unmanaged, NOW)


@pytest.mark.parametrize(
    ("annotations", "labels", "reason"),
    [
        ({"zeroscaler.io/idle-timeout": "1m"}, {"zeroscaler.io/enabled": "true"}, ""),
        ({"zeroscaler.io/idle-timeout": "1m"}, None, ""),  # labels unknown: not judged
        ({"zeroscaler.io/idle-timeout": "1m"}, {}, "not opted in"),
        (
            {"zeroscaler.io/idle-timeout": "1m", "zeroscaler.io/enabled": "false"},
            {"zeroscaler.io/enabled": "true"},
            "opted out",
        ),
        ({}, {"zeroscaler.io/enabled": "true"}, "no idle timeout"),
    ],
)
def test_unmanaged_means_not_opted_in_opted_out_or_without_an_idle_timeout(
    annotations: dict[str, str], labels: dict[str, str] | None, reason: str
) -> None:
    config, _ = read_config(annotations)
    said = unmanaged_reason(config, "ops", labels)
    assert reason in said if reason else said == ""
