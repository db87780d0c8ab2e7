"""In each mode, every pod setting either changes the pod that runs or is refused by the schema.

Mode combined runs one Deployment (the controller's) whose pods serve the webhook too; mode split
runs two. Each value of the controller's and the webhook's pod settings is set to something other
than its default, and the objects of the pod it applies to (its Deployment, PodDisruptionBudget
and ServiceAccount) must change; each value the mode does not use must be refused with a message
naming what to set instead (`tools.chart_modes`). Every key under `controller`, `webhook` and
`combined` in values.yaml is one or the other, or configures an object other than a pod (listed).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.chart.conftest import CHART, RELEASE, Helm
from tests.chart.rendered import render
from tools.chart_modes import UNUSED, message

Obj = dict[str, Any]
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())
VOLUME = [{"name": "extra", "emptyDir": {}}]
MOUNT = [{"name": "extra", "mountPath": "/extra"}]
# One pod setting -> the value that differs from its default (set with --set-json).
POD_SETTINGS: dict[str, Any] = {
    "replicas": 3,
    "serviceAccount": {"name": "custom-sa"},
    "resources": {"limits": {"memory": "999Mi"}},
    "podDisruptionBudget": {"maxUnavailable": 2},
    "livenessProbe": {"periodSeconds": 17},
    "readinessProbe": {"periodSeconds": 13},
    "terminationGracePeriodSeconds": 77,
    "priorityClassName": "high",
    "podAnnotations": {"a": "b"},
    "podLabels": {"a": "b"},
    "nodeSelector": {"zone": "z1"},
    "tolerations": [{"key": "k", "operator": "Exists"}],
    "affinity": {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}
            ]
        }
    },
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
    ],
    "strategy": {"type": "Recreate"},
    "extraArgs": ["--log-level=debug"],
    "extraEnv": [{"name": "X", "value": "1"}],
    "extraVolumes": VOLUME,
    "extraVolumeMounts": MOUNT,
}
# Settings of one component that shape its pod (flags, ports) besides the common ones.
OWN: dict[str, dict[str, list[str]]] = {
    "controller": {
        "dryRun": ["--set", "controller.dryRun=true"],
        "leaderElection": ["--set", "controller.leaderElection.leaseDuration=20"],
        "metricsPort": ["--set", "controller.metricsPort=9100"],
        "metricsAuthorization": ["--set", "controller.metricsAuthorization=false"],
        "workloadMetrics": ["--set", "controller.workloadMetrics=false"],
    },
    "webhook": {
        "port": ["--set", "webhook.port=9443"],
        "excludeNamespaces": ["--set-json", 'webhook.excludeNamespaces=["kube-system","other"]'],
    },
    "combined": {"resources": ["--set", "combined.resources.limits.memory=999Mi"]},
}
# Values that configure objects other than the pods; tested where those objects are.
ELSEWHERE: dict[str, set[str]] = {
    "controller": {"rbac", "metricsService", "uninstall"},
    "webhook": {
        "failurePolicy",
        "timeoutSeconds",
        "reinvocationPolicy",
        "objectSelector",
        "namespaceSelector",
        "configurationAnnotations",
        "clientConfig",
    },
    "combined": set(),
}
MODES = ("combined", "split")


def flags_for(section: str, key: str) -> list[str]:
    if key in OWN.get(section, {}):
        return OWN[section][key]
    flags = ["--set-json", f"{section}.{key}={json.dumps(POD_SETTINGS[key])}"]
    # A volume needs its mount and a mount its volume: each is set with the other.
    for pair in (("extraVolumes", "extraVolumeMounts"), ("extraVolumeMounts", "extraVolumes")):
        if key == pair[0]:
            flags += ["--set-json", f"{section}.{pair[1]}={json.dumps(POD_SETTINGS[pair[1]])}"]
    return flags


def applies(mode: str) -> list[tuple[str, str]]:
    """(section, key) of every value that must change a pod in `mode`."""
    found = []
    for section in ("controller", "webhook", "combined"):
        for key in DEFAULTS[section]:
            if f"{section}.{key}" in UNUSED[mode] or key in ELSEWHERE[section]:
                continue
            found.append((section, key))
    return found


def pod_objects(objs: list[Obj], mode: str, section: str) -> list[Obj]:
    """What the pod of `section` is in `mode`: its Deployment, budget and ServiceAccount."""
    component = "controller" if mode == "combined" or section == "combined" else section
    names = {f"{RELEASE}-zeroscaler-{component}"}
    kinds = {"Deployment", "PodDisruptionBudget", "ServiceAccount"}
    return [o for o in objs if o["kind"] in kinds and o["metadata"]["name"] in names]


def test_every_value_of_the_components_is_placed_in_each_mode() -> None:
    for mode in MODES:
        for section in ("controller", "webhook", "combined"):
            for key in DEFAULTS[section]:
                dotted = f"{section}.{key}"
                placed = [
                    dotted in UNUSED[mode],
                    key in ELSEWHERE[section],
                    key in OWN.get(section, {}) or key in POD_SETTINGS,
                ]
                assert sum(placed) >= 1, f"{dotted} is neither used nor refused in mode {mode}"
                assert not (placed[0] and placed[1]), dotted


@pytest.mark.parametrize(
    ("mode", "section", "key"), [(m, s, k) for m in MODES for s, k in applies(m)]
)
def test_a_value_that_applies_in_a_mode_changes_the_pod_of_that_mode(
    helm: Helm, mode: str, section: str, key: str
) -> None:
    before = pod_objects(render(helm, mode=mode), mode, section)
    after = pod_objects(render(helm, *flags_for(section, key), mode=mode), mode, section)
    assert before
    assert after != before, f"{section}.{key} changed nothing of the pod in mode {mode}"


@pytest.mark.parametrize(("mode", "dotted"), [(m, k) for m in MODES for k in UNUSED[m]])
def test_a_value_a_mode_does_not_use_is_refused_naming_what_to_set(
    helm: Helm, mode: str, dotted: str
) -> None:
    section, key = dotted.split(".", 1)
    proc = helm.template("--set", f"mode={mode}", *flags_for(section, key))
    assert proc.returncode != 0, f"{dotted} was accepted in mode {mode}"
    said = " ".join(proc.stderr.replace("\\'", "'").split())
    assert message(mode, dotted) in said, proc.stderr


@pytest.mark.parametrize("mode", MODES)
def test_helm_4_accepts_the_defaults_and_refuses_what_a_mode_does_not_use(
    helm: Helm, helm4: Helm, mode: str
) -> None:
    # Helm 4 validates the defaults without their null leaves; Helm 3 with them.
    for pinned in (helm, helm4):
        proc = pinned.template("--set", f"mode={mode}")
        assert proc.returncode == 0, proc.stderr
    dotted = next(iter(UNUSED[mode]))
    section, key = dotted.split(".", 1)
    proc = helm4.template("--set", f"mode={mode}", *flags_for(section, key))
    assert proc.returncode != 0
    assert message(mode, dotted) in " ".join(proc.stderr.replace("\\'", "'").split())
