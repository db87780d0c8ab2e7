"""promtool, built from the Prometheus module (`python -m localcluster promtool`), checks the PromQL
the chart ships: the PrometheusRule's alerts and every query of the Grafana dashboard, as rules
files (`promtool check rules` parses each expression as Prometheus itself does)."""

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
def promtool() -> Path:
    """The cached promtool (`make chart` and `make test` build it first, outside the namespace)."""
    return build.ensure_promtool()


def check_rules(promtool: Path, groups: list[dict[str, Any]], tmp_path: Path) -> str:
    """`promtool check rules` of these groups: its output, after asserting it accepted them."""
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}))
    proc = subprocess.run(
        [str(promtool), "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def as_prometheus(expr: str) -> str:
    """A dashboard query with Grafana's variables filled in as Grafana would."""
    return GRAFANA_VARIABLES.sub(".*", GRAFANA_RANGES.sub("5m", expr))


@pytest.mark.parametrize("certificates", ["job", "certManager"])
def test_promtool_accepts_every_alert(
    helm: Helm, promtool: Path, tmp_path: Path, certificates: str
) -> None:
    rule = only(
        render(helm, *RULES, "--set", f"certificates.mode={certificates}"), "PrometheusRule"
    )
    groups = rule["spec"]["groups"]
    out = check_rules(promtool, groups, tmp_path)
    assert f"SUCCESS: {len(groups[0]['rules'])} rules found" in out


def test_promtool_accepts_every_dashboard_query(helm: Helm, promtool: Path, tmp_path: Path) -> None:
    queries = dashboard_queries(dashboard(render(helm, *DASHBOARD)))
    assert len(queries) >= 10
    rules = [
        {"record": f"zeroscaler:dashboard_query_{i}", "expr": as_prometheus(expr)}
        for i, (_, expr, _) in enumerate(queries)
    ]
    assert all("$" not in r["expr"] for r in rules)
    out = check_rules(promtool, [{"name": "dashboard", "rules": rules}], tmp_path)
    assert f"SUCCESS: {len(rules)} rules found" in out


def test_promtool_refuses_a_query_that_does_not_parse(promtool: Path, tmp_path: Path) -> None:
    broken = [{"name": "g", "rules": [{"record": "r", "expr": "sum by (le (rate(x[5m]))"}]}]
    with pytest.raises(AssertionError, match="parse error"):
        check_rules(promtool, broken, tmp_path)
