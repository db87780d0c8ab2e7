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
        w.idle.last_activity = now
        log.debug("activity", extra={"workload": w.label, "reason": found.reason})
        asleep = w.shown_status.state == "asleep"
        # A wake names the change that woke it, not the newest one seen while its write was retried.
        if not asleep or w.idle.activity_at is None:
            w.idle.activity_reason = found.reason
            w.idle.activity_cause = activity_cause(
                found.kind, found.namespace, found.name, found.reason, w.namespace
            )
        if asleep or self._is_running(w.key):
            if w.idle.activity_at is None:
                w.idle.activity_at = self._clock.monotonic()
            if asleep:
                self._wake_due(w.key)
            self._enqueue(w.key)
