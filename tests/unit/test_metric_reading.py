"""Reading one metric from the controller's exposition: a metric that is not there fails."""

from __future__ import annotations

import pytest

from testkit.controller import MissingMetric, read_metric
from zeroscaler.controller.metrics import Metrics, Readings


def exposition(events: dict[str, int] | None = None) -> str:
    """The controller's own /metrics text: one asleep workload, one watch open, leading, and
    seven Events waiting to be written."""
    metrics = Metrics(
        lambda: True, Readings(by_state=lambda: {"asleep": 1}, watches=lambda: 1, events=lambda: 7)
    )
    for resource, count in (events or {}).items():
        metrics.watch_events.labels(resource).inc(count)
    metrics.activity.inc(2)
    return metrics.render().decode()


def test_a_sample_present_is_read() -> None:
    text = exposition({"configmaps": 3})
    assert read_metric(text, "zeroscaler_activity_total", {}) == 2
    assert read_metric(text, "zeroscaler_watch_events_total", {"resource": "configmaps"}) == 3
    assert read_metric(text, "zeroscaler_managed_workloads", {"state": "awake"}) == 0
    assert read_metric(text, "zeroscaler_wake_latency_seconds_count", {}) == 0
    assert read_metric(text, "zeroscaler_leader", {}) == 1
    assert read_metric(text, "zeroscaler_pending_events", {}) == 7


@pytest.mark.parametrize(
    "renamed",
    ["zeroscaler_activities_total", "zeroscaler_activity", "zeroscaler_wakes_count"],
)
def test_a_metric_not_exposed_fails_naming_it(renamed: str) -> None:
    with pytest.raises(MissingMetric, match=renamed):
        read_metric(exposition(), renamed, {}, default=0.0)


def test_a_labelled_counter_before_its_first_sample_needs_a_default() -> None:
    text = exposition()  # the family is declared, no resource has a sample yet
    with pytest.raises(MissingMetric, match=r"zeroscaler_watch_events_total\{'resource'"):
        read_metric(text, "zeroscaler_watch_events_total", {"resource": "configmaps"})
    wanted = {"resource": "configmaps"}
    assert read_metric(text, "zeroscaler_watch_events_total", wanted, default=0.0) == 0.0


def test_a_label_the_samples_do_not_carry_fails_even_with_a_default() -> None:
    text = exposition({"configmaps": 1})
    with pytest.raises(MissingMetric, match=r"no label set \['kind'\]: its samples carry"):
        read_metric(text, "zeroscaler_watch_events_total", {"kind": "ConfigMap"}, default=0.0)
    with pytest.raises(MissingMetric, match="no label set"):
        read_metric(text, "zeroscaler_activity_total", {"resource": "configmaps"}, default=0.0)


def test_a_label_value_not_among_the_samples_fails_without_a_default() -> None:
    with pytest.raises(MissingMetric, match="has no sample"):
        read_metric(exposition(), "zeroscaler_managed_workloads", {"state": "dozing"})
