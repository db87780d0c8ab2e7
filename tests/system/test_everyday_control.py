"""Everyday control on the real control plane: dry run per namespace, pauses with an end and
selections from the command, the state label, and `zeroscaler status -w`."""

from __future__ import annotations

import queue
import secrets
import subprocess
import threading
from datetime import UTC, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.controller import (
    ControllerProcess,
    Ref,
    config_for,
    create_workload,
    events_of,
    grant_watch,
    read_workload,
    state_of,
    wait_asleep,
    wait_awake,
    wait_event,
)
from testkit.steps import step
from testkit.waiting import wait_for
from tests.system.test_cli import ZEROSCALER, cli, ok, server_now

pytestmark = pytest.mark.cluster


def state_label(api: k8s.ApiClient, ref: Ref) -> str | None:
    labels = read_workload(api, ref).metadata.labels or {}
    return labels.get("zeroscaler.io/state")


def label_namespace(api: k8s.ApiClient, ns: str, labels: dict[str, str | None]) -> None:
    k8s.CoreV1Api(api).patch_namespace(ns, {"metadata": {"labels": labels}})


def test_a_namespace_in_dry_run_is_told_what_would_happen_and_nothing_changes(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step(
        "in a dry-run namespace, the sleep it would take is said in an Event and the metrics"
    ):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        label_namespace(api, opted_ns, {"zeroscaler.io/dry-run": "true"})
        op = create_workload(
            api,
            opted_ns,
            "op",
            config_for("2s", "ConfigMap", watch_namespaces=opted_ns),
            paused=True,
        )
        # Said, in an Event and in the metrics...
        wait_event(
            api, op, "WouldSleep", 'dry run (namespace labelled zeroscaler.io/dry-run: "true")'
        )
        wait_for(
            lambda: (
                controller.metric("zeroscaler_dry_run_decisions_total", action="sleep", default=0)
                >= 1
            ),
            "the would-be sleep counted",
        )
        assert controller.metric("zeroscaler_dry_run_workloads") == 1
    with step("and nothing is done: no scale, no status, no label"):
        # ...and nothing done: no scale, no status, no label.
        replicas, annotations = state_of(api, op)
        assert replicas == 3
        assert "zeroscaler.io/state" not in annotations
        assert state_label(api, op) is None
        assert "Sleeping" not in [e.reason for e in events_of(api, op)]

    with step("out of the dry run, it sleeps and its label says so"):
        # Out of the dry run, it is decided on as it really is: asleep, and the label says so.
        label_namespace(api, opted_ns, {"zeroscaler.io/dry-run": None})
        wait_asleep(api, op, 3)
        assert state_label(api, op) == "asleep"
        asleep = k8s.AppsV1Api(api).list_namespaced_deployment(
            opted_ns, label_selector="zeroscaler.io/state=asleep"
        )
        assert [d.metadata.name for d in asleep.items] == ["op"]
        assert controller.metric("zeroscaler_dry_run_workloads") == 0


def test_pauses_with_an_end_and_selections_from_the_command(
    api: k8s.ApiClient,
    cluster: Cluster,
    opted_ns: str,
    controller: ControllerProcess,
    kubeconfig: Path,
) -> None:
    with step("two workloads of one team and one other, all paused"):
        ns = opted_ns
        grant_watch(api, ns, [("", ["configmaps"])])
        team = f"t{secrets.token_hex(3)}"
        # The team's timeout outlasts the command's start on a loaded machine, so the pause, not
        # the clock, decides whether they are held.
        team_config = config_for("15s", "ConfigMap", watch_namespaces=ns)
        body = {"metadata": {"labels": {"team": team}}}
        held = [
            create_workload(api, ns, name, team_config, paused=True) for name in ("a-op", "b-op")
        ]
        for ref in held:
            k8s.AppsV1Api(api).patch_namespaced_deployment(ref.name, ns, body)
        config = config_for("3s", "ConfigMap", watch_namespaces=ns)
        other = create_workload(api, ns, "other", config, paused=True)

    with step("a selection pauses the team for an hour, while the other sleeps when idle"):
        # Paused for an hour by a selection: held, while the other one sleeps when idle.
        said = ok(
            cli("pause", "-n", ns, "-l", f"team={team}", "--for", "1h", kubeconfig=kubeconfig)
        )
        assert said.count("paused until ") == 2, said
        for ref in held:
            assert "zeroscaler.io/paused-until" in state_of(api, ref)[1]
            wait_event(api, ref, "Paused", "zeroscaler.io/paused-until")
            wait_event(api, ref, "ManualPause", "(zeroscaler pause) until")
        wait_asleep(api, other, 3)
        assert controller.metric("zeroscaler_paused_workloads") == 2
        for ref in held:
            assert state_of(api, ref)[0] == 3

    with step("the same selection in every namespace resumes them, and both sleep"):
        # Resumed by the same selection in every namespace: both sleep once idle.
        ok(cli("resume", "-A", "-l", f"team={team}", kubeconfig=kubeconfig))
        for ref in held:
            wait_event(api, ref, "Resumed")
            wait_asleep(api, ref, 3)
            assert state_label(api, ref) == "asleep"

    with step("the selection wakes them, and the label follows"):
        # Woken by the selection; the label follows the state written with it.
        ok(cli("wake", "-n", ns, "-l", f"team={team}", kubeconfig=kubeconfig))
        for ref in held:
            wait_awake(api, ref, 3)
            assert state_label(api, ref) == "awake"

    with step("a pause until a time ends by itself, and it sleeps"):
        # A pause until a time: held until then, then managed again without anyone's help.
        until = (server_now(cluster) + timedelta(seconds=6)).replace(tzinfo=UTC)
        stamp = until.strftime("%Y-%m-%dT%H:%M:%SZ")
        ok(cli("pause", "-n", ns, "a-op", "--until", stamp, kubeconfig=kubeconfig))
        wait_event(api, held[0], "Paused", stamp)
        wait_event(api, held[0], "Resumed", f"{stamp} has passed")
        wait_asleep(api, held[0], 3)

    with step("a selection with a workload the command refuses: said, exit 1, the rest done"):
        # A selection with a workload the command refuses: said on stderr, exit 1, the rest done.
        ok(cli("pause", "-n", ns, "other", kubeconfig=kubeconfig))
        mixed = {"metadata": {"labels": {"mix": team}}}
        for name in ("other", "b-op"):
            k8s.AppsV1Api(api).patch_namespaced_deployment(name, ns, mixed)
        refused = cli("sleep", "-n", ns, "-l", f"mix={team}", kubeconfig=kubeconfig)
        assert refused.returncode == 1
        assert "Deployment " + ns + "/other: not done: it is paused" in refused.stderr
        assert "1 of 2 not done" in refused.stderr


def test_status_watch_prints_a_row_when_a_workload_changes(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess, kubeconfig: Path
) -> None:
    with step("status -w runs beside a paused workload"):
        ns = opted_ns
        grant_watch(api, ns, [("", ["configmaps"])])
        op = create_workload(
            api, ns, "op", config_for("1h", "ConfigMap", watch_namespaces=ns), paused=True
        )
        wait_for(lambda: state_of(api, op)[1].get("zeroscaler.io/idle-timeout"), "created")
        proc = subprocess.Popen(
            [str(ZEROSCALER), "status", "-w", "-n", ns, f"--kubeconfig={kubeconfig}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()

        def read() -> None:
            for line in proc.stdout or []:
                lines.put(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        seen: list[str] = []

        def has(*words: str) -> bool:
            while not lines.empty():
                seen.append(lines.get())
            return any(all(w in line for w in words) for line in seen)

    try:
        with step("it prints the table's header"):
            wait_for(lambda: has("NAME", "STATE"), "the table's header")
        with step("a sleep prints a row"):
            ok(cli("sleep", "-n", ns, "op", kubeconfig=kubeconfig))
            wait_for(lambda: has("op", "asleep"), "a row saying it is asleep")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        reader.join(timeout=10)  # the pipe ends with the process
        if proc.stdout is not None:
            proc.stdout.close()
