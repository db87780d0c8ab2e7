"""Activity noted: a workload's idle clock restarted, and the wake of a sleeper made due.

The change feed, the subscriptions' replays and the activator's wake requests all find activity;
this is the one place that records it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from zeroscaler.controller.context import Context
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.core.activity import Activity
from zeroscaler.core.flapping import activity_cause

log = logging.getLogger(__name__)

OnActivity = Callable[[Workload, Activity, datetime], None]


class ActivityNotes:
    """Notes activity for a workload: its idle clock, its reason, and a reconcile or a wake."""

    def __init__(
        self,
        context: Context,
        metrics: Metrics,
        is_running: Callable[[WorkloadKey], bool],
        wake_due: Callable[[WorkloadKey], None],
    ) -> None:
        self._clock = context.clock
        self._enqueue = context.enqueue
        self._metrics = metrics
        self._is_running = is_running
        self._wake_due = wake_due

    def note(self, w: Workload, found: Activity, now: datetime) -> None:
        """Restart the idle clock; an asleep workload's wake is due, a running one looks again."""
        self._metrics.activity.inc()
        idle = w.idle
        asleep = w.shown_status.state == "asleep"
        # A wake names the change that woke it, not the newest one seen while its write was retried.
        cause = None
        if not asleep or idle.activity_at is None:
            cause = activity_cause(
                found.kind, found.namespace, found.name, found.reason, w.namespace
            )
        owed = asleep or self._is_running(w.key)
        owed_since = self._clock.monotonic() if owed and idle.activity_at is None else None
        idle.noted(now, found.reason, cause, owed_since)
        log.debug("activity", extra={"workload": w.label, "reason": found.reason})
        if owed:
            if asleep:
                self._wake_due(w.key)
            self._enqueue(w.key)
