"""GitOps: an agent re-applying manifests with server-side apply, as ArgoCD and Flux do."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from localcluster import build
from testkit.controller import (
    ControllerProcess,
    Ref,
    config_for,
    create_workload,
    events_of,
    grant_watch,
    patch_workload,
    read_workload,
    reasons,
    state_of,
    wait_asleep,
    wait_event,
    workload_body,
)
from testkit.steps import step
from testkit.waiting import wait_for
from testkit.webhook import times_reported

pytestmark = pytest.mark.cluster

AGENT = "gitops-agent"
ARGO = "argocd-controller"  # Argo CD's field manager
FLAPPING = "zeroscaler.io/flapping"
FLAPPING_UNTIL = "zeroscaler.io/flapping-until"


def sync(
    api: k8s.ApiClient,
    ns: str,
    name: str,
    replicas: int | None,
    revision: str,
    *,
    manager: str = AGENT,
) -> Ref:
    """What the agent does on each sync: a forced server-side apply under its own field manager."""
    config = config_for("3s", "ConfigMap", watch_namespaces=ns)
    body: dict[str, Any] = workload_body(name, "Deployment", replicas or 0, config, "operator")
    body["metadata"]["annotations"]["example.com/git-revision"] = revision
    if replicas is None:  # the documented setups: Git's replicas are left out of the apply
        del body["spec"]["replicas"]
    k8s.AppsV1Api(api).patch_namespaced_deployment(
        name,
        ns,
        body,
        field_manager=manager,
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    return Ref(ns, name)


def replicas_owners(api: k8s.ApiClient, ref: Ref) -> set[str]:
    """The field managers that own spec.replicas."""
    entries = read_workload(api, ref).metadata.managed_fields or []
    return {e.manager for e in entries if "f:replicas" in (e.fields_v1 or {}).get("f:spec", {})}


def woken_by_others(api: k8s.ApiClient, ref: Ref, times: int) -> bool:
    """Whether it was woken by someone else `times` times."""
    return times_reported(events_of(api, ref), "WokenExternally") == times


def test_an_agent_that_leaves_replicas_alone_does_not_wake_it(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("the first sync creates it with Git's count, and it sleeps"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        ref = sync(api, opted_ns, "synced", 3, "r1")  # the first sync creates it with Git's count
        wait_asleep(api, ref, 3)
    with step("asleep, it gives spec.replicas up"):
        # The agent applies server-side, so zeroscaler gives spec.replicas up after its sleep: the
        # agent's next apply of Git's replicas is then never refused with a conflict (Helm 4's
        # upgrade).
        wait_for(lambda: replicas_owners(api, ref) == set(), "spec.replicas owned by nobody")
    with step("syncs that leave replicas alone keep it asleep"):
        # What each apply itself left (the API server's answer, not yet the controller's).
        for revision in ("r2", "r3", "r4"):
            sync(api, opted_ns, "synced", None, revision)  # Flux's ignore rules strip it
            assert state_of(api, ref)[0] == 0
        sync(api, opted_ns, "synced", 0, "r5")  # ArgoCD's RespectIgnoreDifferences: the live value
        assert state_of(api, ref)[0] == 0
    with step("a sync told nothing wakes it, once, as a wake by others"):
        # An agent told nothing wakes it. The controller takes a workload's changes in order, so
        # once it has recorded this one, it has looked at every sync before, and none of them woke
        # it: it was still asleep (woken "while asleep"), woken once, and never by zeroscaler
        # itself.
        sync(api, opted_ns, "synced", 3, "r6")
        event = wait_event(api, ref, "WokenExternally", f"field manager {AGENT}")
        assert "while asleep" in event.message
        assert times_reported(events_of(api, ref), "WokenExternally") == 1
        assert "Woken" not in reasons(api, ref)


def test_the_same_manifest_reapplied_right_after_each_sleep_is_a_fight_left_awake(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    """Argo CD's self-heal, told nothing, puts Git's replicas back within seconds of each sleep:
    the third time it is a fight, the Warning names Argo CD and the setting that stops it, and the
    workload is left awake instead of being put to sleep for nothing."""
    with step("it sleeps and self-heal wakes it, three times"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        argo = functools.partial(sync, manager=ARGO)
        ref = argo(api, opted_ns, "healed", 2, "r1")
        for n in (1, 2, 3):
            wait_asleep(api, ref, 2)
            argo(api, opted_ns, "healed", 2, "r1")  # self-heal puts Git's replicas back
            wait_for(
                functools.partial(woken_by_others, api, ref, n), f"woken by the agent {n} times"
            )
    with step("a Flapping Warning names Argo CD and the setting that stops it"):
        event = wait_event(api, ref, "Flapping", f"field manager {ARGO}")
        assert event.type == "Warning"
        assert "Argo CD" in event.message
        assert "RespectIgnoreDifferences=true" in event.message
        assert "Left awake until" in event.message
        annotations = state_of(api, ref)[1]
        mark = annotations.get(FLAPPING, "")
        assert mark.startswith("woken 3 times in ")
        assert mark.endswith(f"by field manager {ARGO} setting replicas to 2")
        assert FLAPPING_UNTIL in annotations
    with step("it is left awake while a witness with the same timeout sleeps"):
        # Left awake: once it is Ready (its idle clock would start), a witness with the same timeout
        # is made; the witness falls asleep, and it is still awake.
        wait_for(lambda: (read_workload(api, ref).status.ready_replicas or 0) == 2, "healed Ready")
        witness = create_workload(
            api, opted_ns, "witness", config_for("3s", "ConfigMap", watch_namespaces=opted_ns),
            paused=True,
        )  # fmt: skip
        wait_asleep(api, witness, 3)
        replicas, annotations = state_of(api, ref)
        assert replicas == 2
        assert annotations.get("zeroscaler.io/state") == "awake"
        sleeps = times_reported(events_of(api, ref), "Sleeping")
    with step("a person ends the hold, and it sleeps"):
        # The agent was told (ignoreDifferences): a person ends the hold, it sleeps and stays
        # asleep.
        patch_workload(api, ref, {"metadata": {"annotations": {FLAPPING: None}}})
        wait_event(api, ref, "FlappingHoldOver")
        wait_asleep(api, ref, 2)

    with step("it stays asleep, with one Sleeping Event more"):
        # The Event is written after the sleep's scale write, so it may trail what a read shows.
        def slept() -> int:
            return times_reported(events_of(api, ref), "Sleeping")

        wait_for(lambda: slept() > sleeps, "a Sleeping Event for the sleep after the hold")
        assert slept() == sleeps + 1
        assert FLAPPING_UNTIL not in state_of(api, ref)[1]
        assert state_of(api, ref)[0] == 0


def flux_apply(kubeconfig: Path, manifest: Path, ignore: str = "") -> str:
    """One reconcile of Flux's kustomize-controller, played by Flux's own library (fluxcd/pkg/ssa,
    in localcluster/go/flux-apply): a forced server-side apply, with drift ignore rules or not."""
    cmd = [str(build.ensure_flux_apply()), "-kubeconfig", str(kubeconfig), "-file", str(manifest)]
    if ignore:
        cmd += ["-ignore", ignore]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_flux_drift_correction_with_and_without_its_ignore_rules(
    api: k8s.ApiClient,
    opted_ns: str,
    controller: ControllerProcess,
    kubeconfig: Path,
    tmp_path: Path,
) -> None:
    with step("Flux's first reconcile creates it, and it sleeps"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        config = config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
        body = workload_body("fluxed", "Deployment", 2, config, "operator", paused=True)
        body["metadata"]["namespace"] = opted_ns
        body["metadata"]["labels"] = {
            "kustomize.toolkit.fluxcd.io/name": "operators",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
        }
        manifest = tmp_path / "operators.yaml"
        manifest.write_text(yaml.safe_dump(body))
        ref = Ref(opted_ns, "fluxed")
        assert "created" in flux_apply(kubeconfig, manifest)
        wait_asleep(api, ref, 2)
    with step("with the ignore rule on replicas, reconciles leave it asleep"):
        # With spec.ignore on /spec/replicas: every reconcile leaves the sleeper asleep.
        for _ in range(3):
            flux_apply(kubeconfig, manifest, ignore="/spec/replicas")
            assert state_of(api, ref)[0] == 0
    with step("without it, drift correction wakes it as a wake by Flux"):
        # Without: drift correction puts Git's replicas back, and that is a wake by Flux.
        flux_apply(kubeconfig, manifest)
        event = wait_event(api, ref, "WokenExternally", "field manager kustomize-controller")
        assert "Flux (Kustomization flux-system/operators)" in event.message
        assert times_reported(events_of(api, ref), "WokenExternally") == 1
