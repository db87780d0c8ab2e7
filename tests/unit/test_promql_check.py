"""The reader that checks the chart's PromQL against the metrics really exposed: it finds what
an expression uses, and it fails on what is not there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit.exposed_metrics import exposed
from testkit.promql import (
    PromQLError,
    Selector,
    check,
    dashboard_problems,
    dashboard_queries,
    label_values_query,
    uses,
)

DASHBOARD = Path(__file__).resolve().parents[2] / "charts/zeroscaler/dashboards/zeroscaler.json"
EXPOSED = exposed()


@pytest.mark.parametrize(
    ("expr", "selectors", "grouping"),
    [
        ("zeroscaler_leader", [Selector("zeroscaler_leader", frozenset())], set()),
        (
            'sum by (reason) (increase(zeroscaler_workload_wakes_total{namespace=~"$namespace"}'
            "[$__rate_interval]))",
            [Selector("zeroscaler_workload_wakes_total", frozenset({"namespace"}))],
            {"reason"},
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(x_bucket{a='1',b!~\"2\"}[5m]))) > 5",
            [Selector("x_bucket", frozenset({"a", "b"}))],
            {"le"},
        ),
        (
            "sum(a) / on (job) group_left (version) b offset 1h or absent(c{d=\"e\"})",
            [
                Selector("a", frozenset()),
                Selector("b", frozenset()),
                Selector("c", frozenset({"d"})),
            ],
            {"job", "version"},
        ),
        ("count by (version) (zeroscaler_build_info) - time()", [
            Selector("zeroscaler_build_info", frozenset())
        ], {"version"}),
    ],
)  # fmt: skip
def test_the_selectors_and_grouping_of_an_expression_are_found(
    expr: str, selectors: list[Selector], grouping: set[str]
) -> None:
    found = uses(expr)
    assert list(found.selectors) == selectors
    assert found.grouping == grouping


@pytest.mark.parametrize(
    ("expr", "legend", "complaint"),
    [
        ("rate(zeroscaler_wakes_count[5m])", "", "zeroscaler_wakes_count is not exposed"),
        ('zeroscaler_workload_asleep{name="x"}', "", "has no label 'name'"),
        ("sum by (operator) (zeroscaler_workload_asleep)", "", "groups by 'operator'"),
        ("sum(zeroscaler_managed_workloads)", "{{phase}}", "legend shows 'phase'"),
        ("ratee(zeroscaler_wakes_total[5m])", "", "unknown function 'ratee'"),
        ("1 + 1", "", "selects no metric"),
        ('{__name__="zeroscaler_leader"}', "", "without a metric name"),
    ],
)
def test_what_is_not_exposed_is_a_problem(expr: str, legend: str, complaint: str) -> None:
    assert any(complaint in str(p) for p in check("panel", expr, EXPOSED, legend))


def test_the_shipped_dashboard_asks_only_for_what_the_components_expose() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert len(dashboard_queries(dashboard)) >= 10
    assert dashboard_problems(dashboard, EXPOSED) == []


def test_a_metric_renamed_under_the_dashboard_fails_it() -> None:
    text = DASHBOARD.read_text()
    assert "zeroscaler_workload_wakes_total" in text
    renamed = json.loads(text.replace("zeroscaler_workload_wakes_total", "zeroscaler_wakes_by"))
    assert any(
        "zeroscaler_wakes_by is not exposed" in p for p in dashboard_problems(renamed, EXPOSED)
    )


def test_a_variable_query_must_name_an_exposed_label() -> None:
    assert label_values_query("label_values(zeroscaler_workload_asleep, namespace)") == (
        "zeroscaler_workload_asleep",
        "namespace",
    )
    with pytest.raises(PromQLError):
        label_values_query("query_result(up)")


def test_a_dashboard_without_queries_fails_the_check() -> None:
    empty = {"panels": [{"title": "row", "type": "row", "panels": []}], "templating": {"list": []}}
    assert dashboard_problems(empty, EXPOSED) == ["the dashboard has no queries"]
