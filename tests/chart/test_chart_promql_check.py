"""promql-check (localcluster/go/promql-check, `python -m localcluster promql-check`) checks the
PromQL the chart ships: the PrometheusRule's alerts and every query of the Grafana dashboard, as
rules files read by Prometheus's own rules reader, which parses each expression with Prometheus's
PromQL parser."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster import build
from testkit.promql import dashboard_queries
from tests.chart.conftest import Helm
from tests.chart.rendered import DASHBOARD, RULES, dashboard, only, render

# What Grafana puts in place of its variables, as the dashboard's queries use them.
GRAFANA_RANGES = re.compile(r"\$__(rate_interval|interval|range)\b")
GRAFANA_VARIABLES = re.compile(r"\$\{?\w+\}?")


@pytest.fixture(scope="session")
def checker() -> Path:
    """The cached promql-check (`make chart` and `make test` build it first, outside the netns)."""
    return build.ensure_promql_check()


def run_checker(checker: Path, groups: list[dict[str, Any]], tmp_path: Path) -> tuple[Path, str]:
    """promql-check of a rules file of these groups: the file, and the checker's output."""
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}))
    proc = subprocess.run([str(checker), str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return path, proc.stdout


def as_prometheus(expr: str) -> str:
    """A dashboard query with Grafana's variables filled in as Grafana would."""
    return GRAFANA_VARIABLES.sub(".*", GRAFANA_RANGES.sub("5m", expr))


@pytest.mark.parametrize("certificates", ["job", "certManager"])
def test_promql_check_accepts_every_alert(
    helm: Helm, checker: Path, tmp_path: Path, certificates: str
) -> None:
    rule = only(
        render(helm, *RULES, "--set", f"certificates.mode={certificates}"), "PrometheusRule"
    )
    groups = rule["spec"]["groups"]
    rules = sum(len(g["rules"]) for g in groups)
    assert rules >= 5
    path, out = run_checker(checker, groups, tmp_path)
    assert out == f"{path}: valid (groups {len(groups)}, rules {rules})\n"


def test_promql_check_accepts_every_dashboard_query(
    helm: Helm, checker: Path, tmp_path: Path
) -> None:
    queries = dashboard_queries(dashboard(render(helm, *DASHBOARD)))
    assert len(queries) >= 10
    rules = [
        {"record": f"zeroscaler:dashboard_query_{i}", "expr": as_prometheus(expr)}
        for i, (_, expr, _) in enumerate(queries)
    ]
    assert all("$" not in r["expr"] for r in rules)
    path, out = run_checker(checker, [{"name": "dashboard", "rules": rules}], tmp_path)
    assert out == f"{path}: valid (groups 1, rules {len(rules)})\n"


def test_promql_check_refuses_a_query_that_does_not_parse(checker: Path, tmp_path: Path) -> None:
    broken = [{"name": "g", "rules": [{"record": "r", "expr": "sum by (le (rate(x[5m]))"}]}]
    with pytest.raises(AssertionError, match=r'group "g", rule 1, "r": .*parse error'):
        run_checker(checker, broken, tmp_path)


UP = {"record": "a", "expr": "up"}


@pytest.mark.parametrize(
    ("groups", "reason"),
    [
        ([{"name": "g", "rules": [{**UP, "alert": "A"}]}], "only one of 'record' and 'alert'"),
        ([{"name": "g", "rules": [{"record": "a", "exp": "up"}]}], "field exp not found"),
        ([{"name": "g", "rules": [{**UP, "for": "5m"}]}], "invalid field 'for' in recording rule"),
        ([{"name": "g", "rules": [UP]}, {"name": "g", "rules": [UP]}], '"g" is repeated'),
        (
            [{"name": "g", "rules": [{"alert": "A", "expr": "up", "annotations": {"s": "{{ $x"}}]}],
            'annotation "s"',
        ),
        ([], "no rules found"),
    ],
)
def test_promql_check_refuses_a_file_prometheus_would_not_load(
    checker: Path, tmp_path: Path, groups: list[dict[str, Any]], reason: str
) -> None:
    with pytest.raises(AssertionError, match=re.escape(reason)):
        run_checker(checker, groups, tmp_path)
