"""Replica-seconds saved: counted for asleep managed workloads every few seconds and at wakes."""

from __future__ import annotations

from collections.abc import Iterable

from controller.clock import Clock
from controller.metrics import Metrics
from controller.workload import Workload


class Accounting:
    """Counts the replica-seconds an asleep workload does not run (`saved_replica_seconds`)."""

    def __init__(self, metrics: Metrics, clock: Clock) -> None:
        self._metrics = metrics
        self._clock = clock

    def start(self, w: Workload) -> None:
        """Count `w` from now on."""
        w.accounted_at = self._clock.monotonic()

    def account(self, w: Workload, *, stop: bool = False) -> None:
        """Count the time since the last count; with `stop`, stop counting until `start`."""
        if w.accounted_at is None:
            return
        now = self._clock.monotonic()
        if w.status.state == "asleep" and w.managed:
            saved = (now - w.accounted_at) * (w.status.restore_replicas or 1)
            self._metrics.replica_seconds_saved.inc(saved)
        w.accounted_at = None if stop else now

    def account_all(self, workloads: Iterable[Workload]) -> None:
        """The periodic count over every managed workload."""
        for w in list(workloads):
            if w.managed:
                if w.accounted_at is None:
                    self.start(w)
                self.account(w)
