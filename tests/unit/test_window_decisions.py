"""Table tests for `decide` with windows: literal instants, no clock, no mocks."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest

from zeroscaler.core.annotations import WorkloadConfig, WorkloadStatus, read_config
from zeroscaler.core.decision import Decision, Observed, decide, schedule_notice
from zeroscaler.core.durations import parse_time
from zeroscaler.core.kinds import KindRef
from zeroscaler.core.links import Link, Serving
from zeroscaler.core.schedules import parse_windows

CM = (KindRef("ConfigMap", kind="ConfigMap"),)


def t(text: str) -> datetime:
    return parse_time(text)


def config(keep: str = "", forced: str = "", **fields: object) -> WorkloadConfig:
    windows = (parse_windows(keep, "keep-awake") if keep else ()) + (
        parse_windows(forced, "forced-sleep") if forced else ()
    )
    return dataclasses.replace(
        WorkloadConfig(idle_timeout=3600.0, watched=CM, windows=windows),
        **fields,  # type: ignore[arg-type]
    )


# 2026-01-05 is a Monday.
NIGHT = "Mon-Fri 20:00-07:00 UTC"
NIGHT_HOLD = NIGHT + " hold"
DAY = "Mon-Fri 08:00-18:00 UTC"
FORCED = 'forced-sleep window "Mon-Fri 20:00-07:00 UTC" (annotation zeroscaler.io/forced-sleep)'
HELD = (
    'forced-sleep window "Mon-Fri 20:00-07:00 UTC hold" (annotation zeroscaler.io/forced-sleep) '
    "from 2026-01-05T20:00:00Z to 2026-01-06T07:00:00Z holds activity until 2026-01-06T07:00:00Z"
)
KEEP = 'keep-awake window "Mon-Fri 08:00-18:00 UTC" (annotation zeroscaler.io/keep-awake)'
API = Serving((Link("APIService", "v1.metrics.example.com", ("ops", "metrics")),))
BACKS_API = "backs APIService v1.metrics.example.com (Service ops/metrics); never put to sleep"
AWAKE = WorkloadStatus(state="awake", last_activity=t("2026-01-05T19:00:00Z"))
AWOKEN_INSIDE = WorkloadStatus(state="awake", last_activity=t("2026-01-05T21:00:00Z"))


def asleep(since: str) -> WorkloadStatus:
    return WorkloadStatus(state="asleep", restore_replicas=2, asleep_since=t(since))


CASES: list[tuple[str, Observed, WorkloadConfig, WorkloadStatus, str, Decision]] = [
    (
        "forced sleep at the window's start, however recent the activity",
        Observed(2, t("2026-01-05T19:59:59Z")),
        config(forced=NIGHT),
        AWAKE,
        "2026-01-05T20:00:00Z",
        Decision(
            "sleep",
            replicas=2,
            reason=f"{FORCED} from 2026-01-05T20:00:00Z to 2026-01-06T07:00:00Z",
            rule="forced-sleep",
        ),
    ),
    (
        "forced sleep of one never recorded awake (first seen inside the window)",
        Observed(2, t("2026-01-05T22:00:00Z")),
        config(forced=NIGHT),
        WorkloadStatus(),
        "2026-01-05T22:00:00Z",
        Decision(
            "sleep",
            replicas=2,
            reason=f"{FORCED} from 2026-01-05T20:00:00Z to 2026-01-06T07:00:00Z",
            rule="forced-sleep",
        ),
    ),
    (
        "woken inside the window: the usual idle timeout, looked at again at its end",
        Observed(2, t("2026-01-05T21:00:00Z")),
        config(forced=NIGHT),
        AWOKEN_INSIDE,
        "2026-01-05T21:30:00Z",
        Decision("none", next_check=t("2026-01-05T22:00:00Z")),
    ),
    (
        "woken inside the window and idle for its timeout: sleeps as usual",
        Observed(2, t("2026-01-05T21:00:00Z")),
        config(forced=NIGHT, idle_timeout=60.0),
        AWOKEN_INSIDE,
        "2026-01-05T21:01:00Z",
        Decision("sleep", replicas=2, reason="idle for 1m (timeout 1m)"),
    ),
    (
        "safety first: one that backs an API is not forced to sleep, and says which rule won",
        Observed(2, t("2026-01-05T19:00:00Z"), serving=API),
        config(forced=NIGHT),
        AWAKE,
        "2026-01-05T20:00:00Z",
        Decision(
            "none",
            next_check=t("2026-01-06T07:00:00Z"),
            reason=f"{BACKS_API}; {FORCED} from 2026-01-05T20:00:00Z to "
            "2026-01-06T07:00:00Z does not apply",
        ),
    ),
    (
        "safety first: an HPA's target is not forced to sleep",
        Observed(2, t("2026-01-05T19:00:00Z"), hpa_targeted=True),
        config(forced=NIGHT),
        AWAKE,
        "2026-01-05T20:00:00Z",
        Decision(
            "none",
            next_check=t("2026-01-06T07:00:00Z"),
            reason="targeted by a HorizontalPodAutoscaler; never put to sleep; "
            f"{FORCED} from 2026-01-05T20:00:00Z to 2026-01-06T07:00:00Z does not apply",
        ),
    ),
    (
        "safety first: with no kind to wake on, never forced to sleep",
        Observed(2, t("2026-01-05T19:00:00Z"), can_wake=False),
        config(forced=NIGHT),
        AWAKE,
        "2026-01-05T20:00:00Z",
        Decision(
            "none",
            next_check=t("2026-01-06T07:00:00Z"),
            reason="no watched or owned kind to wake on; never put to sleep; "
            f"{FORCED} from 2026-01-05T20:00:00Z to 2026-01-06T07:00:00Z does not apply",
        ),
    ),
    (
        "not Ready since its wake, from before the window: forced to sleep too",
        Observed(2, t("2026-01-05T19:30:00Z"), starting=True),
        config(forced=NIGHT),
        AWAKE,
        "2026-01-05T20:00:00Z",
        Decision(
            "sleep",
            replicas=2,
            reason=f"{FORCED} from 2026-01-05T20:00:00Z to 2026-01-06T07:00:00Z",
            rule="forced-sleep",
        ),
    ),
    (
        "keep-awake: idle past its timeout, not put to sleep until the window ends",
        Observed(2, t("2026-01-05T08:00:00Z")),
        config(keep=DAY, idle_timeout=60.0),
        AWAKE,
        "2026-01-05T12:00:00Z",
        Decision(
            "none",
            next_check=t("2026-01-05T18:00:00Z"),
            reason=f"idle for 4h (timeout 1m), but {KEEP} from 2026-01-05T08:00:00Z to "
            "2026-01-05T18:00:00Z",
            rule="keep-awake",
        ),
    ),
    (
        "keep-awake: at its end, asleep if idle for its timeout",
        Observed(2, t("2026-01-05T08:00:00Z")),
        config(keep=DAY, idle_timeout=60.0),
        AWAKE,
        "2026-01-05T18:00:00Z",
        Decision("sleep", replicas=2, reason="idle for 10h (timeout 1m)"),
    ),
    (
        "keep-awake: not Ready after its bound, still not put to sleep inside it",
        Observed(2, t("2026-01-05T08:00:00Z"), starting=True),
        config(keep=DAY, idle_timeout=60.0),
        AWAKE,
        "2026-01-05T12:00:00Z",
        Decision(
            "none",
            next_check=t("2026-01-05T18:00:00Z"),
            reason=f"not Ready 4h after its wake (0 of 2 replicas ready; timeout 1m + 10m to "
            f"start), but {KEEP} from 2026-01-05T08:00:00Z to 2026-01-05T18:00:00Z",
            rule="keep-awake",
        ),
    ),
    (
        "outside any window: looked at again at the next window's start, if sooner",
        Observed(2, t("2026-01-05T07:30:00Z")),
        config(keep=DAY),
        AWAKE,
        "2026-01-05T07:45:00Z",
        Decision("none", next_check=t("2026-01-05T08:00:00Z")),
    ),
    (
        "outside any window: the idle deadline, if sooner",
        Observed(2, t("2026-01-05T06:50:00Z")),
        config(keep=DAY),
        AWAKE,
        "2026-01-05T07:45:00Z",
        Decision("none", next_check=t("2026-01-05T07:50:00Z")),
    ),
    (
        "hold: activity in the window does not wake it; looked at again at the window's end",
        Observed(0, t("2026-01-05T21:00:00Z"), wake_reason="ConfigMap ops/settings changed"),
        config(forced=NIGHT_HOLD),
        asleep("2026-01-05T20:00:00Z"),
        "2026-01-05T21:00:00Z",
        Decision("none", next_check=t("2026-01-06T07:00:00Z"), reason=HELD, held=True, rule="hold"),
    ),
    (
        "hold: at the window's end, the held change wakes it",
        Observed(0, t("2026-01-05T21:00:00Z"), wake_reason="ConfigMap ops/settings changed"),
        config(forced=NIGHT_HOLD),
        asleep("2026-01-05T20:00:00Z"),
        "2026-01-06T07:00:00Z",
        Decision("wake", replicas=2, reason="ConfigMap ops/settings changed"),
    ),
    (
        "hold never holds safety: one that comes to back an API is woken at once",
        Observed(0, t("2026-01-05T20:00:00Z"), serving=API),
        config(forced=NIGHT_HOLD),
        asleep("2026-01-05T20:00:00Z"),
        "2026-01-05T21:00:00Z",
        Decision(
            "wake",
            replicas=2,
            reason="backs APIService v1.metrics.example.com (Service ops/metrics)",
        ),
    ),
    (
        "wake (the default): activity in a forced-sleep window wakes it as usual",
        Observed(0, t("2026-01-05T21:00:00Z"), wake_reason="ConfigMap ops/settings changed"),
        config(forced=NIGHT),
        asleep("2026-01-05T20:00:00Z"),
        "2026-01-05T21:00:00Z",
        Decision("wake", replicas=2, reason="ConfigMap ops/settings changed"),
    ),
    (
        "asleep in a forced-sleep window with nothing seen: looked at again at its end",
        Observed(0, t("2026-01-05T20:00:00Z")),
        config(forced=NIGHT_HOLD),
        asleep("2026-01-05T20:00:00Z"),
        "2026-01-05T21:00:00Z",
        Decision("none", next_check=t("2026-01-06T07:00:00Z")),
    ),
    (
        "keep-awake: a sleeper waits for its own moment after the window's start",
        Observed(0, t("2026-01-05T02:00:00Z"), jitter=30.0),
        config(keep=DAY),
        asleep("2026-01-05T02:00:00Z"),
        "2026-01-05T08:00:10Z",
        Decision("none", next_check=t("2026-01-05T08:00:30Z")),
    ),
    (
        "keep-awake: then it is woken, the window named",
        Observed(0, t("2026-01-05T02:00:00Z"), jitter=30.0),
        config(keep=DAY),
        asleep("2026-01-05T02:00:00Z"),
        "2026-01-05T08:00:30Z",
        Decision(
            "wake",
            replicas=2,
            reason=f"{KEEP} from 2026-01-05T08:00:00Z to 2026-01-05T18:00:00Z",
            rule="keep-awake",
        ),
    ),
    (
        "keep-awake: a delay longer than half the window is cut to half of it",
        Observed(0, t("2026-01-05T02:00:00Z"), jitter=3600.0),
        config(keep="Mon 08:00-08:10 UTC"),
        asleep("2026-01-05T02:00:00Z"),
        "2026-01-05T08:01:00Z",
        Decision("none", next_check=t("2026-01-05T08:05:00Z")),
    ),
    (
        "keep-awake: one a person put to sleep inside the window stays asleep",
        Observed(0, t("2026-01-05T09:00:00Z")),
        config(keep=DAY),
        asleep("2026-01-05T09:00:00Z"),
        "2026-01-05T10:00:00Z",
        Decision("none", next_check=t("2026-01-05T18:00:00Z")),
    ),
    (
        "paused: windows change nothing",
        Observed(2, t("2026-01-05T19:00:00Z")),
        config(forced=NIGHT, paused=True),
        AWAKE,
        "2026-01-05T21:00:00Z",
        Decision("none", reason="zeroscaler.io/paused is true; held as it is"),
    ),
]


@pytest.mark.parametrize(
    ("observed", "cfg", "status", "now", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_decide_with_windows(
    observed: Observed, cfg: WorkloadConfig, status: WorkloadStatus, now: str, expected: Decision
) -> None:
    assert decide(observed, cfg, status, t(now)) == expected


def test_windows_from_policy_are_said_to_be_from_policy() -> None:
    cfg, problems = read_config(
        {
            "zeroscaler.io/idle-timeout": "1h",
            "zeroscaler.io/watched-kinds": "ConfigMap",
            "zeroscaler.io/forced-sleep": NIGHT,
            "zeroscaler.io/injected": "zeroscaler.io/forced-sleep",
        }
    )
    assert problems == []
    decision = decide(Observed(2, t("2026-01-05T19:00:00Z")), cfg, AWAKE, t("2026-01-05T20:00:00Z"))
    assert decision.reason.startswith(
        'forced-sleep window "Mon-Fri 20:00-07:00 UTC" (policy, zeroscaler.io/forced-sleep)'
    )


def test_a_window_that_loses_to_safety_is_a_warning() -> None:
    observed = Observed(2, t("2026-01-05T19:00:00Z"), serving=API)
    notice = schedule_notice(observed, config(forced=NIGHT), AWAKE, t("2026-01-05T20:00:00Z"))
    assert notice == (
        "ForcedSleepOverridden",
        f"{FORCED} from 2026-01-05T20:00:00Z to 2026-01-06T07:00:00Z is in force, but "
        f"{BACKS_API}: safety comes first",
    )
    # Nothing to say outside the window, or while what it serves is not known yet.
    assert schedule_notice(observed, config(forced=NIGHT), AWAKE, t("2026-01-05T19:00:00Z")) is None
    unknown = dataclasses.replace(observed, serving=None)
    assert schedule_notice(unknown, config(forced=NIGHT), AWAKE, t("2026-01-05T20:00:00Z")) is None


# (case, annotations, the problem reported)
BAD_ANNOTATIONS = [
    (
        "a bad keep-awake window: ignored whole, named with its form",
        {"zeroscaler.io/keep-awake": "Mon-Fri 08:00-18:00 UTC; Sat 25:00-26:00 UTC"},
        "zeroscaler.io/keep-awake: window 2 'Sat 25:00-26:00 UTC': start '25:00' is not a time "
        "of day HH:MM, 00:00 to 24:00; expected DAYS HH:MM-HH:MM ZONE",
    ),
    (
        "a bad zone in a forced-sleep window",
        {"zeroscaler.io/forced-sleep": "Mon 20:00-07:00 Mars/Olympus"},
        "zeroscaler.io/forced-sleep: 'Mon 20:00-07:00 Mars/Olympus': 'Mars/Olympus' is not an "
        "IANA time zone",
    ),
    (
        "a pause that is neither a time nor a duration",
        {"zeroscaler.io/paused-until": "monday"},
        "zeroscaler.io/paused-until: 'monday' is not an RFC 3339 time (2026-12-01T08:00:00Z) or "
        "a duration such as 90m, 2h, 72h",
    ),
]


@pytest.mark.parametrize(
    ("annotations", "problem"),
    [b[1:] for b in BAD_ANNOTATIONS],
    ids=[b[0] for b in BAD_ANNOTATIONS],
)
def test_bad_window_annotations_are_problems_and_change_nothing_else(
    annotations: dict[str, str], problem: str
) -> None:
    base = {"zeroscaler.io/idle-timeout": "10m", "zeroscaler.io/watched-kinds": "ConfigMap"}
    cfg, problems = read_config({**base, **annotations})
    assert str(problems[0]).startswith(problem)
    assert cfg == read_config(base)[0]  # the rest is read as it would be without them
