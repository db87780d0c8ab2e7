"""Flapping: a sleeping workload woken again and again by the same cause.

A GitOps agent that re-applies `spec.replicas` from Git wakes a sleeping operator; it sleeps again
after its timeout, and the next sync wakes it. Any cause can do the same: a manager that re-applies
its manifest within seconds of every sleep (a fight), or an object that the sleep itself changes
and the operator watches. When the same cause wakes it after several sleeps in a row, it is
flapping: a Warning names the cause. When each of those wakes came right after its sleep, a sleep
saves nothing and costs a restart: the workload is then left awake for a while (longer each time
it starts again) rather than put to sleep. Flapping stops when the workload wakes for another
cause, or stays asleep well past the longest sleep of the streak.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from zeroscaler.core.annotations import FIELD_MANAGER
from zeroscaler.core.disclosure import object_words
from zeroscaler.core.durations import format_duration, parse_time

FLAP_WAKES = 3  # wakes in a row by the same cause that make a streak flapping
FLAP_SPAN = timedelta(hours=24)  # wakes older than this no longer count
QUIET_FACTOR = 2.0  # asleep this many times the streak's longest sleep: the re-applying stopped
QUIET_UNKNOWN = timedelta(hours=1)  # the same, when the streak was lost (a restart)
# A wake this soon after its sleep is "right after" it: the sleep saved next to nothing.
RIGHT_AFTER = timedelta(seconds=60)
HOLD = timedelta(hours=1)  # how long a fight leaves it awake the first time; doubled each time
MAX_HOLD = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class Wake:
    """One wake after a sleep: its cause (in an Event's words), when, after how long asleep, and
    for a scale-up by someone else the field manager that wrote it."""

    cause: str
    at: datetime
    slept: timedelta
    manager: str = ""


def external_wake(manager: str, replicas: int, at: datetime, slept: timedelta) -> Wake:
    """A scale-up by someone else while asleep: the same manager setting the same count is the
    same manifest re-applied."""
    return Wake(f"field manager {manager} setting replicas to {replicas}", at, slept, manager)


@dataclass(frozen=True, slots=True)
class Streak:
    """The wakes in a row by the same cause, oldest first."""

    wakes: tuple[Wake, ...] = ()

    @property
    def is_flapping(self) -> bool:
        """The same manifest re-applied after each of several sleeps, or anything else waking
        it right after each of them (a change it watches that comes at any pace is its work)."""
        if len(self.wakes) < FLAP_WAKES:
            return False
        return bool(self.wakes[-1].manager) or self._right_after

    @property
    def is_fight(self) -> bool:
        """Flapping, each wake right after its sleep: sleeping it saves nothing."""
        return len(self.wakes) >= FLAP_WAKES and self._right_after

    @property
    def _right_after(self) -> bool:
        return all(w.slept <= RIGHT_AFTER for w in self.wakes)

    def reason(self) -> str:
        """The short, human-readable value of the `flapping` annotation."""
        last = self.wakes[-1]
        span = format_duration((last.at - self.wakes[0].at).total_seconds())
        return f"woken {len(self.wakes)} times in {span} by {last.cause}"

    def hold(self) -> timedelta:
        """How long a fight leaves it awake: longer for each wake past the first flapping one."""
        extra = max(len(self.wakes) - FLAP_WAKES, 0)
        return min(HOLD * (1 << min(extra, 8)), MAX_HOLD)


def after_wake(streak: Streak, wake: Wake) -> Streak:
    """The streak once the workload was woken after a sleep."""
    recent = [w for w in streak.wakes if wake.at - w.at <= FLAP_SPAN]
    if recent and recent[-1].cause != wake.cause:
        recent = []  # another cause: not the same thing again
    return Streak((*recent, wake))


after_external_wake = after_wake


def activity_cause(kind: str, namespace: str, name: str, reason: str, home: str) -> str:
    """The cause of a wake by activity: the object that changed, in the words others may read
    (`disclosure.py`: workload's namespace `home`), or the census's count where none is named."""
    if not name:
        return reason
    return object_words(kind, namespace, name, home)


def quiet_at(streak: Streak, asleep_since: datetime) -> datetime:
    """When a workload asleep since `asleep_since` is no longer flapping, unless woken before."""
    if not streak.wakes:
        return asleep_since + QUIET_UNKNOWN
    longest = max(w.slept for w in streak.wakes)
    return asleep_since + longest * QUIET_FACTOR


def replicas_manager(managed_fields: object) -> str | None:
    """The field manager that last wrote `spec.replicas`, other than zeroscaler; None if none."""
    if not isinstance(managed_fields, Sequence):
        return None
    found: tuple[datetime, str] | None = None
    for entry in managed_fields:
        if not isinstance(entry, Mapping) or not _owns_replicas(entry):
            continue
        manager = entry.get("manager")
        if not isinstance(manager, str) or manager == FIELD_MANAGER:
            continue
        try:
            at = parse_time(str(entry.get("time", "")))
        except ValueError:
            continue
        if found is None or at >= found[0]:
            found = (at, manager)
    return found[1] if found else None


def _owns_replicas(entry: Mapping[str, Any]) -> bool:
    fields = entry.get("fieldsV1")
    spec = fields.get("f:spec") if isinstance(fields, Mapping) else None
    return isinstance(spec, Mapping) and "f:replicas" in spec
