"""Flapping: a sleeping workload woken again and again by the same manifest re-applied (GitOps).

A GitOps agent that re-applies `spec.replicas` from Git wakes a sleeping operator; it sleeps again
after its timeout, and the next sync wakes it. Each such wake is a scale-up by someone else while
asleep; when the same field manager sets the same replica count after several sleeps in a row, it
is flapping. It stops when the workload wakes for a reason of its own (activity), when someone else
wakes it, or when it stays asleep well past the longest sleep of the streak.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from zeroscaler.core.annotations import FIELD_MANAGER
from zeroscaler.core.durations import format_duration, parse_time

FLAP_WAKES = 3  # external wakes in a row by the same manifest that make a streak flapping
FLAP_SPAN = timedelta(hours=24)  # wakes older than this no longer count
QUIET_FACTOR = 2.0  # asleep this many times the streak's longest sleep: the re-applying stopped
QUIET_UNKNOWN = timedelta(hours=1)  # the same, when the streak was lost (a restart)


@dataclass(frozen=True, slots=True)
class ExternalWake:
    """One scale-up by someone else while asleep: who, to how many, when, after how long asleep."""

    manager: str
    replicas: int
    at: datetime
    slept: timedelta


@dataclass(frozen=True, slots=True)
class Streak:
    """The external wakes in a row by the same manager to the same count, oldest first."""

    wakes: tuple[ExternalWake, ...] = ()

    @property
    def is_flapping(self) -> bool:
        return len(self.wakes) >= FLAP_WAKES

    def reason(self) -> str:
        """The short, human-readable value of the `flapping` annotation."""
        last = self.wakes[-1]
        span = format_duration((last.at - self.wakes[0].at).total_seconds())
        return (
            f"woken {len(self.wakes)} times in {span} by field manager {last.manager} "
            f"setting replicas to {last.replicas}"
        )


def after_external_wake(streak: Streak, wake: ExternalWake) -> Streak:
    """The streak once someone else scaled the workload up while asleep."""
    recent = [w for w in streak.wakes if wake.at - w.at <= FLAP_SPAN]
    if recent and (recent[-1].manager, recent[-1].replicas) != (wake.manager, wake.replicas):
        recent = []  # another hand or another count: not the same manifest re-applied
    return Streak((*recent, wake))


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
