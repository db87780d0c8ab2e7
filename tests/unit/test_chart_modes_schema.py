"""The schema's mode rules are made from tools.chart_modes' table and values.yaml's defaults."""

from __future__ import annotations

import json

import yaml

from tools import chart_modes
from tools.chart_modes import CHART, UNUSED, message, rules


def test_the_schema_holds_the_rules_the_table_makes() -> None:
    assert chart_modes.main(["--check"]) == 0, "run python -m tools.chart_modes"


def test_each_unused_value_is_accepted_only_at_its_default_or_refused_with_its_message() -> None:
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    made = {
        r["if"]["properties"]["mode"]["const"]: r["then"]["properties"] for r in rules(defaults)
    }
    assert set(made) == {"combined", "split"}
    for mode, unused in UNUSED.items():
        for dotted in unused:
            section, key = dotted.split(".", 1)
            choice = made[mode][section]["properties"][key]["anyOf"]
            assert choice[0] == {"const": defaults[section][key]}
            assert choice[-1] == {"const": message(mode, dotted)}
    # A default with null leaves is accepted without them too (Helm 4 drops them).
    pdb = made["combined"]["webhook"]["properties"]["podDisruptionBudget"]["anyOf"]
    assert {"const": {"enabled": True, "maxUnavailable": 1}} in pdb
    assert "set combined.resources instead" in message("combined", "controller.resources")
    assert "set controller.replicas instead" in message("combined", "webhook.replicas")
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["mode"]["enum"] == sorted(UNUSED)
