"""The idle clock's memory of a workload: when it was last active, and whether it is starting.

Declared here, below the parts: the change feed and the activity notes keep it, scaling writes
restart it, and every write is one of its methods, named for what happened."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from zeroscaler.core.decision import restart_clock


@dataclass(slots=True)
class IdleMemory:
    """The idle clock, kept by the change feed (`changes.py`) and the activity notes
    (`noting.py`), and restarted by scaling writes."""

    last_activity: datetime
    activity_reason: str = ""  # what a wake is for: the first activity since the sleep
    activity_cause: str = ""  # the object that made it (flapping tells causes apart by it)
    activity_at: float | None = None  # loop time the waking event arrived
    starting: bool = False  # woken (or first seen) and not Ready since: the idle clock waits
    woken_at: datetime | None = None  # when its last wake from zero was written, until Ready
    started_in: float | None = None  # seconds from its last wake to Ready (the activator asks)

    def first_seen(self, *, starting: bool) -> None:
        """Seen for the first time, not Ready yet (just created, or woken before a restart):
        its clock waits for Ready, as after a wake."""
        self.starting = starting

    def noted(
        self, now: datetime, reason: str, cause: str | None, owed_since: float | None
    ) -> None:
        """Activity seen at `now`: the clock restarts there. With a `cause` (None: the one held
        stays), `reason` and `cause` say what a wake is for; `owed_since` (None: as it is) marks
        the loop time from which a wake or a look is owed."""
        self.last_activity = now
        if cause is not None:
            self.activity_reason = reason
            self.activity_cause = cause
        if owed_since is not None:
            self.activity_at = owed_since

    def owe_nothing(self) -> None:
        """The activity seen so far is answered (a sleep decided on it, a wake written, a wake
        held or called off): no wake is owed for it."""
        self.activity_at = None

    def restart(self, now: datetime) -> None:
        """The clock restarts at `now`, or stays at newer activity."""
        self.last_activity = restart_clock(self.last_activity, now)

    def woken(self, now: datetime) -> None:
        """Scaled up at `now`: the clock waits for Ready, and restarts at the wake."""
        self.starting = True
        self.woken_at = now
        self.restart(now)

    def marked_awake(self, now: datetime) -> None:
        """Found awake at `now`, woken by someone else: the clock starts there, once Ready."""
        self.last_activity = now
        self.starting = True
        self.woken_at = now

    def slept(self) -> None:
        """Put to sleep: nothing to wait for."""
        self.starting = False

    def managed_from(self, at: datetime) -> None:
        """Managed from now on: its clock counts from `at`."""
        self.last_activity = at

    def restarted_by_person(self, at: datetime | None) -> None:
        """Its status says it was last active at `at` (a person's `zeroscaler wake`): a newer
        time restarts the clock."""
        if at is not None and at > self.last_activity:
            self.last_activity = at

    def settle(self, ready: bool | None, now: datetime) -> bool:
        """A starting workload read as `ready` (None: nothing to wait for) at `now`: once Ready
        its clock starts now. True when it stopped starting (one with no readiness to wait for
        stops at once, its clock left as it is)."""
        if not self.starting or ready is False:
            return False
        self.starting = False
        if ready:
            self.last_activity = max(self.last_activity, now)
            if self.woken_at is not None:
                self.started_in = (now - self.woken_at).total_seconds()
        self.woken_at = None
        return True
