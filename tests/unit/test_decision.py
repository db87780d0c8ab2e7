"""Table tests for the scaler's decision: literal timestamps, no clock, no mocks."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest

from zeroscaler.core.annotations import WorkloadConfig, WorkloadStatus, read_config
from zeroscaler.core.decision import (
    Decision,
    Observed,
    Release,
    decide,
    not_ready_notice,
    plan_release,
    restart_clock,
    wake_replicas,
)
from zeroscaler.core.durations import parse_time
from zeroscaler.core.kinds import KindRef
from zeroscaler.core.links import Link, Serving

CM = (KindRef("ConfigMap", kind="ConfigMap"),)


def t(text: str) -> datetime:
    return parse_time(text)


NOW = t("2026-01-01T12:00:00Z")
CONFIG = WorkloadConfig(idle_timeout=60.0, watched=CM)
AWAKE = WorkloadStatus(state="awake")
PAUSED = WorkloadConfig(idle_timeout=60.0, watched=CM, paused=True)
HELD = "zeroscaler.io/paused is true; held as it is"
ASLEEP = WorkloadStatus(state="asleep", restore_replicas=3, asleep_since=t("2026-01-01T11:00:00Z"))

HOOK = Serving((Link("ValidatingWebhookConfiguration", "op-hooks", ("ops", "op-webhook")),))
ANSWERED = dataclasses.replace(HOOK, unanswered=None)  # the activator answers for its webhook
API = Serving((Link("APIService", "v1.metrics.example.com", ("ops", "metrics")),))
BACKS_API = "backs APIService v1.metrics.example.com (Service ops/metrics)"
BACKS_HOOK = "backs ValidatingWebhookConfiguration op-hooks (Service ops/op-webhook)"
NEVER = "; never put to sleep"
UNANSWERED = ", and no activator answers for it (the activator is off)"
STARTING = "woken, not Ready yet; its idle clock starts when it is"

CASES: list[tuple[str, Observed, WorkloadConfig, WorkloadStatus, Decision]] = [
    (
        "idle less than the timeout: look again at the deadline",
        Observed(3, t("2026-01-01T11:59:30Z")),
        CONFIG,
        AWAKE,
        Decision("none", next_check=t("2026-01-01T12:00:30Z")),
    ),
    (
        "idle exactly the timeout: sleep, remembering 3",
        Observed(3, t("2026-01-01T11:59:00Z")),
        CONFIG,
        AWAKE,
        Decision("sleep", replicas=3, reason="idle for 1m (timeout 1m)"),
    ),
    (
        "never recorded a state: same as awake",
        Observed(2, t("2026-01-01T11:00:00Z")),
        CONFIG,
        WorkloadStatus(),
        Decision("sleep", replicas=2, reason="idle for 1h (timeout 1m)"),
    ),
    (
        "HPA-targeted never sleeps",
        Observed(3, t("2026-01-01T11:00:00Z"), hpa_targeted=True),
        CONFIG,
        AWAKE,
        Decision("none", reason="targeted by a HorizontalPodAutoscaler; never put to sleep"),
    ),
    (
        "no kind to wake on never sleeps",
        Observed(3, t("2026-01-01T11:00:00Z"), can_wake=False),
        CONFIG,
        AWAKE,
        Decision("none", reason="no watched or owned kind to wake on; never put to sleep"),
    ),
    (
        "no timeout never sleeps",
        Observed(3, t("2026-01-01T11:00:00Z")),
        WorkloadConfig(watched=CM),
        AWAKE,
        Decision("none", reason="no idle timeout"),
    ),
    (
        "awake at zero replicas (scaled down by a person) is left alone",
        Observed(0, t("2026-01-01T11:00:00Z")),
        CONFIG,
        AWAKE,
        Decision("none", reason="scaled to zero by someone else; left alone"),
    ),
    (
        "sub-second timeout is raised to one second",
        Observed(1, t("2026-01-01T11:59:59.500Z")),
        WorkloadConfig(idle_timeout=0.1, watched=CM),
        AWAKE,
        Decision("none", next_check=t("2026-01-01T12:00:00.500Z")),
    ),
    (
        "asleep, no activity since: nothing",
        Observed(0, t("2026-01-01T10:59:00Z")),
        CONFIG,
        ASLEEP,
        Decision("none"),
    ),
    (
        "asleep, activity at the very second of sleeping does not count",
        Observed(0, t("2026-01-01T11:00:00Z")),
        CONFIG,
        ASLEEP,
        Decision("none"),
    ),
    (
        "asleep, activity after: wake to the remembered 3, not 1",
        Observed(0, t("2026-01-01T11:30:00Z")),
        CONFIG,
        ASLEEP,
        Decision("wake", replicas=3),
    ),
    (
        "asleep, activity after, wake-replicas overrides",
        Observed(0, t("2026-01-01T11:30:00Z")),
        WorkloadConfig(idle_timeout=60.0, watched=CM, wake_replicas=5),
        ASLEEP,
        Decision("wake", replicas=5),
    ),
    (
        "asleep without a remembered count wakes to 1",
        Observed(0, t("2026-01-01T11:30:00Z")),
        CONFIG,
        WorkloadStatus(state="asleep", asleep_since=t("2026-01-01T11:00:00Z")),
        Decision("wake", replicas=1),
    ),
    (
        "asleep but scaled up by someone: it is awake now",
        Observed(4, t("2026-01-01T10:59:00Z")),
        CONFIG,
        ASLEEP,
        Decision("mark-awake", replicas=4, reason="scaled up while asleep; now awake"),
    ),
    (
        "asleep, scaled up by our own wake whose record is not written yet: record it",
        Observed(3, t("2026-01-01T11:30:00Z"), woken_to=3),
        CONFIG,
        ASLEEP,
        Decision("record-wake", replicas=3, reason="woken; recording the wake"),
    ),
    (
        "asleep, our wake's record pending but scaled back to zero since: wake again",
        Observed(0, t("2026-01-01T11:30:00Z"), woken_to=3),
        CONFIG,
        ASLEEP,
        Decision("wake", replicas=3),
    ),
    (
        "awake, a stale pending wake changes nothing",
        Observed(3, t("2026-01-01T11:59:30Z"), woken_to=3),
        CONFIG,
        AWAKE,
        Decision("none", next_check=t("2026-01-01T12:00:30Z")),
    ),
    (
        "asleep and HPA-targeted with activity still wakes",
        Observed(0, t("2026-01-01T11:30:00Z"), hpa_targeted=True),
        CONFIG,
        ASLEEP,
        Decision("wake", replicas=3),
    ),
    (
        "asleep without asleep-since (crash or hand edit) wakes",
        Observed(0, t("2026-01-01T10:00:00Z")),
        CONFIG,
        WorkloadStatus(state="asleep", restore_replicas=2),
        Decision("wake", replicas=2),
    ),
    (
        "paused and idle past the timeout: held awake",
        Observed(3, t("2026-01-01T10:00:00Z")),
        PAUSED,
        AWAKE,
        Decision("none", reason=HELD),
    ),
    (
        "paused and asleep with activity: held asleep",
        Observed(0, t("2026-01-01T11:30:00Z")),
        PAUSED,
        ASLEEP,
        Decision("none", reason=HELD),
    ),
    (
        "paused and asleep, scaled up by someone else: not recorded",
        Observed(2, t("2026-01-01T10:00:00Z")),
        PAUSED,
        ASLEEP,
        Decision("none", reason=HELD),
    ),
    (
        "backs an APIService: idle for an hour, never put to sleep",
        Observed(3, t("2026-01-01T11:00:00Z"), serving=API),
        CONFIG,
        AWAKE,
        Decision("none", reason=BACKS_API + NEVER),
    ),
    (
        "backs an admission webhook, the activator off: not put to sleep",
        Observed(3, t("2026-01-01T11:00:00Z"), serving=HOOK),
        CONFIG,
        AWAKE,
        Decision("none", reason=BACKS_HOOK + UNANSWERED + "; not put to sleep"),
    ),
    (
        "backs an admission webhook the activator answers for: sleeps when idle",
        Observed(3, t("2026-01-01T10:00:00Z"), serving=ANSWERED),
        CONFIG,
        AWAKE,
        Decision("sleep", replicas=3, reason="idle for 2h (timeout 1m)"),
    ),
    (
        "an asleep backend the activator answers for stays asleep",
        Observed(0, t("2026-01-01T10:59:00Z"), serving=ANSWERED),
        CONFIG,
        ASLEEP,
        Decision("none"),
    ),
    (
        "what it serves is not listed yet: not put to sleep",
        Observed(3, t("2026-01-01T11:00:00Z"), serving=None),
        CONFIG,
        AWAKE,
        Decision("none", reason="what it serves is not known yet; not put to sleep"),
    ),
    (
        "a sleeper that gains an APIService link is woken, without activity",
        Observed(0, t("2026-01-01T10:59:00Z"), serving=API),
        CONFIG,
        ASLEEP,
        Decision("wake", replicas=3, reason=BACKS_API),
    ),
    (
        "a sleeper that gains a webhook link is woken, even with no kind to wake on",
        Observed(0, t("2026-01-01T10:59:00Z"), serving=HOOK, can_wake=False),
        CONFIG,
        ASLEEP,
        Decision("wake", replicas=3, reason=BACKS_HOOK + UNANSWERED),
    ),
    (
        "a sleeper whose links are not listed yet stays asleep",
        Observed(0, t("2026-01-01T10:59:00Z"), serving=None),
        CONFIG,
        ASLEEP,
        Decision("none"),
    ),
    (
        "paused wins over a link: held asleep",
        Observed(0, t("2026-01-01T10:59:00Z"), serving=API),
        PAUSED,
        ASLEEP,
        Decision("none", reason=HELD),
    ),
    (
        "woken, not Ready, before its timeout: look again at the timeout",
        Observed(3, t("2026-01-01T11:59:30Z"), starting=True),
        CONFIG,
        AWAKE,
        Decision("none", next_check=t("2026-01-01T12:00:30Z"), reason=STARTING),
    ),
    (
        "woken, not Ready, past its timeout: not put to sleep, look again at the bound",
        Observed(3, t("2026-01-01T11:58:00Z"), starting=True),
        CONFIG,
        AWAKE,
        Decision("none", next_check=t("2026-01-01T12:09:00Z"), reason=STARTING),
    ),
    (
        "woken, never Ready, past timeout and bound: back to sleep",
        Observed(3, t("2026-01-01T11:49:00Z"), starting=True, ready_replicas=1),
        CONFIG,
        AWAKE,
        Decision(
            "sleep",
            replicas=3,
            reason="not Ready 11m after its wake (1 of 3 replicas ready; "
            "timeout 1m + 10m to start)",
        ),
    ),
]


@pytest.mark.parametrize(
    ("observed", "config", "status", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_sleep_wake_or_nothing_is_decided_from_the_observed_state_config_and_now(
    observed: Observed, config: WorkloadConfig, status: WorkloadStatus, expected: Decision
) -> None:
    assert decide(observed, config, status, NOW) == expected


@pytest.mark.parametrize(
    ("wake", "restore", "expected"), [(None, None, 1), (None, 3, 3), (2, 3, 2), (7, None, 7)]
)
def test_wake_replicas_wins_over_the_remembered_count_and_one_is_the_fallback(
    wake: int | None, restore: int | None, expected: int
) -> None:
    config = WorkloadConfig(wake_replicas=wake)
    assert wake_replicas(config, WorkloadStatus(restore_replicas=restore)) == expected


@pytest.mark.parametrize(
    ("activity", "woken_at", "now", "expected"),
    [
        # Woken 15 s after a change made while the controller was down: awake for the whole timeout.
        (
            "11:59:45",
            "12:00:00",
            "12:00:01",
            Decision("none", next_check=t("2026-01-01T12:01:00Z")),
        ),
        # A mass wake reaches it 12.9 s after the event; still 1 m from the wake, not 47.1 s.
        (
            "11:59:47.1",
            "12:00:00",
            "12:00:47.1",
            Decision("none", next_check=t("2026-01-01T12:01:00Z")),
        ),
        # Activity after the wake (written before the clock was read) counts from itself.
        (
            "12:00:02",
            "12:00:00",
            "12:00:30",
            Decision("none", next_check=t("2026-01-01T12:01:02Z")),
        ),
        # A whole timeout after the wake with no activity: it sleeps again.
        (
            "11:59:45",
            "12:00:00",
            "12:01:00",
            Decision("sleep", replicas=3, reason="idle for 1m (timeout 1m)"),
        ),
    ],
)
def test_a_wake_restarts_the_idle_clock_when_awake(
    activity: str, woken_at: str, now: str, expected: Decision
) -> None:
    day = "2026-01-01T"
    clock = restart_clock(t(f"{day}{activity}Z"), t(f"{day}{woken_at}Z"))
    assert decide(Observed(3, clock), CONFIG, AWAKE, t(f"{day}{now}Z")) == expected


@pytest.mark.parametrize(
    ("value", "paused", "problem"),
    [("true", True, False), (" True ", True, False), ("false", False, False), ("yes", False, True)],
)
def test_paused_reads_true_or_false(value: str, paused: bool, problem: bool) -> None:
    config, problems = read_config({"zeroscaler.io/paused": value})
    assert config.paused is paused
    assert bool(problems) is problem


ASLEEP_AT_3 = {
    "zeroscaler.io/state": "asleep",
    "zeroscaler.io/restore-replicas": "3",
    "zeroscaler.io/asleep-since": "2026-01-01T11:00:00Z",
    "zeroscaler.io/last-activity": "2026-01-01T10:00:00Z",
}
STATUS = tuple(ASLEEP_AT_3)
WEBHOOK = {
    "zeroscaler.io/idle-timeout": "5m",
    "zeroscaler.io/watched-kinds": "ConfigMap",
    "zeroscaler.io/injected": "zeroscaler.io/idle-timeout,zeroscaler.io/watched-kinds",
}
WEBHOOK_KEYS = (*list(WEBHOOK)[:2], "zeroscaler.io/injected")

RELEASES: list[tuple[str, dict[str, str], int, bool, Release]] = [
    ("asleep at zero: woken to its restore count", ASLEEP_AT_3, 0, False, Release(3, STATUS)),
    (
        "wake-replicas wins over the restore count",
        {**ASLEEP_AT_3, "zeroscaler.io/wake-replicas": "5"},
        0,
        False,
        Release(5, STATUS),
    ),
    (
        "asleep but scaled up by someone else: left at its count",
        ASLEEP_AT_3,
        2,
        False,
        Release(None, STATUS),
    ),
    (
        "awake: only the status goes",
        {"zeroscaler.io/state": "awake", "zeroscaler.io/last-activity": "2026-01-01T10:00:00Z"},
        1,
        False,
        Release(None, ("zeroscaler.io/state", "zeroscaler.io/last-activity")),
    ),
    (
        "at zero without our status: someone else's zero, left alone",
        {"zeroscaler.io/idle-timeout": "5m"},
        0,
        False,
        Release(None, ()),
    ),
    (
        "opt-out keeps what the webhook added",
        {**ASLEEP_AT_3, **WEBHOOK},
        0,
        False,
        Release(3, STATUS),
    ),
    (
        "uninstall takes the webhook's keys too",
        {**ASLEEP_AT_3, **WEBHOOK},
        0,
        True,
        Release(3, (*STATUS, *WEBHOOK_KEYS)),
    ),
    (
        "the record names a key gone since and a foreign one: only the record goes",
        {"zeroscaler.io/injected": "zeroscaler.io/idle-timeout,other.io/x", "other.io/x": "1"},
        1,
        True,
        Release(None, ("zeroscaler.io/injected",)),
    ),
]


@pytest.mark.parametrize(
    ("annotations", "replicas", "injected", "expected"),
    [c[1:] for c in RELEASES],
    ids=[c[0] for c in RELEASES],
)
def test_a_released_workload_is_woken_only_if_we_left_it_at_zero_and_our_keys_go(
    annotations: dict[str, str], replicas: int, injected: bool, expected: Release
) -> None:
    assert plan_release(annotations, replicas, injected=injected) == expected


def test_a_late_start_is_warned_of_once_past_the_timeout() -> None:
    woken = t("2026-01-01T11:58:00Z")
    starting = Observed(3, woken, starting=True, ready_replicas=0)
    assert not_ready_notice(starting, CONFIG, AWAKE, t("2026-01-01T11:58:59Z")) is None
    assert not_ready_notice(starting, CONFIG, AWAKE, NOW) == (
        "NotReady",
        "woken at 2026-01-01T11:58:00Z, not Ready after its idle timeout 1m (0 of 3 replicas "
        "ready); put back to sleep at 2026-01-01T12:09:00Z unless it becomes Ready",
    )
    assert not_ready_notice(Observed(3, woken), CONFIG, AWAKE, NOW) is None
