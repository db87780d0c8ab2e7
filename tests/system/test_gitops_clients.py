"""What the real clients of GitOps do to a sleeper: kubectl's client-side apply (Argo CD's default
sync) and a Helm upgrade of the operator's own chart. docs/gitops.md says the same in prose."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.controller import (
    ControllerProcess,
    Ref,
    config_for,
    events_of,
    grant_watch,
    state_of,
    wait_asleep,
    wait_event,
    workload_body,
)
from testkit.steps import step
from testkit.waiting import wait_for

pytestmark = pytest.mark.cluster

ARGOCD = "argocd-controller"  # the field manager Argo CD's application controller writes as
MARKER = "marker"  # a later scale-up whose wake proves the controller has seen what came before


def manifest(ns: str, name: str, replicas: int | None, revision: str) -> dict[str, Any]:
    """The Deployment as Git holds it; `replicas=None` leaves the field out."""
    config = config_for("3s", "ConfigMap", watch_namespaces=ns)
    body = workload_body(name, "Deployment", 0, config, "operator")
    body["metadata"]["namespace"] = ns
    body["metadata"]["annotations"]["example.com/git-revision"] = revision
    if replicas is None:
        del body["spec"]["replicas"]
    else:
        body["spec"]["replicas"] = replicas
    return body


def client_side_apply(cluster: Cluster, body: dict[str, Any]) -> None:
    """`kubectl apply` without --server-side: the three-way merge of last-applied, Git and live."""
    cluster.kubectl("apply", f"--field-manager={ARGOCD}", "-f", "-", input=json.dumps(body))


def woken_by(api: k8s.ApiClient, ref: Ref, manager: str) -> int:
    """How many times someone else's scale-up woke it, as told by `manager`'s Events (by count)."""
    return sum(
        e.count or 1
        for e in events_of(api, ref)
        if e.reason == "WokenExternally" and f"field manager {manager}" in (e.message or "")
    )


def assert_left_asleep(api: k8s.ApiClient, ref: Ref, restore: int) -> None:
    """Nothing since the last sleep woke it: the write itself left replicas at 0, and a marker
    scale-up made after it is the only wake the controller reports, so it saw the write first."""
    assert state_of(api, ref)[0] == 0
    before = woken_by(api, ref, ARGOCD)
    k8s.AppsV1Api(api).patch_namespaced_deployment(
        ref.name, ref.namespace, {"spec": {"replicas": restore}}, field_manager=MARKER
    )
    wait_for(functools.partial(woken_by, api, ref, MARKER), f"{ref.name} woken by the marker")
    assert woken_by(api, ref, ARGOCD) == before


def synced_asleep(api: k8s.ApiClient, cluster: Cluster, ns: str, name: str) -> Ref:
    """The first sync creates it with Git's 2 replicas; then it is left idle until asleep."""
    grant_watch(api, ns, [("", ["configmaps"])])
    ref = Ref(ns, name)
    client_side_apply(cluster, manifest(ns, name, 2, "r1"))
    wait_asleep(api, ref, 2)
    return ref


def test_argocd_client_side_sync_of_git_replicas_wakes_a_sleeper(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, controller: ControllerProcess
) -> None:
    ref = synced_asleep(api, cluster, opted_ns, "csa-git")
    # kubectl compares Git with the live object, not with what it applied last: replicas 0 != 2.
    client_side_apply(cluster, manifest(opted_ns, ref.name, 2, "r1"))
    assert state_of(api, ref)[0] == 2
    event = wait_event(api, ref, "WokenExternally", f"field manager {ARGOCD}")
    assert event.type == "Normal"


def test_argocd_respecting_ignored_replicas_leaves_a_sleeper_asleep(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, controller: ControllerProcess
) -> None:
    ref = synced_asleep(api, cluster, opted_ns, "csa-respect")
    # RespectIgnoreDifferences=true: Argo CD puts the live replicas into what it applies.
    client_side_apply(cluster, manifest(opted_ns, ref.name, 0, "r2"))
    assert_left_asleep(api, ref, 2)


def test_replicas_dropped_from_git_reset_once_then_never(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("replicas dropped from Git: deleted and defaulted to 1, a wake; it sleeps again"):
        ref = synced_asleep(api, cluster, opted_ns, "csa-dropped")
        # The last apply had replicas and this one has not: kubectl deletes the field, and the API
        # server defaults it to 1, which is a wake.
        client_side_apply(cluster, manifest(opted_ns, ref.name, None, "r2"))
        assert state_of(api, ref)[0] == 1
        wait_asleep(api, ref, 1)
    with step("replicas named by neither apply: the sleeper is left alone"):
        # Now neither the last apply nor this one names replicas: the sleeper is left alone.
        client_side_apply(cluster, manifest(opted_ns, ref.name, None, "r3"))
        assert_left_asleep(api, ref, 1)


CHART_YAML = "apiVersion: v2\nname: tiny-operator\nversion: {version}\nappVersion: '{version}'\n"
# An operator chart as most are written: replicas from a value, always rendered.
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  annotations:
    zeroscaler.io/idle-timeout: 3s
    zeroscaler.io/watched-kinds: ConfigMap
    zeroscaler.io/watch-namespaces: {{ .Release.Namespace }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      serviceAccountName: operator
      containers:
        - name: main
          image: registry.k8s.io/pause:{{ .Values.tag }}
"""


def write_chart(root: Path, version: str) -> Path:
    chart = root / f"tiny-operator-{version}"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART_YAML.format(version=version))
    (chart / "values.yaml").write_text("replicas: 2\ntag: '3.10'\n")
    (chart / "templates" / "deployment.yaml").write_text(DEPLOYMENT)
    return chart


@pytest.mark.parametrize("helm", ["helm", "helm4"])
def test_a_helm_upgrade_of_the_operators_chart_wakes_it_once(
    api: k8s.ApiClient,
    cluster: Cluster,
    opted_ns: str,
    controller: ControllerProcess,
    tmp_path: Path,
    helm: str,
) -> None:
    """Helm 3 (a three-way merge) and Helm 4 (server-side apply, no --force-conflicts) alike:
    the upgrade of a sleeping operator's chart succeeds, sets the chart's replicas and wakes it;
    the new version runs, and goes back to sleep after its timeout like any other wake."""
    with step("installed by Helm, it sleeps"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        ref = Ref(opted_ns, "tiny")
        home = tmp_path / "helm"
        install = ("-n", opted_ns)
        run = functools.partial(cluster.helm, home, binary=helm)
        run("install", "tiny", str(write_chart(tmp_path, "1.0.0")), *install, check=True)
        wait_asleep(api, ref, 2)
        if helm == "helm4":  # installed server-side: zeroscaler gave spec.replicas up at its sleep
            wait_for(
                lambda: "zeroscaler" not in replicas_owners(api, ref), "spec.replicas given up"
            )
    with step("an upgrade wakes it, once, keeping the count to restore; it sleeps again"):
        new = write_chart(tmp_path, "1.1.0")
        upgraded = run("upgrade", "tiny", str(new), *install, "--set", "tag=3.9")
        assert upgraded.returncode == 0, upgraded.stderr
        event = wait_event(api, ref, "WokenExternally", "field manager helm")
        assert f"Helm (release {opted_ns}/tiny)" in event.message
        assert state_of(api, ref)[1]["zeroscaler.io/restore-replicas"] == "2"
        wait_asleep(api, ref, 2)
        assert woken_by(api, ref, "helm") == 1
    with step("a second upgrade while asleep wakes it as the first did"):
        # A second upgrade while asleep again: as the first (nothing of the first wake stays owned).
        again = run("upgrade", "tiny", str(new), *install, "--set", "tag=3.8")
        assert again.returncode == 0, again.stderr
        wait_for(lambda: woken_by(api, ref, "helm") == 2, "woken by the second upgrade")


def replicas_owners(api: k8s.ApiClient, ref: Ref) -> set[str]:
    """The field managers that own spec.replicas."""
    entries = k8s.AppsV1Api(api).read_namespaced_deployment(ref.name, ref.namespace)
    return {
        e.manager
        for e in entries.metadata.managed_fields or []
        if "f:replicas" in (e.fields_v1 or {}).get("f:spec", {})
    }
