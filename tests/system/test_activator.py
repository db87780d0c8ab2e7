"""The activator: an operator that serves its own admission webhooks sleeps, and a request its
webhooks cover wakes it and is then reviewed by it, as if zeroscaler were not there.

The backend is a real TLS server in a container on the real node, registered by
`clientConfig.service` with `failurePolicy: Fail` (validating and mutating), so the API server
reaches it through its Service's ready endpoints on loopback. zeroscaler's webhook and controller
run as processes here, with the activator's configuration made as the chart makes it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from image import build as image_build
from localcluster import realnode
from localcluster.cluster import Cluster
from localcluster.processes import free_port
from tests.support.admission_backend import (
    Guard,
    guard_deployment,
    guard_service,
    new_guard,
    register_guard,
    unregister,
)
from tests.support.waiting import wait_for
from tests.system.controller_kit import (
    WIDGET_GROUP,
    ControllerProcess,
    Ref,
    config_for,
    create_widget,
    grant_watch,
    reasons,
    start_controller,
    state_of,
    wait_asleep,
    wait_event,
)
from tests.system.test_chart_real_node import ARCHIVE
from tests.system.webhook_kit import Webhook
from zeroscaler.core.activator import PROBE_WEBHOOK, has_ready_endpoint

pytestmark = pytest.mark.cluster

REQUESTS = "zeroscaler-activator-requests"
CONTROLLER_COULD_ACT = 12.0  # three of the backend's 4 s idle timeouts: a sleep would have come


@dataclass
class Zeroscaler:
    """zeroscaler's webhook and controller, and the activator's configuration name."""

    webhook: Webhook
    controller: ControllerProcess
    activator: str


@pytest.fixture
def guard_image(cluster: Cluster, real_node: realnode.RealNode) -> str:
    assert ARCHIVE.exists(), f"{ARCHIVE} is missing: `make image` builds it (`make test` does)"
    cluster.import_image(ARCHIVE)
    return image_build.default_name()


def _start(
    cluster: Cluster, api: k8s.ApiClient, home: str, tmp_path: Path, *, activator: bool
) -> Zeroscaler:
    hook = Webhook(cluster, tmp_path, home)
    hook.start(extra=["--activator-requests", REQUESTS])
    hook.register(api)
    name = f"0-zs-activator-{hook.run}"
    extra = ["--webhook-configuration", hook.config_name, "--activator-requests", REQUESTS]
    if activator:  # made as the chart makes them: no webhooks, no data
        k8s.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(
            {"metadata": {"name": name}}
        )
        k8s.CoreV1Api(api).create_namespaced_config_map(home, {"metadata": {"name": REQUESTS}})
        extra += ["--activator-configuration", name, "--activator-probe-interval", "2"]
    ctl = start_controller(cluster, home, tmp_path, extra=extra)
    return Zeroscaler(hook, ctl, name if activator else "")


def _stop(api: k8s.ApiClient, zs: Zeroscaler) -> None:
    zs.controller.stop()
    zs.webhook.unregister(api)
    zs.webhook.stop()
    if zs.activator:
        k8s.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(zs.activator)
    print(zs.controller.log_tail(80))  # shown by pytest when the test failed


@pytest.fixture
def zeroscaler(
    cluster: Cluster, api: k8s.ApiClient, policy_ns: str, tmp_path: Path
) -> Iterator[Zeroscaler]:
    zs = _start(cluster, api, policy_ns, tmp_path, activator=True)
    yield zs
    _stop(api, zs)


@pytest.fixture
def zeroscaler_without_activator(
    cluster: Cluster, api: k8s.ApiClient, policy_ns: str, tmp_path: Path
) -> Iterator[Zeroscaler]:
    zs = _start(cluster, api, policy_ns, tmp_path, activator=False)
    yield zs
    _stop(api, zs)


@pytest.fixture
def guard(
    api: k8s.ApiClient, opted_ns: str, tmp_path: Path, guard_image: str, widgets: None
) -> Iterator[Guard]:
    """The backend, awake and Ready, its webhooks registered for Widgets in its namespace."""
    grant_watch(api, opted_ns, [("", ["configmaps"])])
    backend = new_guard(opted_ns, "guard", free_port(), tmp_path)
    config = config_for("4s", "ConfigMap", watch_namespaces=opted_ns)
    k8s.AppsV1Api(api).create_namespaced_deployment(
        opted_ns, guard_deployment(backend, guard_image, config)
    )
    k8s.CoreV1Api(api).create_namespaced_service(opted_ns, guard_service(backend))
    registrations = register_guard(api, backend, WIDGET_GROUP, "widgets", secrets.token_hex(3))
    try:
        try:
            wait_for(lambda: _serving(api, opted_ns), "the guard Ready, its endpoint too", 90)
        except AssertionError:
            _describe(api, opted_ns)
            raise
        yield backend
    finally:
        unregister(api, registrations)


def _describe(api: k8s.ApiClient, ns: str) -> None:
    """What the pods and EndpointSlices say, for a failed test's output."""
    for pod in k8s.CoreV1Api(api).list_namespaced_pod(ns).items:
        print("pod", pod.metadata.name, pod.status.phase, pod.status.container_statuses)
    for e in k8s.CoreV1Api(api).list_namespaced_event(ns).items:
        print("event", e.involved_object.kind, e.involved_object.name, e.reason, e.message)


def _serving(api: k8s.ApiClient, ns: str) -> bool:
    """Whether the API server would reach the guard: a ready endpoint of its Service."""
    slices = k8s.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        ns, label_selector="kubernetes.io/service-name=guard"
    )
    return has_ready_endpoint(api.sanitize_for_serialization(s) for s in slices.items)


def _refused(api: k8s.ApiClient, ns: str, name: str) -> str:
    with pytest.raises(ApiException) as refused:
        create_widget(api, ns, name)
    return str(refused.value.body)


def _activator_webhooks(api: k8s.ApiClient, name: str) -> list[str]:
    obj = k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(name)
    return [w.name for w in obj.webhooks or []]


def _woken_by_request(api: k8s.ApiClient, ref: Ref) -> bool:
    return any(
        e.reason == "Woken" and "admission request" in (e.message or "")
        for e in k8s.CoreV1Api(api).list_namespaced_event(ref.namespace).items
        if e.involved_object.name == ref.name
    )


def test_a_sleeping_webhook_backend_is_woken_by_a_covered_request_and_reviews_it(
    api: k8s.ApiClient, zeroscaler: Zeroscaler, guard: Guard
) -> None:
    ref = Ref(guard.namespace, guard.name)
    # Awake, its webhooks work as shipped: the validating one refuses, the mutating one labels.
    assert "guard refuses bad-awake" in _refused(api, guard.namespace, "bad-awake")
    awake = create_widget(api, guard.namespace, "while-awake")
    assert awake["metadata"]["labels"] == {"defaulted-by": "guard"}
    assert _activator_webhooks(api, zeroscaler.activator) in ([], [PROBE_WEBHOOK])

    wait_asleep(api, ref, 1, timeout=90)
    # Covered before it was scaled down: a copy of each of its two webhooks, and the probe.
    covering = _activator_webhooks(api, zeroscaler.activator)
    assert covering[0] == PROBE_WEBHOOK
    assert len(covering) == 3

    # Asleep: the create is neither refused nor unchecked. The activator wakes it, the
    # mutating webhook (its configuration called after the activator's) defaults it, and the
    # validating webhook reviews it.
    asleep = create_widget(api, guard.namespace, "while-asleep")
    assert asleep["metadata"]["labels"] == {"defaulted-by": "guard"}
    assert "/validate CREATE while-asleep" in guard.reviewed()
    assert "/mutate CREATE while-asleep" in guard.reviewed()
    wait_for(lambda: _woken_by_request(api, ref), "a Woken Event naming the request", 30)
    # Validation is never skipped: a bad object is refused by the woken backend itself.
    assert "guard refuses bad-asleep" in _refused(api, guard.namespace, "bad-asleep")

    # Awake and Ready, it is no longer covered, and it sleeps again after its timeout.
    wait_for(
        lambda: _activator_webhooks(api, zeroscaler.activator) == [PROBE_WEBHOOK],
        "the activator to stop covering the awake backend",
        60,
    )
    wait_asleep(api, ref, 1, timeout=90)
    assert "BacksWebhook" not in reasons(api, ref)


def test_a_backend_is_woken_when_the_activator_stops_answering(
    api: k8s.ApiClient, zeroscaler: Zeroscaler, guard: Guard
) -> None:
    ref = Ref(guard.namespace, guard.name)
    wait_asleep(api, ref, 1, timeout=90)
    zeroscaler.webhook.stop()  # no activator to answer: its probe goes unanswered
    wait_for(lambda: state_of(api, ref)[0] == 1, "the backend woken", 60)
    wait_event(api, ref, "BacksWebhook", "the activator cannot serve")
    wait_for(lambda: _serving(api, guard.namespace), "the guard Ready", timeout=90)
    time.sleep(CONTROLLER_COULD_ACT)
    assert state_of(api, ref)[0] == 1  # kept awake while the activator is unanswered


def test_without_the_activator_a_webhook_backend_never_sleeps(
    api: k8s.ApiClient, zeroscaler_without_activator: Zeroscaler, guard: Guard
) -> None:
    ref = Ref(guard.namespace, guard.name)
    wait_event(api, ref, "BacksWebhook", "the activator is off")
    time.sleep(CONTROLLER_COULD_ACT)
    replicas, annotations = state_of(api, ref)
    assert replicas == 1
    assert annotations.get("zeroscaler.io/state") != "asleep"
