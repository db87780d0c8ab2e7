"""Each managed workload's own series: what they count, and that they go with the workload."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.held_events import workload
from zeroscaler.controller.accounting import Accounting
from zeroscaler.controller.flags import parse_settings
from zeroscaler.controller.metrics import LeaderReadings, Metrics, Readings
from zeroscaler.controller.supervisor import routes
from zeroscaler.controller.workload import Workload, WorkloadKey, count_released
from zeroscaler.core.annotations import WorkloadStatus
from zeroscaler.core.savings import Requests
from zeroscaler.runtime.clock import ManualClock

Sample = tuple[str, tuple[tuple[str, str], ...]]
State = Literal["awake", "asleep"]


def samples(metrics: Metrics, prefix: str = "zeroscaler_workload_") -> dict[Sample, float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if s.name.startswith(prefix)
    }


def labels(name: str, **more: str) -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted({"namespace": "ops", "workload": name, "kind": "Deployment", **more}.items())
    )


class Fleet:
    """Workloads as the scaler holds them, and metrics reading them."""

    def __init__(self, *, per_workload: bool = True, leading: bool = True) -> None:
        self.workloads: dict[WorkloadKey, Workload] = {}
        self.leading = leading
        self.counted = 0  # passes of the savings' count that scrapes asked for
        self.metrics = Metrics(
            lambda: self.leading,
            Readings(),
            LeaderReadings(released=lambda: count_released(self.workloads.values())),
            workloads=self.workloads.values if per_workload else None,
            count_savings=self._count_savings,
        )
        self.clock = ManualClock()
        self.accounting = Accounting(self.metrics, self.clock)

    def _count_savings(self) -> None:
        self.counted += 1
        self.accounting.account_all(self.workloads.values())

    def add(self, name: str, state: State = "awake", *, managed: bool = True) -> Workload:
        w = workload(name)
        w.status = WorkloadStatus(state, 2 if state == "asleep" else None)
        w.managed = managed
        self.workloads[w.key] = w
        return w


def test_a_managed_workload_has_its_state_and_savings_from_the_first_scrape() -> None:
    fleet = Fleet()
    fleet.add("sleeper", "asleep")
    fleet.add("busy")
    fleet.add("ignored", "asleep", managed=False)
    assert samples(fleet.metrics) == {
        ("zeroscaler_workload_asleep", labels("sleeper")): 1.0,
        ("zeroscaler_workload_asleep", labels("busy")): 0.0,
        ("zeroscaler_workload_saved_replica_seconds_total", labels("sleeper")): 0.0,
        ("zeroscaler_workload_saved_replica_seconds_total", labels("busy")): 0.0,
        ("zeroscaler_workload_saved_cpu_core_seconds_total", labels("sleeper")): 0.0,
        ("zeroscaler_workload_saved_cpu_core_seconds_total", labels("busy")): 0.0,
        ("zeroscaler_workload_saved_memory_byte_seconds_total", labels("sleeper")): 0.0,
        ("zeroscaler_workload_saved_memory_byte_seconds_total", labels("busy")): 0.0,
    }


def test_wakes_and_sleeps_are_counted_by_reason_and_latency_per_workload() -> None:
    fleet = Fleet()
    w = fleet.add("op")
    other = fleet.add("other")
    fleet.metrics.slept(w.report, w.managed, "idle")
    fleet.metrics.woke(w.report, w.managed, "activity", 0.5)
    fleet.metrics.slept(w.report, w.managed, "idle")
    fleet.metrics.woke(w.report, w.managed, "activity", 1.5)
    fleet.metrics.slept(w.report, w.managed, "not-ready")
    fleet.metrics.woke(w.report, w.managed, "serving")
    fleet.metrics.woke(other.report, other.managed, "external")
    got = samples(fleet.metrics)
    assert got[("zeroscaler_workload_wakes_total", labels("op", reason="activity"))] == 2
    assert got[("zeroscaler_workload_wakes_total", labels("op", reason="serving"))] == 1
    assert got[("zeroscaler_workload_sleeps_total", labels("op", reason="idle"))] == 2
    assert got[("zeroscaler_workload_sleeps_total", labels("op", reason="not-ready"))] == 1
    assert got[("zeroscaler_workload_wake_latency_seconds_count", labels("op"))] == 2
    assert got[("zeroscaler_workload_wake_latency_seconds_sum", labels("op"))] == 2.0
    assert got[("zeroscaler_workload_wakes_total", labels("other", reason="external"))] == 1
    # The other workload had no wake with a waking event: no latency series at all.
    assert ("zeroscaler_workload_wake_latency_seconds_count", labels("other")) not in got
    assert ("zeroscaler_workload_wakes_total", labels("other", reason="activity")) not in got
    # The cluster totals: a wake by someone else is not one of zeroscaler's own.
    totals = samples(fleet.metrics, "zeroscaler_")
    assert totals[("zeroscaler_wakes_total", ())] == 3
    assert totals[("zeroscaler_sleeps_total", ())] == 3
    assert totals[("zeroscaler_wake_latency_seconds_count", ())] == 2


def test_savings_are_counted_per_workload_and_in_the_total_alike() -> None:
    fleet = Fleet()
    clock, accounting = fleet.clock, fleet.accounting
    three, one = fleet.add("three", "asleep"), fleet.add("one", "asleep")
    three.status = WorkloadStatus("asleep", 3)
    one.status = WorkloadStatus("asleep")
    # Each pod of "three" requests half a core and 1 GiB; "one" requests nothing.
    three.obj = replace(three.obj, replicas=0, pod_requests=Requests(0.5, 2.0**30))
    assert fleet.metrics.registry.get_sample_value("zeroscaler_released_cpu_cores") == 1.5
    assert fleet.metrics.registry.get_sample_value("zeroscaler_released_memory_bytes") == 3 * 2**30
    accounting.account_all(fleet.workloads.values())
    clock.advance(10)
    accounting.account_all(fleet.workloads.values())
    clock.advance(2)
    accounting.account(one.report, one.obj, one.status, one.managed, stop=True)  # woken
    got = samples(fleet.metrics)  # the scrape counts "three" up to its own moment
    assert got[("zeroscaler_workload_saved_replica_seconds_total", labels("three"))] == 36.0
    assert got[("zeroscaler_workload_saved_replica_seconds_total", labels("one"))] == 12.0
    assert fleet.metrics.replica_seconds_saved._value.get() == 48.0
    assert got[("zeroscaler_workload_saved_cpu_core_seconds_total", labels("three"))] == 18.0
    assert got[("zeroscaler_workload_saved_memory_byte_seconds_total", labels("three"))] == (
        36.0 * 2**30
    )
    assert got[("zeroscaler_workload_saved_cpu_core_seconds_total", labels("one"))] == 0.0
    assert fleet.metrics.saved_cpu._value.get() == 18.0
    assert fleet.metrics.saved_memory._value.get() == 36.0 * 2**30


def test_savings_are_counted_by_the_scrape_that_reads_them_and_no_other() -> None:
    fleet = Fleet()
    fleet.add("three", "asleep").status = WorkloadStatus("asleep", 3)
    fleet.metrics.render()  # the first scrape starts the count
    fleet.clock.advance(10)
    assert fleet.metrics.replica_seconds_saved._value.get() == 0.0  # no timer counted
    fleet.metrics.render(["zeroscaler_wakes_total"])  # a poll for another figure: not counted
    assert fleet.counted == 1
    got = samples(fleet.metrics)
    assert got[("zeroscaler_workload_saved_replica_seconds_total", labels("three"))] == 30.0
    fleet.clock.advance(5)
    total = fleet.metrics.render(["zeroscaler_saved_replica_seconds_total"]).decode()
    assert "zeroscaler_saved_replica_seconds_total 45.0" in total
    assert fleet.counted == 3


@pytest.mark.parametrize("leave", ["deleted", "unmanaged"])
def test_a_workload_that_goes_has_no_series_from_the_next_scrape(leave: str) -> None:
    fleet = Fleet()
    w = fleet.add("op", "asleep")
    fleet.add("stays")
    fleet.metrics.woke(w.report, w.managed, "activity", 0.2)
    assert ("zeroscaler_workload_wakes_total", labels("op", reason="activity")) in samples(
        fleet.metrics
    )
    if leave == "deleted":
        del fleet.workloads[w.key]
    else:
        w.managed = False
    assert {dict(key[1])["workload"] for key in samples(fleet.metrics)} == {"stays"}


def test_a_workload_no_longer_managed_loses_its_counts_and_starts_over() -> None:
    fleet = Fleet()
    accounting = fleet.accounting
    w = fleet.add("op")
    fleet.metrics.slept(w.report, w.managed, "idle")
    w.managed = False
    accounting.account_all(fleet.workloads.values())  # the periodic round frees them
    assert w.report.tally is None
    w.managed = True
    assert ("zeroscaler_workload_sleeps_total", labels("op", reason="idle")) not in samples(
        fleet.metrics
    )
    fleet.metrics.slept(w.report, w.managed, "idle")
    assert (
        samples(fleet.metrics)[("zeroscaler_workload_sleeps_total", labels("op", reason="idle"))]
        == 1
    )


def test_a_release_wake_counts_in_the_total_only() -> None:
    fleet = Fleet()
    w = fleet.add("op", "asleep", managed=False)  # handed back: no longer managed when woken
    fleet.metrics.woke(w.report, w.managed, "released")
    assert samples(fleet.metrics) == {}
    assert w.report.tally is None
    assert fleet.metrics.wakes._value.get() == 1


def test_a_standby_reports_no_workload_series() -> None:
    fleet = Fleet(leading=False)
    fleet.add("sleeper", "asleep")
    assert samples(fleet.metrics) == {}
    fleet.leading = True
    assert ("zeroscaler_workload_asleep", labels("sleeper")) in samples(fleet.metrics)


def test_turned_off_only_the_cluster_totals_remain() -> None:
    fleet = Fleet(per_workload=False)
    w = fleet.add("sleeper", "asleep")
    fleet.metrics.slept(w.report, w.managed, "idle")
    fleet.metrics.woke(w.report, w.managed, "activity", 0.1)
    text = fleet.metrics.render().decode()
    assert "zeroscaler_workload_" not in text
    assert w.report.tally is None
    assert fleet.metrics.wakes._value.get() == 1


def test_series_grow_with_the_workloads_managed_and_no_further() -> None:
    fleet = Fleet()
    for i in range(50):
        w = fleet.add(f"op-{i}", "asleep" if i % 2 else "awake")
        for _ in range(5):  # many wakes and sleeps, each reason once
            fleet.metrics.slept(w.report, w.managed, "idle")
            fleet.metrics.woke(w.report, w.managed, "activity", 0.1)
    # asleep, three savings, one wake reason, one sleep reason, latency sum and count: 8
    assert len(samples(fleet.metrics)) == 50 * 8


def test_workload_metrics_are_on_unless_turned_off() -> None:
    assert parse_settings([], {}).workload_metrics is True
    assert parse_settings(["--no-workload-metrics"], {}).workload_metrics is False
    off = {"ZEROSCALER_WORKLOAD_METRICS": "false"}
    assert parse_settings([], off).workload_metrics is False


def test_the_series_written_directly_are_what_prometheus_client_would_write() -> None:
    fleet = Fleet()
    states: tuple[State, ...] = ("asleep", "awake", "asleep")
    for i, state in enumerate(states):
        w = fleet.add(f"op-{i}", state)
        fleet.metrics.slept(w.report, w.managed, "idle")
        fleet.metrics.woke(w.report, w.managed, "activity", 0.25 * (i + 1))
        # Large values keep the client's float format.
        fleet.metrics.saved(w.report, w.managed, w.pod_requests, 1e17)
    fleet.metrics.woke(w.report, w.managed, "external")
    series = fleet.metrics.workload_series
    assert series is not None
    registry = CollectorRegistry()
    registry.register(series)
    assert series.text() == generate_latest(registry)
    assert series.text() in fleet.metrics.render()


def test_a_scrape_may_name_the_series_it_wants() -> None:
    fleet = Fleet()
    fleet.add("sleeper", "asleep")
    fleet.metrics.wakes.inc()
    only = fleet.metrics.render(["zeroscaler_wakes_total"]).decode()
    assert [(s.name, s.value) for f in text_string_to_metric_families(only) for s in f.samples] == [
        ("zeroscaler_wakes_total", 1.0)
    ]
    assert "zeroscaler_workload_" not in only  # the workloads' series are not written
    theirs = fleet.metrics.render(["zeroscaler_workload_asleep"]).decode()
    assert "zeroscaler_workload_asleep{" in theirs
    assert "zeroscaler_wakes_total" not in theirs


def test_the_metrics_route_reads_the_names_asked_for() -> None:
    class Controller:
        metrics = Fleet().metrics
        ready = True

    route = routes(Controller())["/metrics"]  # type: ignore[arg-type]
    status, _, body = route({"name[]": ["zeroscaler_wakes_total"]})
    assert status == 200
    assert body.decode().splitlines()[-1] == "zeroscaler_wakes_total 0.0"
