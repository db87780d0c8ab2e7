"""`zeroscaler status`, `sleep`, `wake` and `explain` against the real API server, with the real
controller where the test is about how the two work together; also as `kubectl zeroscaler`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from localcluster.processes import free_port
from testkit.controller import (
    WIDGET,
    WIDGET_GROUP,
    ControllerProcess,
    Ref,
    assert_not_activity,
    config_for,
    create_configmap,
    create_workload,
    events_of,
    grant_watch,
    reasons,
    state_of,
    wait_asleep,
    wait_woken,
)
from testkit.standin import service_account_kubeconfig
from testkit.steps import step
from testkit.waiting import wait_for
from testkit.webhook import times_reported
from zeroscaler.core.annotations import LEADER_ANNOTATION

pytestmark = pytest.mark.cluster

BIN = Path(sys.executable).parent
ZEROSCALER = BIN / "zeroscaler"


def cli(
    *args: str, kubeconfig: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    flags = [f"--kubeconfig={kubeconfig}"] if kubeconfig else []
    return subprocess.run(
        [str(ZEROSCALER), *args, *flags],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def items(kubeconfig: Path, *args: str) -> dict[str, dict[str, Any]]:
    doc = json.loads(ok(cli("status", "-o", "json", *args, kubeconfig=kubeconfig)))
    return {f"{i['namespace']}/{i['name']}": i for i in doc["items"]}


def server_now(cluster: Cluster) -> datetime:
    with cluster.client() as http:
        return datetime.strptime(http.get("/version").headers["Date"], "%a, %d %b %Y %H:%M:%S %Z")


def next_second(cluster: Cluster) -> None:
    """Wait until the API server's clock (to the second) has moved on."""
    start = server_now(cluster)
    wait_for(lambda: server_now(cluster) > start, "the API server's clock to move on")


def context_kubeconfig(cluster: Cluster, namespace: str, path: Path) -> Path:
    """The admin kubeconfig with its context set to `namespace`."""
    doc = yaml.safe_load(cluster.kubeconfig.read_text())
    current = doc["current-context"]
    for ctx in doc["contexts"]:
        if ctx["name"] == current:
            ctx["context"]["namespace"] = namespace
    path.write_text(yaml.safe_dump(doc))
    return path


def admin_name(api: k8s.ApiClient) -> str:
    review = k8s.AuthenticationV1Api(api).create_self_subject_review({})
    return str(review.status.user_info.username)


def test_status_in_a_namespace_all_namespaces_and_json(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, ns: str, tmp_path: Path, widgets: None
) -> None:
    with step(
        "a workload with activity seen, one not managed, and a change where it may not watch"
    ):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        config = config_for("1h", "ConfigMap", watch_namespaces=f"{opted_ns}, {ns}")
        create_workload(api, opted_ns, "watcher", config, replicas=2)
        create_workload(api, opted_ns, "plain", {}, replicas=1)  # not managed: not shown
        created = k8s.AppsV1Api(api).read_namespaced_deployment("watcher", opted_ns)
        next_second(cluster)
        create_configmap(api, opted_ns, "activity")
        cm = k8s.CoreV1Api(api).read_namespaced_config_map("activity", opted_ns)
        assert cm.metadata.creation_timestamp > created.metadata.creation_timestamp
        next_second(cluster)
        # Where the ServiceAccount may not watch: the controller would not count it, nor does
        # status.
        create_configmap(api, ns, "not-seen")

    with step("status -o json in its namespace shows the managed one, idle since its activity"):
        found = items(cluster.kubeconfig, "-n", opted_ns)
        assert set(found) == {f"{opted_ns}/watcher"}
        item = found[f"{opted_ns}/watcher"]
        assert item["idleSince"] == cm.metadata.creation_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert (item["state"], item["replicas"], item["timeoutSeconds"]) == ("awake", 2, 3600.0)
        assert item["idleComplete"] is True

    with step("status prints a table"):
        table = ok(cli("status", "-n", opted_ns, kubeconfig=cluster.kubeconfig))
        header, row = table.splitlines()
        assert header.split()[:4] == ["NAME", "KIND", "STATE", "REPLICAS"]
        assert row.split()[:4] == ["watcher", "Deployment", "awake", "2"]

    with step("the context's namespace is the default"):
        # The context's namespace is the default, as kubectl's is.
        own = context_kubeconfig(cluster, opted_ns, tmp_path / "ctx.kubeconfig")
        assert ok(cli("status", kubeconfig=own)).splitlines()[1].startswith("watcher ")
    with step("status -A shows every namespace's managed workloads"):
        everywhere = items(cluster.kubeconfig, "-A")
        assert f"{opted_ns}/watcher" in everywhere
        assert f"{opted_ns}/plain" not in everywhere
        header = ok(cli("status", "-A", "-o", "wide", kubeconfig=cluster.kubeconfig)).splitlines()[
            0
        ]
        assert header.startswith("NAMESPACE ")
        assert "WATCHED KINDS" in header


def test_a_person_sleeps_and_wakes_a_workload_and_the_controller_keeps_it(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, ns: str, controller: ControllerProcess
) -> None:
    with step("the controller manages an awake workload"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        ref = create_workload(
            api, opted_ns, "steered", config_for("1h", "ConfigMap", watch_namespaces=opted_ns)
        )
        wait_for(
            lambda: controller.metric("zeroscaler_managed_workloads", state="awake") == 1,
            "the controller managing it",
        )
        next_second(cluster)
        user = admin_name(api)

    with step("a person puts it to sleep, with an Event naming them, and the controller sees it"):
        said = ok(cli("sleep", f"{opted_ns}/steered", kubeconfig=cluster.kubeconfig))
        assert "put to sleep, 3 replicas remembered" in said
        wait_asleep(api, ref, 3)
        assert times_reported(events_of(api, ref), "ManualSleep") == 1
        [event] = [e for e in events_of(api, ref) if e.reason == "ManualSleep"]
        assert event.message.startswith(f"put to sleep by {user} (zeroscaler sleep)")
        assert event.source.component == "zeroscaler-cli"
        wait_for(
            lambda: controller.metric("zeroscaler_managed_workloads", state="asleep") == 1,
            "the controller seeing it asleep",
        )
    with step("it stays asleep: neither a change elsewhere nor a leader lock is activity"):
        # The controller has decided about it since; it stays asleep until activity. A change
        # outside its scope is never received; a leader lock in its scope is, and is not activity.
        create_configmap(api, ns, "elsewhere")
        lock = {LEADER_ANNOTATION: "{}"}
        assert_not_activity(
            controller,
            "configmaps",
            lambda: create_configmap(api, opted_ns, "lock", annotations=lock),
        )
        assert state_of(api, ref)[0] == 0
        assert "Woken" not in reasons(api, ref)
        assert "already asleep" in ok(
            cli("sleep", f"{opted_ns}/steered", kubeconfig=cluster.kubeconfig)
        )

    with step("a change in its scope wakes it"):
        create_configmap(api, opted_ns, "activity")
        wait_woken(api, ref, f"ConfigMap {opted_ns}/activity created", 3)


def test_a_manual_wake_restarts_the_idle_clock(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("it sleeps"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        ref = create_workload(
            api, opted_ns, "napper", config_for("5s", "ConfigMap", watch_namespaces=opted_ns)
        )
        wait_asleep(api, ref, 3)
        user = admin_name(api)

    with step("a person wakes it, with an Event naming them"):
        said = ok(cli("wake", f"{opted_ns}/napper", kubeconfig=cluster.kubeconfig))
        assert "woken to 3 replicas" in said
        assert times_reported(events_of(api, ref), "ManualWake") == 1
        [event] = [e for e in events_of(api, ref) if e.reason == "ManualWake"]
        assert event.message.startswith(f"woken by {user} (zeroscaler wake): scaled from 0 to 3")
        woken_at = event.first_timestamp  # written just after the wake, to the second
    with step("it sleeps again a whole timeout after the wake"):
        # It sleeps again, but a whole timeout after the person woke it, not at once.
        woken = woken_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        asleep_since = wait_for(
            lambda: (
                (since := state_of(api, ref)[1].get("zeroscaler.io/asleep-since", "")) > woken
                and since
            ),
            "the next sleep",
        )
        gap = datetime.fromisoformat(asleep_since) - woken_at
        assert gap.total_seconds() >= 4, (woken_at, asleep_since)  # at once, it would be 0 or 1
        status = items(cluster.kubeconfig, "-n", opted_ns)[f"{opted_ns}/napper"]
        assert status["lastWakeReason"] == f"woken by {user} (zeroscaler wake)"


def test_explain_names_kinds_scopes_verdicts_and_warnings(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, ns: str, widgets: None
) -> None:
    with step("a workload with watched kinds, a bad annotation and a Warning Event"):
        grant_watch(api, opted_ns, [("", ["configmaps"]), (WIDGET_GROUP, ["widgets"])])
        config = config_for(
            "10m",
            f"{WIDGET}, ConfigMap, Gadget.nowhere.example.com",
            watch_namespaces=f"{opted_ns}, {ns}",
            wake_replicas="lots",
        )
        ref = create_workload(api, opted_ns, "explained", config)
        uid = k8s.AppsV1Api(api).read_namespaced_deployment(ref.name, opted_ns).metadata.uid
        k8s.CoreV1Api(api).create_namespaced_event(
            opted_ns,
            {
                "metadata": {"generateName": "explained."},
                "involvedObject": {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": ref.name,
                    "namespace": opted_ns,
                    "uid": uid,
                },
                "type": "Warning",
                "reason": "NotPermitted",
                "message": "a warning the controller wrote",
                "source": {"component": "zeroscaler-controller"},
            },
        )
    with step("explain names its kinds, scopes, verdicts and warnings"):
        text = ok(cli("explain", f"{opted_ns}/explained", kubeconfig=cluster.kubeconfig))
        assert f"Deployment {opted_ns}/explained: awake (3 replicas)" in text
        assert "Managed: yes (namespace opted in); idle timeout 10m." in text
        assert f"{WIDGET} (watched, widgets.{WIDGET_GROUP}): counts in namespace {opted_ns}" in text
        account = f"ServiceAccount {opted_ns}/operator may watch it: {opted_ns}: yes, {ns}: no"
        assert account in text
        assert "Gadget.nowhere.example.com (watched): not served" in text
        assert "Sleeps: at " in text
        assert "zeroscaler.io/wake-replicas: 'lots' is not a whole number" in text
        assert "Event NotPermitted, last at " in text


def test_kubectl_forms_name_the_workload_and_flags_go_anywhere(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str
) -> None:
    # A namespace called `deployment` with a `foo` of its own: `deployment/foo` is still the type.
    core = k8s.CoreV1Api(api)
    labels = {"zeroscaler.io/enabled": "true"}
    core.create_namespace({"metadata": {"name": "deployment", "labels": labels}})
    try:
        with step(
            "a workload foo in a namespace called deployment, and one in the test's namespace"
        ):
            decoy = create_workload(api, "deployment", "foo", config_for("1h", "ConfigMap"))
            ref = create_workload(api, opted_ns, "foo", config_for("1h", "ConfigMap"))
            context = yaml.safe_load(cluster.kubeconfig.read_text())["current-context"]

        with step("connection flags before the subcommand, the type in the target"):
            # Connection flags before the subcommand, the type in the target.
            flags = [f"--kubeconfig={cluster.kubeconfig}", "--context", context, "-n", opted_ns]
            said = ok(cli(*flags, "sleep", "deployment/foo"))
            assert said.startswith(f"Deployment {opted_ns}/foo: put to sleep")
            assert state_of(api, ref)[0] == 0
            assert state_of(api, decoy)[0] == 3
            savings = json.loads(ok(cli(*flags, "status", "--savings", "-o", "json")))["items"]
            assert [(i["namespace"], i["asleep"], i["replicasNotRunning"]) for i in savings] == [
                (opted_ns, 1, 3)
            ]

        with step("the short name with -n after it, then NAMESPACE/NAME"):
            # The short name, and -n after it; then the old NAMESPACE/NAME form.
            assert "woken to 3 replicas" in ok(
                cli("wake", "deploy/foo", "-n", opted_ns, kubeconfig=cluster.kubeconfig)
            )
            assert "put to sleep" in ok(
                cli("sleep", f"{opted_ns}/foo", kubeconfig=cluster.kubeconfig)
            )
            assert state_of(api, ref)[0] == 0
            assert state_of(api, decoy)[0] == 3

        with step("the wrong type is a failure naming it, an unreadable form a usage error"):
            # The wrong type is a failure naming it; a form it cannot read is a usage error.
            missing = one_line_error(
                cli("-n", opted_ns, "explain", "sts/foo", kubeconfig=cluster.kubeconfig)
            )
            assert missing == f"zeroscaler explain: no StatefulSet {opted_ns}/foo"
            wrong = cli("wake", "pod/foo", kubeconfig=cluster.kubeconfig)
            assert wrong.returncode == 2
            assert "zeroscaler manages Deployments and StatefulSets" in wrong.stderr
            assert state_of(api, ref)[0] == 0
    finally:
        core.delete_namespace("deployment")


def test_no_kubeconfig_unreachable_and_forbidden_are_one_line(
    api: k8s.ApiClient, cluster: Cluster, opted_ns: str, tmp_path: Path
) -> None:
    with step("no kubeconfig is one line"):
        empty = {"HOME": str(tmp_path), "KUBECONFIG": "", "KUBERNETES_SERVICE_HOST": ""}
        message = one_line_error(cli("status", env=empty))
        assert message.startswith("zeroscaler status: kubeconfig ")
        assert message.endswith("does not exist")

    with step("an API server out of reach is one line"):
        doc = yaml.safe_load(cluster.kubeconfig.read_text())
        for c in doc["clusters"]:
            c["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
        nowhere = tmp_path / "nowhere.kubeconfig"
        nowhere.write_text(yaml.safe_dump(doc))
        assert "cannot reach the API server at https://127.0.0.1:" in one_line_error(
            cli("status", kubeconfig=nowhere)
        )

    with step("a ServiceAccount that may do nothing gets one line, and nothing changes"):
        k8s.CoreV1Api(api).create_namespaced_service_account(
            opted_ns, {"metadata": {"name": "nobody"}}
        )
        nobody = service_account_kubeconfig(cluster, opted_ns, "nobody", tmp_path / "sa.kubeconfig")
        message = one_line_error(cli("status", kubeconfig=nobody))
        denied = "zeroscaler status: access denied: you may not list deployments.apps"
        assert message.startswith(f"{denied} in namespace {opted_ns}")
        create_workload(api, opted_ns, "guarded", config_for("1h", "ConfigMap"))
        message = one_line_error(cli("sleep", f"{opted_ns}/guarded", kubeconfig=nobody))
        assert "access denied: you may not get deployments.apps guarded" in message
        assert state_of(api, Ref(opted_ns, "guarded"))[0] == 3

    with step("one that may read workloads but not ConfigMaps gets a partial view"):
        # One who may read workloads but not ConfigMaps, nor ask SubjectAccessReviews, still gets
        # the status, marked as a partial view rather than claiming an idle time it cannot know.
        grant_watch(api, opted_ns, [("apps", ["deployments", "statefulsets"])], sa="reader")
        reader = service_account_kubeconfig(
            cluster, opted_ns, "reader", tmp_path / "reader.kubeconfig"
        )
        item = items(reader)[f"{opted_ns}/guarded"]
        assert (item["state"], item["idleComplete"]) == ("awake", False)
        assert "partial-view" in item["flags"]
        row = ok(cli("status", kubeconfig=reader)).splitlines()[1].split()
        assert row[0] == "guarded"
        assert row[5].startswith("<=")


def test_as_a_kubectl_plugin(cluster: Cluster, api: k8s.ApiClient, opted_ns: str) -> None:
    with step("kubectl lists the plugin"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        create_workload(api, opted_ns, "plugged", config_for("1h", "ConfigMap"))
        kubectl = str(cluster.binaries["kubectl"])
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        env["KUBECONFIG"] = str(cluster.kubeconfig)
        listed = subprocess.run(
            [kubectl, "plugin", "list"], capture_output=True, text=True, env=env, timeout=60
        )
        assert str(BIN / "kubectl-zeroscaler") in listed.stdout, listed.stderr
    with step("kubectl zeroscaler status prints the table"):
        run = subprocess.run(
            [kubectl, "zeroscaler", "status", "-n", opted_ns],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines()[1].split()[:3] == ["plugged", "Deployment", "awake"]
    with step("kubectl zeroscaler --help names the plugin"):
        usage = subprocess.run(
            [kubectl, "zeroscaler", "--help"], capture_output=True, text=True, env=env, timeout=60
        )
        assert usage.stdout.startswith("usage: kubectl zeroscaler")
