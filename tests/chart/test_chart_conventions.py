"""The chart by the conventions its users know: metadata, extra volumes, the deployment strategy,
the webhook's namespace selector, per-workload metrics, and a Grafana dashboard whose every query
asks only for what the components expose."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.exposed_metrics import exposed
from testkit.promql import check, dashboard_problems, dashboard_queries
from tests.chart.conftest import CHART, KUBE_VERSION, NAMESPACE, RELEASE, Helm
from tests.chart.rendered import (
    APP_VERSION,
    DASHBOARD,
    MONITORING,
    RULES,
    container,
    dashboard,
    deployment,
    only,
    render,
    webhook_entry,
)
from zeroscaler.controller.flags import parse_settings

CA_VOLUME = {"name": "corporate-ca", "configMap": {"name": "corporate-ca-bundle"}}
CA_MOUNT = {"name": "corporate-ca", "mountPath": "/etc/ssl/corporate", "readOnly": True}
Obj = dict[str, Any]


def _controller_args(objs: list[Obj]) -> list[str]:
    args: list[str] = container(deployment(objs, "controller"))["args"]
    args = [a.replace("$(POD_NAME)", "pod-0") for a in args]
    return args[: args.index("--")] if "--" in args else args


# --- the Grafana dashboard -------------------------------------------------------------------


def test_no_dashboard_unless_asked(helm: Helm) -> None:
    objs = render(helm, mode=None)
    assert not [o for o in objs if o["metadata"]["name"].endswith("-dashboard")]


@pytest.mark.parametrize("mode", ["combined", "split"])
def test_every_dashboard_query_asks_only_for_exposed_metrics_and_labels(
    helm: Helm, mode: str
) -> None:
    board = dashboard(render(helm, *DASHBOARD, mode=mode))
    assert len(dashboard_queries(board)) >= 10
    assert dashboard_problems(board, exposed()) == []
    titles = " ".join(p["title"] for p in board["panels"]).lower()
    for subject in ("asleep and awake", "wakes by reason", "wake latency", "saved", "failed"):
        assert subject in titles


def test_the_dashboard_is_labelled_for_the_grafana_sidecar(helm: Helm) -> None:
    config = only(render(helm, *DASHBOARD), "ConfigMap", f"{RELEASE}-zeroscaler-dashboard")
    assert config["metadata"]["namespace"] == NAMESPACE
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "annotations" not in config["metadata"]
    moved = only(
        render(
            helm, *DASHBOARD,
            "--set", "monitoring.grafanaDashboard.namespace=grafana",
            "--set-json", 'monitoring.grafanaDashboard.labels={"dashboards": "ops"}',
            "--set", "monitoring.grafanaDashboard.annotations.grafana_folder=zeroscaler",
        ),
        "ConfigMap",
        f"{RELEASE}-zeroscaler-dashboard",
    )  # fmt: skip
    assert moved["metadata"]["namespace"] == "grafana"
    assert moved["metadata"]["labels"]["dashboards"] == "ops"
    assert moved["metadata"]["annotations"] == {"grafana_folder": "zeroscaler"}


@pytest.mark.parametrize("certificates", ["job", "certManager"])
def test_every_alert_asks_only_for_exposed_metrics_and_labels(
    helm: Helm, certificates: str
) -> None:
    rule = only(
        render(helm, *RULES, "--set", f"certificates.mode={certificates}"), "PrometheusRule"
    )
    alerts = rule["spec"]["groups"][0]["rules"]
    assert len(alerts) >= 6
    metrics = exposed()
    assert [str(p) for a in alerts for p in check(a["alert"], a["expr"], metrics)] == []


def test_every_alert_links_to_its_runbook_section(helm: Helm) -> None:
    runbooks = (CHART.parents[1] / "docs" / "runbooks.md").read_text()
    lines = runbooks.splitlines()
    headings = {line[3:].strip().lower() for line in lines if line.startswith("## ")}
    rule = only(render(helm, *RULES), "PrometheusRule")
    for alert in rule["spec"]["groups"][0]["rules"]:
        url = alert["annotations"]["runbook_url"]
        base, _, anchor = url.partition("#")
        assert base.endswith("/docs/runbooks.md")
        assert anchor == alert["alert"].lower()
        assert anchor in headings, f"docs/runbooks.md has no section {alert['alert']}"
    moved = only(
        render(helm, *RULES, "--set", "monitoring.prometheusRule.runbookBaseUrl=https://wiki/zs"),
        "PrometheusRule",
    )
    urls = {a["annotations"]["runbook_url"] for a in moved["spec"]["groups"][0]["rules"]}
    assert all(u.startswith("https://wiki/zs#") for u in urls)


def test_extra_objects_are_installed_as_given_and_templated(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "extra.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "extraObjects": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "as-map", "namespace": "{{ .Release.Namespace }}"},
                        "data": {"a": "1"},
                    },
                    "apiVersion: v1\nkind: ConfigMap\n"
                    "metadata:\n  name: from-{{ .Release.Name }}\n",
                ]
            }
        )
    )
    objs = render(helm, "-f", str(values), mode=None)
    as_map = only(objs, "ConfigMap", "as-map")
    assert as_map["metadata"]["namespace"] == NAMESPACE
    assert as_map["data"] == {"a": "1"}
    only(objs, "ConfigMap", f"from-{RELEASE}")
    proc = helm.template("--set-json", 'extraObjects=[{"kind": "ConfigMap"}]')
    assert proc.returncode != 0
    assert "apiVersion" in proc.stderr


# --- metrics per workload --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["combined", "split"])
def test_workload_metrics_are_on_by_default_and_a_value_turns_them_off(
    helm: Helm, mode: str
) -> None:
    assert parse_settings(_controller_args(render(helm, mode=mode))).workload_metrics is True
    off = render(helm, "--set", "controller.workloadMetrics=false", mode=mode)
    assert parse_settings(_controller_args(off)).workload_metrics is False


def test_the_controller_monitor_keeps_each_workloads_namespace_label(helm: Helm) -> None:
    monitor = only(render(helm, *MONITORING), "ServiceMonitor", f"{RELEASE}-zeroscaler-controller")
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True


# --- extra volumes, strategy, the webhook's namespaces -----------------------------------------


def _with_ca(component: str) -> list[str]:
    return [
        "--set-json", f"{component}.extraVolumes=[{json.dumps(CA_VOLUME)}]",
        "--set-json", f"{component}.extraVolumeMounts=[{json.dumps(CA_MOUNT)}]",
    ]  # fmt: skip


def _volumes(dep: Obj) -> tuple[list[Obj], list[Obj]]:
    pod = dep["spec"]["template"]["spec"]
    return pod["volumes"], container(dep)["volumeMounts"]


@pytest.mark.parametrize("component", ["controller", "webhook"])
def test_extra_volumes_are_mounted_in_their_components_pods_only(
    helm: Helm, component: str
) -> None:
    objs = render(helm, *_with_ca(component))
    other = "webhook" if component == "controller" else "controller"
    volumes, mounts = _volumes(deployment(objs, component))
    assert CA_VOLUME in volumes
    assert CA_MOUNT in mounts
    assert {"name": "tmp", "mountPath": "/tmp"} in mounts  # the chart's own stay
    volumes, mounts = _volumes(deployment(objs, other))
    assert CA_VOLUME not in volumes
    assert CA_MOUNT not in mounts


def test_in_combined_mode_the_pods_mount_both_components_extra_volumes(helm: Helm) -> None:
    hooks = {"name": "hooks", "emptyDir": {}}
    hook_mount = {"name": "hooks", "mountPath": "/hooks"}
    objs = render(
        helm, *_with_ca("controller"),
        "--set-json", f"webhook.extraVolumes=[{json.dumps(hooks)}]",
        "--set-json", f"webhook.extraVolumeMounts=[{json.dumps(hook_mount)}]",
        mode="combined",
    )  # fmt: skip
    volumes, mounts = _volumes(deployment(objs, "controller"))
    assert CA_VOLUME in volumes
    assert hooks in volumes
    assert CA_MOUNT in mounts
    assert hook_mount in mounts


@pytest.mark.parametrize("mode", ["combined", "split"])
def test_a_strategy_value_replaces_the_rolling_update(helm: Helm, mode: str) -> None:
    webhook = ["--set", "webhook.strategy.rollingUpdate.maxUnavailable=50%"]
    objs = render(
        helm,
        "--set", "controller.strategy.type=Recreate",
        *(webhook if mode == "split" else []),
        mode=mode,
    )  # fmt: skip
    assert deployment(objs, "controller")["spec"]["strategy"] == {"type": "Recreate"}
    if mode == "split":
        webhook = deployment(objs, "webhook")["spec"]["strategy"]
        assert webhook == {"rollingUpdate": {"maxUnavailable": "50%"}}


def test_a_replaced_namespace_selector_still_leaves_out_the_excluded_namespaces(
    helm: Helm,
) -> None:
    excluded = {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["zeroscaler", "kube-system"],  # the release's namespace, and excludeNamespaces
    }
    own = {"key": "tier", "operator": "In", "values": ["apps"]}
    selector = {"matchLabels": {"team": "platform"}, "matchExpressions": [own]}
    entry = webhook_entry(
        render(helm, "--set-json", f"webhook.namespaceSelector={json.dumps(selector)}")
    )
    assert entry["namespaceSelector"] == {
        "matchLabels": {"team": "platform"},
        "matchExpressions": [own, excluded],
    }
    only_expressions = {"matchExpressions": [own]}
    entry = webhook_entry(
        render(helm, "--set-json", f"webhook.namespaceSelector={json.dumps(only_expressions)}")
    )
    assert entry["namespaceSelector"] == {"matchExpressions": [own, excluded]}
    default = webhook_entry(render(helm))["namespaceSelector"]
    assert default == {
        "matchLabels": {"zeroscaler.io/enabled": "true"},
        "matchExpressions": [excluded],
    }


@pytest.mark.parametrize(
    ("values", "named"),
    [
        (["--set", "controller.strategy.type=Sometimes"], "type"),
        (["--set-json", 'webhook.strategy={"maxSurge": 1}'], "maxSurge"),
        (["--set-json", 'controller.extraVolumes=[{"configMap": {"name": "x"}}]'], "name"),
        (["--set-json", 'webhook.extraVolumeMounts=[{"name": "x"}]'], "mountPath"),
        (["--set", "webhook.namespaceSelector.matchNames=a"], "matchNames"),
        (["--set", "controller.workloadMetrics=maybe"], "workloadMetrics"),
        (["--set", "monitoring.grafanaDashboard.folder=x"], "folder"),
    ],
)
def test_the_schema_refuses_malformed_new_values(helm: Helm, values: list[str], named: str) -> None:
    proc = helm.template(*values)
    assert proc.returncode != 0
    assert named in proc.stderr


# --- Chart.yaml ------------------------------------------------------------------------------


def test_chart_metadata_names_its_home_sources_maintainers_icon_and_artifact_hub_fields() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["home"].startswith("https://")
    assert chart["sources"]
    assert all(s.startswith("https://") for s in chart["sources"])
    assert chart["icon"].startswith("https://")
    assert chart["maintainers"]
    assert all(m["name"] for m in chart["maintainers"])
    annotations = chart["annotations"]
    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    [image] = yaml.safe_load(annotations["artifacthub.io/images"])
    # The image Artifact Hub lists is the one the chart's defaults run.
    values = yaml.safe_load((CHART / "values.yaml").read_text())["image"]
    assert image["image"] == f"{values['registry']}/{values['repository']}:{chart['appVersion']}"
    links = yaml.safe_load(annotations["artifacthub.io/links"])
    assert {link["name"] for link in links} >= {"Documentation"}


# --- NOTES.txt -------------------------------------------------------------------------------


# A template that renders NOTES.txt into a ConfigMap: `helm template` leaves NOTES.txt out.
NOTES_AS_CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  notes: {{ tpl (.Files.Get "notes/NOTES.txt") . | quote }}
"""


def notes(helm: Helm, tmp_path: Path, *values: str) -> str:
    """NOTES.txt as `helm install` prints it."""
    copy = tmp_path / CHART.name
    shutil.copytree(CHART, copy)
    (copy / "notes").mkdir()
    (copy / "templates" / "NOTES.txt").rename(copy / "notes" / "NOTES.txt")
    (copy / "templates" / "notes.yaml").write_text(NOTES_AS_CONFIGMAP)
    cmd = [str(helm.binary), "template", RELEASE, str(copy), "--namespace", NAMESPACE]
    cmd += ["--kube-version", KUBE_VERSION, "--show-only", "templates/notes.yaml", *values]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=helm.env)
    assert proc.returncode == 0, proc.stderr
    text: str = yaml.safe_load(proc.stdout)["data"]["notes"]
    return text


def test_the_notes_say_existing_workloads_are_annotated_by_the_controller_at_once(
    helm: Helm, tmp_path: Path
) -> None:
    text = " ".join(notes(helm, tmp_path).split())
    assert "already there are annotated by the controller within seconds" in text
    assert "next update" not in text
    assert "kubectl label namespace <namespace> zeroscaler.io/enabled=true" in text
    assert f"pipx install kube-zeroscaler=={APP_VERSION}" in text
    assert "zeroscaler check -n <namespace>" in text
    assert "with series for each managed workload" in text
    assert f"Service {RELEASE}-zeroscaler-controller-metrics" in text


def test_the_notes_say_what_monitoring_is_on(helm: Helm, tmp_path: Path) -> None:
    text = " ".join(
        notes(
            helm, tmp_path, *MONITORING, *DASHBOARD, "--set", "controller.workloadMetrics=false"
        ).split()
    )
    assert "cluster totals only (controller.workloadMetrics is false)" in text
    assert "a ServiceMonitor scrapes them" in text
    assert f"ConfigMap {RELEASE}-zeroscaler-dashboard holds a Grafana dashboard" in text
