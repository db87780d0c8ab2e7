"""Helpers for the controller's system tests: the controller as a real process, and workloads."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from localcluster.cluster import Cluster
from localcluster.processes import free_port, stop
from testkit.waiting import wait_for

CONTROLLER = Path(sys.executable).parent / "zeroscaler-controller"
IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok only pretends to run containers
WIDGET_GROUP = "zs-test.example.com"
WIDGET = f"Widget.{WIDGET_GROUP}"
WIDGETS = f"widgets.{WIDGET_GROUP}"
TIMEOUT = 60.0
Labels = tuple[tuple[str, str], ...]
# The sample names each metric type exposes, after the family's name ("": the name itself).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}


class MissingMetric(AssertionError):
    """A metric asked for is not in the exposition: renamed, or never exposed."""


def read_metric(
    text: str, name: str, labels: Mapping[str, str], *, default: float | None = None
) -> float:
    """The value of sample `name` with exactly `labels` in a Prometheus text exposition.

    A family that does not expose `name` raises, and so does a sample whose label names differ
    from those the family's samples carry. A missing sample of a family that is there raises
    too, unless the caller says by `default` what none means (a labelled counter appears only
    after its first increment)."""
    families = list(text_string_to_metric_families(text))
    exposing = [f for f in families if name in _sample_names(f.name, f.type)]
    if not exposing:
        known = ", ".join(sorted(f.name for f in families if f.name.startswith("zeroscaler")))
        raise MissingMetric(f"no metric {name!r} in the exposition (zeroscaler's: {known})")
    wanted = tuple(sorted(labels.items()))
    same_name = [s for f in exposing for s in f.samples if s.name == name]
    for s in same_name:
        if tuple(sorted(s.labels.items())) == wanted:
            return float(s.value)
    keys = {tuple(sorted(s.labels)) for s in same_name}
    if keys and tuple(sorted(labels)) not in keys:
        carried = " or ".join(str(list(k)) for k in sorted(keys))
        raise MissingMetric(
            f"{name} has no label set {sorted(labels)}: its samples carry {carried}"
        )
    if default is None:
        shown = ", ".join(str(dict(s.labels)) for s in same_name) or "none"
        raise MissingMetric(f"{name}{dict(labels)} has no sample (samples: {shown})")
    return default


def _sample_names(family: str, kind: str) -> set[str]:
    return {family + suffix for suffix in _SUFFIXES.get(kind, ("",))}


@dataclass
class ControllerProcess:
    """One `zeroscaler-controller` subprocess and its HTTP endpoints."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    id: str

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}{path}", timeout=5)

    def metrics(self) -> dict[tuple[str, Labels], float]:
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(self.get("/metrics").text)
            for s in family.samples
        }

    def metric(self, name: str, *, default: float | None = None, **labels: str) -> float:
        """The sample `name` with exactly `labels`; see `read_metric` for when it raises."""
        return read_metric(self.get("/metrics").text, name, labels, default=default)

    def is_leader(self) -> bool:
        try:
            return self.metric("zeroscaler_leader") == 1.0
        except httpx.HTTPError:
            return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def events_seen(self, resource: str) -> float:
        # A labelled counter has no sample for a resource until its first event: none yet is 0.
        return self.metric("zeroscaler_watch_events_total", default=0.0, resource=resource)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop(self.proc, sig)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def start_controller(
    cluster: Cluster,
    lease_namespace: str,
    workdir: Path,
    *,
    id: str = "ctl-a",
    extra: Sequence[str] = (),
    wait_leader: bool = True,
    kubeconfig: Path | None = None,
    clock_at: str | None = None,
) -> ControllerProcess:
    """Start the controller with short test timings and wait until it is ready; with
    `clock_at` (RFC 3339), its wall clock reads that instant at its start
    (testkit/programs/clock_shift.py)."""
    port = free_port()
    log = workdir / f"controller-{id}.log"
    program = (
        [str(CONTROLLER)]
        if clock_at is None
        else [sys.executable, "-m", "testkit.programs.clock_shift", clock_at]
    )
    cmd = [
        *program,
        "--kubeconfig",
        str(kubeconfig or cluster.kubeconfig),
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        str(port),
        "--lease-namespace",
        lease_namespace,
        "--id",
        id,
        "--lease-duration",
        "3",
        "--discovery-interval",
        "2",
        "--access-review-ttl",
        "1",
        "--log-level",
        "debug",
        *extra,
    ]
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    ctl = ControllerProcess(proc, port, log, id)

    def ready() -> bool:
        assert ctl.alive(), f"controller exited:\n{ctl.log_tail()}"
        try:
            return ctl.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(ready, f"controller {id} ready", timeout=TIMEOUT)
    if wait_leader:
        wait_for(ctl.is_leader, f"controller {id} leading", timeout=TIMEOUT)
    return ctl


@dataclass(frozen=True)
class Ref:
    """A workload under test."""

    namespace: str
    name: str
    kind: str = "Deployment"


def workload_body(
    name: str,
    kind: str,
    replicas: int,
    annotations: dict[str, str],
    sa: str,
    *,
    paused: bool = False,
) -> dict[str, Any]:
    """A workload of one container; a paused Deployment scales as an API object but makes no
    Pods (it never creates its ReplicaSet), which spares a small machine the Pods' churn."""
    labels = {"app": name}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "serviceAccountName": sa,
                "containers": [{"name": "main", "image": IMAGE}],
            },
        },
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    if paused:
        spec["paused"] = True
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "annotations": annotations},
        "spec": spec,
    }


def create_workload(
    api: k8s.ApiClient,
    ns: str,
    name: str,
    annotations: dict[str, str],
    *,
    kind: str = "Deployment",
    replicas: int = 3,
    sa: str = "operator",
    paused: bool = False,
) -> Ref:
    body = workload_body(name, kind, replicas, annotations, sa, paused=paused)
    apps = k8s.AppsV1Api(api)
    if kind == "Deployment":
        apps.create_namespaced_deployment(ns, body)
    else:
        apps.create_namespaced_stateful_set(ns, body)
    return Ref(ns, name, kind)


def read_workload(api: k8s.ApiClient, ref: Ref) -> Any:
    apps = k8s.AppsV1Api(api)
    if ref.kind == "Deployment":
        return apps.read_namespaced_deployment(ref.name, ref.namespace)
    return apps.read_namespaced_stateful_set(ref.name, ref.namespace)


@contextlib.contextmanager
def refusing_updates(
    api: k8s.ApiClient, ns: str, name: str, resource: str, allowed: str, message: str
) -> Iterator[None]:
    """While in the block, the API server refuses UPDATEs of apps/v1 `resource` in `ns` unless
    the CEL expression `allowed` holds (a ValidatingAdmissionPolicy and its binding)."""
    registration = k8s.AdmissionregistrationV1Api(api)
    rule = {
        "apiGroups": ["apps"],
        "apiVersions": ["v1"],
        "operations": ["UPDATE"],
        "resources": [resource],
    }
    registration.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                    "resourceRules": [rule],
                },
                "validations": [{"expression": allowed, "message": message}],
            },
        }
    )
    try:
        registration.create_validating_admission_policy_binding(
            {
                "metadata": {"name": name},
                "spec": {"policyName": name, "validationActions": ["Deny"]},
            }
        )
        yield
    finally:
        with contextlib.suppress(ApiException):
            registration.delete_validating_admission_policy_binding(name)
        registration.delete_validating_admission_policy(name)


def patch_workload(api: k8s.ApiClient, ref: Ref, body: dict[str, Any]) -> None:
    apps = k8s.AppsV1Api(api)
    if ref.kind == "Deployment":
        apps.patch_namespaced_deployment(ref.name, ref.namespace, body)
    else:
        apps.patch_namespaced_stateful_set(ref.name, ref.namespace, body)


def state_of(api: k8s.ApiClient, ref: Ref) -> tuple[int, dict[str, str]]:
    obj = read_workload(api, ref)
    return int(obj.spec.replicas or 0), dict(obj.metadata.annotations or {})


def wait_asleep(api: k8s.ApiClient, ref: Ref, restore: int, timeout: float = TIMEOUT) -> None:
    def asleep() -> bool:
        replicas, ann = state_of(api, ref)
        return (
            replicas == 0
            and ann.get("zeroscaler.io/state") == "asleep"
            and ann.get("zeroscaler.io/restore-replicas") == str(restore)
            and "zeroscaler.io/asleep-since" in ann
        )

    wait_for(asleep, f"{ref.kind} {ref.namespace}/{ref.name} asleep", timeout=timeout)


def wait_awake(api: k8s.ApiClient, ref: Ref, replicas: int, timeout: float = TIMEOUT) -> None:
    def awake() -> bool:
        count, ann = state_of(api, ref)
        return count == replicas and ann.get("zeroscaler.io/state") == "awake"

    wait_for(awake, f"{ref.kind} {ref.namespace}/{ref.name} awake at {replicas}", timeout=timeout)


def events_of(api: k8s.ApiClient, ref: Ref) -> list[Any]:
    items = (
        k8s.CoreV1Api(api)
        .list_namespaced_event(ref.namespace, field_selector=f"involvedObject.name={ref.name}")
        .items
    )
    return sorted(items, key=lambda e: (e.metadata.creation_timestamp, e.metadata.name))


def wait_event(
    api: k8s.ApiClient, ref: Ref, reason: str, contains: str = "", timeout: float = TIMEOUT
) -> Any:
    def found() -> Any:
        for event in reversed(events_of(api, ref)):
            if event.reason == reason and contains in (event.message or ""):
                return event
        return None

    return wait_for(found, f"Event {reason} {contains!r} on {ref.name}", timeout=timeout)


def reasons(api: k8s.ApiClient, ref: Ref) -> list[str]:
    return [e.reason for e in events_of(api, ref)]


def grant_watch(
    api: k8s.ApiClient,
    ns: str,
    rules: Sequence[tuple[str, Sequence[str]]],
    *,
    sa: str = "operator",
    cluster_wide: bool = False,
    name: str = "operator-watch",
) -> None:
    """Create the ServiceAccount and let it get/list/watch the given (group, resources)."""
    core = k8s.CoreV1Api(api)
    try:
        core.create_namespaced_service_account(ns, {"metadata": {"name": sa}})
    except ApiException as e:
        if e.status != 409:
            raise
    rbac = k8s.RbacAuthorizationV1Api(api)
    role_rules = [
        {"apiGroups": [group], "resources": list(resources), "verbs": ["get", "list", "watch"]}
        for group, resources in rules
    ]
    subject = [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
    if cluster_wide:
        role_name = f"{ns}-{name}"
        rbac.create_cluster_role({"metadata": {"name": role_name}, "rules": role_rules})
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": role_name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role_name,
                },
                "subjects": subject,
            }
        )
        return
    rbac.create_namespaced_role(ns, {"metadata": {"name": name}, "rules": role_rules})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subject,
        },
    )


def create_widget(api: k8s.ApiClient, ns: str, name: str, **extra: Any) -> dict[str, Any]:
    body = {
        "apiVersion": f"{WIDGET_GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, **extra},
        "spec": {"size": 1},
    }
    created: dict[str, Any] = k8s.CustomObjectsApi(api).create_namespaced_custom_object(
        WIDGET_GROUP, "v1", ns, "widgets", body
    )
    return created


def create_configmap(api: k8s.ApiClient, ns: str, name: str, **meta: Any) -> None:
    body = {"metadata": {"name": name, **meta}, "data": {"k": "v"}}
    k8s.CoreV1Api(api).create_namespaced_config_map(ns, body)


def synced_after(ctl: ControllerProcess, resource: str, before: float) -> None:
    """Wait until the controller has received a watch event on `resource` after `before`."""
    wait_for(
        lambda: ctl.events_seen(resource) > before,
        f"controller saw an event on {resource}",
        timeout=TIMEOUT,
    )


def config_for(timeout: str, watched: str, **more: str) -> dict[str, str]:
    found = {"zeroscaler.io/idle-timeout": timeout, "zeroscaler.io/watched-kinds": watched}
    found.update({f"zeroscaler.io/{k.replace('_', '-')}": v for k, v in more.items()})
    return found


def assert_not_activity(
    ctl: ControllerProcess, resource: str, action: Callable[[], object]
) -> None:
    """Do `action`; once the controller has received its watch event, nothing counted as activity.

    The activity counter is raised in the same call that receives the event, so this is exact.
    """
    seen, activity = ctl.events_seen(resource), ctl.metric("zeroscaler_activity_total")
    action()
    synced_after(ctl, resource, seen)
    assert ctl.metric("zeroscaler_activity_total") == activity


def wait_woken(api: k8s.ApiClient, ref: Ref, reason: str, replicas: int = 3) -> Any:
    """Wait for the Event of a wake by `reason` to `replicas` (the state itself lasts seconds)."""
    return wait_event(api, ref, "Woken", f"{reason}: scaled from 0 to {replicas} replicas")
