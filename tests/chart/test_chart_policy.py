"""The policy ConfigMap the chart renders: its documented defaults, rules from values, and none.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chart.conftest import RELEASE, Helm
from tests.chart.rendered import (
    Obj,
    only,
    render,
)
from zeroscaler.core.policy import DEFAULT_IGNORE, parse_policy

# --- policy --------------------------------------------------------------------------------------


def _policy(objs: list[Obj]) -> str:
    config = only(objs, "ConfigMap", f"{RELEASE}-zeroscaler-policy")
    assert config["metadata"]["labels"]["zeroscaler.io/policy"] == "true"
    text: str = config["data"]["policy.yaml"]
    return text


def test_policy_configmap_holds_the_documented_defaults(helm: Helm) -> None:
    doc = parse_policy(_policy(render(helm)), "chart")
    assert doc.idle_timeout == 15 * 60
    assert doc.min_idle_timeout == 60
    assert doc.max_idle_timeout == 24 * 3600
    assert doc.from_rbac is True
    assert doc.ignore == DEFAULT_IGNORE
    assert doc.max_kinds == 50
    assert doc.rules == ()


def test_policy_rules_from_values_reach_the_configmap(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        json.dumps(
            {
                "policy": {
                    "defaults": {"idleTimeout": "30m"},
                    "rules": [
                        {
                            "name": "dev-sleeps-fast",
                            "namespaceSelector": {"matchLabels": {"env": "dev"}},
                            "idleTimeout": "5m",
                        },
                        {
                            "name": "prod-never-sleeps",
                            "namespaceSelector": {"matchLabels": {"env": "prod"}},
                            "enabled": False,
                        },
                    ],
                }
            }
        )
    )
    doc = parse_policy(_policy(render(helm, "-f", str(values))), "chart")
    assert doc.idle_timeout == 30 * 60
    assert [(r.name, r.idle_timeout, r.enabled) for r in doc.rules] == [
        ("dev-sleeps-fast", 300, None),
        ("prod-never-sleeps", None, False),
    ]
    assert doc.rules[0].matches({"env": "dev"}, {})


def test_policy_configmap_can_be_left_out(helm: Helm) -> None:
    objs = render(helm, "--set", "policy.create=false")
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"] == [
        f"{RELEASE}-zeroscaler-activator-requests"
    ]
