"""The chart README's values table is made from values.yaml: fresh, and stale when they part."""

from __future__ import annotations

import json

from tools import chart_readme
from tools.chart_readme import CHART, descriptions, table, updated

SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def test_the_readme_table_is_what_values_yaml_makes() -> None:
    assert chart_readme.main(["--check"]) == 0, "run python -m tools.chart_readme"


def test_a_comment_or_a_default_changed_in_values_yaml_makes_the_readme_stale() -> None:
    readme = (CHART / "README.md").read_text()
    values = (CHART / "values.yaml").read_text()
    assert updated(readme, values, SCHEMA) == readme
    reworded = values.replace("# Port for /healthz", "# The port for /healthz", 1)
    assert reworded != values
    assert updated(readme, reworded, SCHEMA) != readme
    moved = values.replace("metricsPort: 8080", "metricsPort: 9090", 1)
    assert "| `controller.metricsPort` | int | `9090` |" in updated(readme, moved, SCHEMA)


def test_every_value_of_the_chart_has_a_row() -> None:
    rows = {
        line.split("`")[1]
        for line in table((CHART / "values.yaml").read_text(), SCHEMA).splitlines()[2:]
    }
    for key in (
        "controller.workloadMetrics",
        "controller.extraVolumes",
        "controller.extraVolumeMounts",
        "controller.strategy",
        "webhook.extraVolumes",
        "webhook.extraVolumeMounts",
        "webhook.strategy",
        "webhook.namespaceSelector",
        "webhook.configurationAnnotations",
        "monitoring.grafanaDashboard.enabled",
        "controller.nodeSelector",  # a map of labels is one value, not a section
        "controller.resources.requests",
    ):
        assert key in rows, key


def test_a_description_is_the_comment_above_its_key_at_its_indentation() -> None:
    values = """\
# The top.
top:
  # Said of a.
  # Two lines.
  a: 1
  list: []
  #  - name: an example of list, not a description of b
  #    value: 2
  b: 2
    # too deep to be b's sibling's
  c: 3

# Of d, after a blank line.
d: 4
"""
    assert descriptions(values) == {
        "top": "The top.",
        "top.a": "Said of a. Two lines.",
        "top.list": "",
        "top.b": "",
        "top.c": "",
        "d": "Of d, after a blank line.",
    }


def test_a_pipe_in_a_description_does_not_break_the_table() -> None:
    values = "# a | b\nkey: x\n"
    assert '| `key` | string | `"x"` | a \\| b |' in table(values, {})
