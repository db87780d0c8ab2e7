"""Wakes a clock asks for (due times, max-sleep) and a fight's hold: literal times, no mocks."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from zeroscaler.core.annotations import WorkloadConfig, WorkloadStatus, read_config
from zeroscaler.core.decision import (
    Decision,
    Observed,
    decide,
    max_sleep_wake_at,
)
from zeroscaler.core.due import (
    DueSummary,
    DueTime,
    parse_due_fields,
    read_due,
    summarize,
)
from zeroscaler.core.durations import parse_time
from zeroscaler.core.kinds import KindRef
from zeroscaler.core.schedules import jitter

CM = (KindRef("ConfigMap", kind="ConfigMap"),)
CERT = "Certificate web/tls status.renewalTime"


def t(text: str) -> datetime:
    return parse_time(f"2026-01-01T{text}Z")


NOW = t("12:00:00")
SLEPT = t("11:00:00")
ASLEEP = WorkloadStatus(state="asleep", restore_replicas=2, asleep_since=SLEPT)
AWAKE = WorkloadStatus(state="awake")
DUE = WorkloadConfig(idle_timeout=60.0, watched=CM, due_lead=120.0)
MAX = WorkloadConfig(idle_timeout=60.0, watched=CM, max_sleep=7200.0)


def due(at: str) -> DueTime:
    return DueTime(t(at), CERT)


def seen(
    last: str, *, passed: str | None = None, upcoming: str | None = None, **more: object
) -> Observed:
    summary = DueSummary(due(passed) if passed else None, due(upcoming) if upcoming else None)
    return Observed(0 if more.pop("asleep", False) else 2, t(last), due=summary, **more)  # type: ignore[arg-type]


CASES: list[tuple[str, Observed, WorkloadConfig, WorkloadStatus, Decision]] = [
    ("asleep, a due time ahead: look again a lead before it",
     seen("10:59:00", upcoming="12:10:00", asleep=True), DUE, ASLEEP,
     Decision("none", next_check=t("12:08:00"))),
    ("asleep, within the lead of a due time: woken for it",
     seen("10:59:00", upcoming="12:01:00", asleep=True), DUE, ASLEEP,
     Decision("wake", replicas=2, cause="due",
              reason=f"{CERT} is due at 2026-01-01T12:01:00Z (woken 2m before)")),
    ("asleep without due times or max-sleep: nothing to look at",
     seen("10:59:00", asleep=True), DUE, ASLEEP, Decision("none")),
    ("awake and idle, but due within its lead: awake until it is due",
     seen("11:00:00", upcoming="12:01:00"), DUE, AWAKE,
     Decision("none", next_check=t("12:01:00"), reason=f"{CERT} is due; awake until then")),
    ("awake and idle, the next due time beyond its lead: it sleeps",
     seen("11:00:00", upcoming="13:00:00"), DUE, AWAKE,
     Decision("sleep", replicas=2, reason="idle for 1h (timeout 1m)")),
    ("a due time passed while awake is work: its whole idle timeout follows it",
     seen("11:00:00", passed="11:59:30"), DUE, AWAKE,
     Decision("none", next_check=t("12:00:30"))),
    ("asleep max-sleep: looked at when it is over (jitter 0)",
     seen("10:59:00", asleep=True), MAX, ASLEEP, Decision("none", next_check=t("13:00:00"))),
    ("asleep past max-sleep and its jitter: woken for one idle timeout",
     seen("10:59:00", asleep=True, sleep_jitter=0.5),
     WorkloadConfig(idle_timeout=60.0, watched=CM, max_sleep=3000.0), ASLEEP,
     Decision("wake", replicas=2, cause="max-sleep",
              reason="asleep 52m30s (max-sleep 50m): woken for one idle timeout though nothing "
              "changed")),
    ("asleep, a due time and max-sleep: the earlier wins",
     seen("10:59:00", upcoming="12:30:00", asleep=True),
     WorkloadConfig(idle_timeout=60.0, watched=CM, max_sleep=3000.0, due_lead=0.0), ASLEEP,
     Decision("wake", replicas=2, cause="max-sleep",
              reason="asleep 50m (max-sleep 50m): woken for one idle timeout though nothing "
              "changed")),
    ("a fight's hold: left awake until it is over",
     seen("11:00:00"), MAX, WorkloadStatus(state="awake", flapping_until=t("12:30:00")),
     Decision("none", next_check=t("12:30:00"),
              reason="flapping: left awake until 2026-01-01T12:30:00Z")),
    ("a hold that is over: it sleeps when idle",
     seen("11:00:00"), MAX, WorkloadStatus(state="awake", flapping_until=t("11:30:00")),
     Decision("sleep", replicas=2, reason="idle for 1h (timeout 1m)")),
    ("a manager that reverts any sleep keeps it awake",
     seen("11:00:00", kept_awake_by="managed by cluster-version operator"), MAX, AWAKE,
     Decision("none", reason="managed by cluster-version operator")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("observed", "config", "status", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_clock_wakes_and_holds(
    observed: Observed, config: WorkloadConfig, status: WorkloadStatus, expected: Decision
) -> None:
    assert decide(observed, config, status, NOW) == expected


def test_the_earliest_due_time_after_the_sleep_and_the_latest_passed() -> None:
    times = [due("09:00:00"), due("11:30:00"), due("12:20:00"), due("12:10:00")]
    summary = summarize(times, NOW, SLEPT)
    assert summary == DueSummary(due("11:30:00"), due("11:30:00"))
    assert summarize(times, NOW, NOW) == DueSummary(due("11:30:00"), due("12:10:00"))
    assert summarize([], NOW, NOW) == DueSummary()


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2026-01-01T12:00:00Z", int(t("12:00:00").timestamp())),
        ("2026-01-01T12:00:00.5Z", int(t("12:00:00").timestamp())),
        ("2026-01-01T13:00:00+01:00", int(t("12:00:00").timestamp())),
        ("tomorrow", None),
        (1767268800, None),
        (None, None),
    ],
)
def test_a_due_field_is_an_rfc3339_time_or_nothing(value: object, seconds: int | None) -> None:
    obj = {"status": {"renewalTime": value}}
    assert read_due(obj, ("status", "renewalTime")) == seconds
    assert read_due({"status": "x"}, ("status", "renewalTime")) is None


def test_due_times_are_read_from_the_annotation_and_bad_entries_named() -> None:
    fields, errors = parse_due_fields(
        "Certificate.cert-manager.io=status.renewalTime, Backup.example.com=status.next, =x, "
        "Foo.example.com=status..bad"
    )
    assert [str(f) for f in fields] == [
        "Certificate.cert-manager.io=status.renewalTime",
        "Backup.example.com=status.next",
    ]
    assert len(errors) == 2
    assert all("Kind.group=field.path" in e for e in errors)
    config, problems = read_config(
        {
            "zeroscaler.io/due-times": "Certificate.cert-manager.io=status.renewalTime",
            "zeroscaler.io/due-lead": "5m",
            "zeroscaler.io/max-sleep": "10h",
        }
    )
    assert not problems
    assert config.due_lead == 300.0
    assert config.max_sleep == 36000.0
    assert config.due_times[0].path == ("status", "renewalTime")
    _, problems = read_config({"zeroscaler.io/max-sleep": "0s", "zeroscaler.io/due-lead": "soon"})
    assert [p.key for p in problems] == ["zeroscaler.io/max-sleep", "zeroscaler.io/due-lead"]


def test_max_sleep_wakes_spread_over_a_tenth_of_it_by_a_stable_jitter() -> None:
    jitters = [jitter(f"Deployment/team/op-{i}", 1.0) for i in range(1000)]
    assert jitters == [jitter(f"Deployment/team/op-{i}", 1.0) for i in range(1000)]  # stable
    assert all(0.0 <= j < 1.0 for j in jitters)
    wakes = sorted(max_sleep_wake_at(SLEPT, 36000.0, j) for j in jitters)
    assert wakes[0] >= SLEPT + timedelta(hours=10)
    assert wakes[-1] < SLEPT + timedelta(hours=11)
    # Spread, not at once: no minute of the hour holds more than a few times its share.
    minutes = [int((w - wakes[0]).total_seconds() // 60) for w in wakes]
    assert max(minutes.count(m) for m in set(minutes)) < 4 * 1000 / 60
