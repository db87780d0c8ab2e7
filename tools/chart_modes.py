"""The values a mode does not use, refused by the chart's schema with what to set instead.

In mode combined one Deployment (the controller's) runs both components, so the webhook's own pod
settings and `controller.resources` (the pod is sized by `combined.resources`) would do nothing;
in mode split, `combined.resources` would do nothing. Helm validates the values merged with the
defaults, so the schema accepts each such value only at its default, or else fails with a message
naming what to set: `python -m tools.chart_modes` writes those rules into values.schema.json
(`--check` exits 1 when the schema is stale), from the table below and values.yaml's defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "zeroscaler"
COMBINED_POD = "the controller's pods serve the webhook too"
# mode -> value -> (why it does nothing there, what to set instead)
UNUSED: dict[str, dict[str, tuple[str, str]]] = {
    "combined": {
        "controller.resources": ("the pods are sized by combined.resources", "combined.resources"),
        **{
            f"webhook.{key}": (COMBINED_POD, f"controller.{key}")
            for key in (
                "replicas",
                "serviceAccount",
                "podDisruptionBudget",
                "livenessProbe",
                "readinessProbe",
                "terminationGracePeriodSeconds",
                "priorityClassName",
                "podAnnotations",
                "podLabels",
                "nodeSelector",
                "tolerations",
                "affinity",
                "topologySpreadConstraints",
                "strategy",
            )
        },
        # The webhook's memory is part of the one pod's.
        "webhook.resources": (COMBINED_POD, "combined.resources"),
    },
    "split": {
        "combined.resources": (
            "each component's Deployment has its own",
            "controller.resources and webhook.resources",
        ),
    },
}


def message(mode: str, key: str) -> str:
    why, instead = UNUSED[mode][key]
    return f"{key} is not used in mode {mode} ({why}): set {instead} instead"


def has_null(value: Any) -> bool:
    if isinstance(value, dict):
        return any(v is None or has_null(v) for v in value.values())
    return False


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return value


def rules(defaults: dict[str, Any]) -> list[dict[str, Any]]:
    """One if/then a mode: each unused value must be its default, or the message fails."""
    found = []
    for mode, unused in UNUSED.items():
        then: dict[str, Any] = {}
        for key in unused:
            section, name = key.split(".", 1)
            default = defaults[section][name]
            # Helm 4 drops a default's null leaves before validating, Helm 3 keeps them.
            accepted = [default] + ([without_nulls(default)] if has_null(default) else [])
            node = then.setdefault(section, {"properties": {}})
            node["properties"][name] = {
                "anyOf": [*({"const": d} for d in accepted), {"const": message(mode, key)}]
            }
        found.append(
            {
                "if": {"properties": {"mode": {"const": mode}}},
                "then": {"properties": then},
            }
        )
    return found


def updated(schema: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "allOf": rules(defaults)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.chart_modes", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the schema is stale")
    args = parser.parse_args(argv)
    path = CHART / "values.schema.json"
    schema = json.loads(path.read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    want = updated(schema, defaults)
    if args.check:
        if want != schema:
            print(f"{path} is stale: run python -m tools.chart_modes", file=sys.stderr)
            return 1
        return 0
    path.write_text(json.dumps(want, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
