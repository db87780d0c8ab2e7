"""Recorded sample sequences for the fault checker's tests, as plain data: seconds from T0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chaos.invariants import Sample, WorkloadRecord

T0 = datetime(2026, 12, 1, 14, 15, 30, tzinfo=UTC)
BOUND = timedelta(seconds=15)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def second(seconds: float) -> datetime:
    """A time as the controller writes it: to the second."""
    return at(seconds).replace(microsecond=0)


def asleep(when: float, since: float, replicas: int = 0, restore: str = "3") -> Sample:
    """Seen at `when` asleep from a sleep written at `since`."""
    return Sample(at(when), replicas, "asleep", restore, second(since))


def awake(when: float, since: float | None = None, replicas: int = 3) -> Sample:
    """Seen at `when` awake (`since`: when its last sleep was written, if it slept)."""
    return Sample(at(when), replicas, "awake", "3", None if since is None else second(since))


def record(
    *samples: Sample,
    activity: tuple[float | tuple[float, float], ...] = (),
    replicas: int = 3,
    timeout: float = 3.0,
) -> WorkloadRecord:
    """One workload (3 replicas, timeout 3 s) with these samples; an activity is a time, or
    (sent, answered) for a request answered late."""
    w = WorkloadRecord(replicas, timeout, {replicas})
    w.samples += samples
    for a in activity:
        began, done = a if isinstance(a, tuple) else (a, a)
        w.activity.append((at(began), at(done)))
    return w


# A failover as two replicas logged it: a led from 30.1 until killed at 36.0 (its last line at
# 35.2), b took over at 39.4 and stopped leading at 44.0.
AT = "time=2026-12-01T14:15:"
LEADER = "level=info logger=zeroscaler.controller.leader"
SCALING = "level=info logger=zeroscaler.controller.scaling"
SERVICE = "level=info logger=controller"
REPLICA_A = f"""\
{AT}30.002Z {SERVICE} msg=starting id=replica-a dry_run=False port=41001
{AT}30.100Z {LEADER} msg="became leader" lease=ns/zeroscaler-controller id=replica-a
{AT}33.120Z {SCALING} msg=sleeping workload=ns/op-0 reason="idle for 3s"
{AT}35.200Z {SCALING} msg=woken workload=ns/op-0 reason="ConfigMap ns/busy-1 created"
"""
REPLICA_B = f"""\
{AT}30.500Z {SERVICE} msg=starting id=replica-b dry_run=False port=41002
{AT}39.400Z {LEADER} msg="became leader" lease=ns/zeroscaler-controller id=replica-b
{AT}39.600Z {SCALING} msg=woken workload=ns/op-1 reason="ConfigMap ns/busy-2 created"
{AT}44.000Z {LEADER} msg="stopped leading" lease=ns/zeroscaler-controller id=replica-b
"""
HOLDERS = [(at(1.0), "replica-a"), (at(7.0), ""), (at(10.0), "replica-b")]
