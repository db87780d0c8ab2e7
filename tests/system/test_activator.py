"""The activator: an operator that serves its own admission webhooks sleeps, and a request its
webhooks cover wakes it and is then reviewed by it, as if zeroscaler were not there.

The backend is a real TLS server in a container on the real node, registered by
`clientConfig.service` with `failurePolicy: Fail` (validating and mutating), so the API server
reaches it through its Service's ready endpoints on loopback. zeroscaler's webhook and controller
run as processes here, with the activator's configuration made as the chart makes it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from localcluster.cluster import Cluster
from testkit.activator import (
    CONTROLLER_COULD_ACT,
    Zeroscaler,
    serving,
    start_zeroscaler,
    stop_zeroscaler,
)
from testkit.admission_backend import Guard
from testkit.controller import (
    Ref,
    create_widget,
    reasons,
    state_of,
    wait_asleep,
    wait_event,
)
from testkit.steps import step
from testkit.waiting import wait_for
from zeroscaler.core.coverage import PROBE_WEBHOOK

pytestmark = pytest.mark.cluster


@pytest.fixture
def zeroscaler(
    cluster: Cluster, api: k8s.ApiClient, policy_ns: str, tmp_path: Path
) -> Iterator[Zeroscaler]:
    zs = start_zeroscaler(cluster, api, policy_ns, tmp_path)
    yield zs
    stop_zeroscaler(api, zs)


@pytest.fixture
def zeroscaler_without_activator(
    cluster: Cluster, api: k8s.ApiClient, policy_ns: str, tmp_path: Path
) -> Iterator[Zeroscaler]:
    zs = start_zeroscaler(cluster, api, policy_ns, tmp_path, activator=False)
    yield zs
    stop_zeroscaler(api, zs)


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
    with step("awake: its webhooks work as shipped"):
        # The validating one refuses, the mutating one labels.
        assert "guard refuses bad-awake" in _refused(api, guard.namespace, "bad-awake")
        awake = create_widget(api, guard.namespace, "while-awake")
        assert awake["metadata"]["labels"] == {"defaulted-by": "guard"}
        assert _activator_webhooks(api, zeroscaler.activator) in ([], [PROBE_WEBHOOK])

    with step("sleeps, covered by the activator"):
        wait_asleep(api, ref, 1, timeout=90)
        # Covered before it was scaled down: a copy of each of its two webhooks, and the probe.
        covering = _activator_webhooks(api, zeroscaler.activator)
        assert covering[0] == PROBE_WEBHOOK
        assert len(covering) == 3

    with step("a request while asleep wakes it and is reviewed"):
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

    with step("awake and Ready: no longer covered, and sleeps again"):
        # It sleeps again after its timeout.
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
    with step("sleeps"):
        wait_asleep(api, ref, 1, timeout=90)
    with step("wakes when the activator stops answering"):
        zeroscaler.webhook.stop()  # no activator to answer: its probe goes unanswered
        wait_for(lambda: state_of(api, ref)[0] == 1, "the backend woken", 60)
        wait_event(api, ref, "BacksWebhook", "the activator cannot serve")
    with step("kept awake while the activator is unanswered"):
        wait_for(lambda: serving(api, guard.namespace), "the guard Ready", timeout=90)
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
