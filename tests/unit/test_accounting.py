"""Replica-seconds saved: counted for asleep managed workloads, by the replicas they wake to."""

from __future__ import annotations

from tests.unit.held_events import workload
from zeroscaler.controller.accounting import Accounting
from zeroscaler.controller.metrics import Metrics
from zeroscaler.core.annotations import WorkloadStatus
from zeroscaler.runtime.clock import ManualClock


def test_only_asleep_managed_workloads_save_and_each_counts_its_restore_replicas() -> None:
    metrics = Metrics(lambda: True)
    clock = ManualClock()
    accounting = Accounting(metrics, clock)
    three, one, awake, unmanaged = (workload(n) for n in ("three", "one", "awake", "unmanaged"))
    three.status = WorkloadStatus("asleep", 3)
    one.status = WorkloadStatus("asleep")  # no restore count: wakes to 1
    awake.status = WorkloadStatus("awake")
    unmanaged.status = WorkloadStatus("asleep", 5)
    for w in (three, one, awake):
        w.managed = True
    everyone = [three, one, awake, unmanaged]
    accounting.account_all(everyone)  # starts the count: nothing saved yet
    clock.advance(10)
    accounting.account_all(everyone)
    assert metrics.replica_seconds_saved._value.get() == 40.0
    clock.advance(2)
    accounting.account(
        three.report, three.obj, three.status, three.managed, stop=True
    )  # woken: 2 s more at 3, then no longer counted
    clock.advance(8)
    accounting.account_all(everyone)
    assert metrics.replica_seconds_saved._value.get() == 40.0 + 6.0 + 10.0
