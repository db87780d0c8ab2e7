"""zeroscaler's webhook and controller with the activator, and a webhook backend that sleeps: for
the activator's system tests and its benchmark."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client as k8s

from localcluster.cluster import Cluster
from localcluster.processes import free_port
from testkit.admission_backend import (
    Guard,
    guard_deployment,
    guard_service,
    new_guard,
    register_guard,
    unregister,
)
from testkit.controller import (
    WIDGET_GROUP,
    ControllerProcess,
    config_for,
    grant_watch,
    start_controller,
)
from testkit.waiting import wait_for
from testkit.webhook import Webhook
from zeroscaler.core.coverage import has_ready_endpoint

REQUESTS = "zeroscaler-activator-requests"
CONTROLLER_COULD_ACT = 12.0  # three of the backend's 4 s idle timeouts: a sleep would have come


@dataclass
class Zeroscaler:
    """zeroscaler's webhook and controller, and the activator's configuration name."""

    webhook: Webhook
    controller: ControllerProcess
    activator: str


def start_zeroscaler(
    cluster: Cluster, api: k8s.ApiClient, home: str, workdir: Path, *, activator: bool = True
) -> Zeroscaler:
    """The webhook and the controller, `home` their namespace; with `activator`, its
    configuration and requests ConfigMap made as the chart makes them (empty)."""
    hook = Webhook(cluster, workdir, home)
    name = f"0-zs-activator-{hook.run}"
    covered = ["--activator-configuration", name] if activator else []
    hook.start(extra=["--activator-requests", REQUESTS, *covered])
    hook.register(api)
    extra = ["--webhook-configuration", hook.config_name, "--activator-requests", REQUESTS]
    if activator:
        k8s.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(
            {"metadata": {"name": name}}
        )
        k8s.CoreV1Api(api).create_namespaced_config_map(home, {"metadata": {"name": REQUESTS}})
        extra += ["--activator-configuration", name, "--activator-probe-interval", "2"]
    ctl = start_controller(cluster, home, workdir, extra=extra)
    return Zeroscaler(hook, ctl, name if activator else "")


def stop_zeroscaler(api: k8s.ApiClient, zs: Zeroscaler) -> None:
    zs.controller.stop()
    zs.webhook.unregister(api)
    zs.webhook.stop()
    if zs.activator:
        k8s.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(zs.activator)
    print(zs.controller.log_tail(80))  # shown by pytest when the test failed


@contextlib.contextmanager
def deployed_guard(
    api: k8s.ApiClient, namespace: str, workdir: Path, image: str, timeout: str = "4s"
) -> Iterator[Guard]:
    """The backend in `namespace` (opted in), awake with a ready endpoint, its webhooks
    registered for Widgets there; it watches ConfigMaps and sleeps after `timeout`."""
    grant_watch(api, namespace, [("", ["configmaps"])])
    backend = new_guard(namespace, "guard", free_port(), workdir)
    config = config_for(timeout, "ConfigMap", watch_namespaces=namespace)
    k8s.AppsV1Api(api).create_namespaced_deployment(
        namespace, guard_deployment(backend, image, config)
    )
    k8s.CoreV1Api(api).create_namespaced_service(namespace, guard_service(backend))
    registrations = register_guard(api, backend, WIDGET_GROUP, "widgets", secrets.token_hex(3))
    try:
        try:
            wait_for(lambda: serving(api, namespace), "the guard Ready, its endpoint too", 90)
        except AssertionError:
            describe(api, namespace)
            raise
        yield backend
    finally:
        unregister(api, registrations)


def describe(api: k8s.ApiClient, ns: str) -> None:
    """What the pods and Events say, for a failed test's output."""
    for pod in k8s.CoreV1Api(api).list_namespaced_pod(ns).items:
        print("pod", pod.metadata.name, pod.status.phase, pod.status.container_statuses)
    for e in k8s.CoreV1Api(api).list_namespaced_event(ns).items:
        print("event", e.involved_object.kind, e.involved_object.name, e.reason, e.message)


def serving(api: k8s.ApiClient, ns: str) -> bool:
    """Whether the API server would reach the guard: a ready endpoint of its Service."""
    slices = k8s.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        ns, label_selector="kubernetes.io/service-name=guard"
    )
    return has_ready_endpoint(api.sanitize_for_serialization(s) for s in slices.items)
