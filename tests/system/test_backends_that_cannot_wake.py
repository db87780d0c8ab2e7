"""Never sleep what cannot wake: a backend whose own `failurePolicy: Fail` webhook covers a request
its wake needs stays awake, with a Warning naming the webhook and its rule; narrowed to another
namespace, the same webhook lets it sleep, and a covered request wakes it as ever; and zeroscaler
restarted while it sleeps still wakes it.

The backend is the real TLS server of `testkit/admission_backend.py` on the real node,
registered by `clientConfig.service` as kubebuilder's operators register theirs. The extra hooks
point at the same server; they cover only this test's namespaces, so no other test's requests
reach them.
"""

from __future__ import annotations

import base64
import contextlib
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from localcluster.cluster import Cluster
from testkit.activator import (
    CONTROLLER_COULD_ACT,
    REQUESTS,
    Zeroscaler,
    start_zeroscaler,
    stop_zeroscaler,
)
from testkit.admission_backend import Guard
from testkit.controller import (
    Ref,
    create_widget,
    start_controller,
    state_of,
    wait_asleep,
    wait_event,
)
from testkit.steps import step

pytestmark = pytest.mark.cluster


@pytest.fixture
def zeroscaler(
    cluster: Cluster, api: k8s.ApiClient, policy_ns: str, tmp_path: Path
) -> Iterator[Zeroscaler]:
    zs = start_zeroscaler(cluster, api, policy_ns, tmp_path)
    yield zs
    stop_zeroscaler(api, zs)


@contextlib.contextmanager
def extra_hook(
    api: k8s.ApiClient, guard: Guard, rule: dict[str, Any], namespaces: list[str]
) -> Iterator[str]:
    """One more ValidatingWebhookConfiguration served by the guard, `failurePolicy: Fail`, for
    requests in `namespaces` only."""
    name = f"guard-extra-{secrets.token_hex(3)}"
    registration = k8s.AdmissionregistrationV1Api(api)
    registration.create_validating_webhook_configuration(
        {
            "metadata": {"name": name},
            "webhooks": [_hook(guard, rule, namespaces)],
        }
    )
    try:
        yield name
    finally:
        with contextlib.suppress(ApiException):
            registration.delete_validating_webhook_configuration(name)


def _hook(guard: Guard, rule: dict[str, Any], namespaces: list[str]) -> dict[str, Any]:
    selector = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}
    service = {"namespace": guard.namespace, "name": guard.name, "path": "/validate"}
    bundle = base64.b64encode(guard.ca.cert_pem).decode()
    return {
        "name": "extra.guard.zeroscaler.io",
        "clientConfig": {"service": service, "caBundle": bundle},
        "rules": [rule],
        "namespaceSelector": {"matchExpressions": [selector]},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }


PODS = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
SCALE = {"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
         "resources": ["deployments/scale"]}  # fmt: skip


def _stays_awake_naming(api: k8s.ApiClient, ref: Ref, words: str) -> None:
    """A BacksWebhook Warning naming `words`, and no sleep while one could have come."""
    wait_event(api, ref, "BacksWebhook", words, timeout=60)
    time.sleep(CONTROLLER_COULD_ACT)
    replicas, annotations = state_of(api, ref)
    assert replicas == 1
    assert annotations.get("zeroscaler.io/state") != "asleep"


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (PODS, 'its rule CREATE pods in groups "" covers the pods of'),
        (SCALE, 'its rule UPDATE deployments/scale in groups "apps" covers the scale write'),
    ],
)
def test_a_backend_whose_own_webhook_covers_its_wake_stays_awake_until_narrowed(
    api: k8s.ApiClient, zeroscaler: Zeroscaler, guard: Guard, rule: dict[str, Any], words: str
) -> None:
    ref = Ref(guard.namespace, guard.name)
    with extra_hook(api, guard, rule, [guard.namespace]) as name:
        with step("its own webhook covers its wake: it stays awake, naming the webhook"):
            _stays_awake_naming(api, ref, f"{name}, webhook extra.guard.zeroscaler.io: {words}")
        with step(
            "narrowed to another namespace, the webhook covers nothing its wake needs: it sleeps"
        ):
            # Narrowed to another namespace: nothing its wake needs is covered. It sleeps, and a
            # covered request wakes it and is reviewed by it, as without the extra hook.
            patch = {"webhooks": [_hook(guard, rule, ["elsewhere"])]}
            k8s.AdmissionregistrationV1Api(api).patch_validating_webhook_configuration(name, patch)
            wait_asleep(api, ref, 1, timeout=90)
        with step("a covered request wakes it and is reviewed by it"):
            woken = create_widget(api, guard.namespace, "while-asleep")
            assert woken["metadata"]["labels"] == {"defaulted-by": "guard"}
            wait_event(api, ref, "Woken", "admission request", timeout=30)


def test_a_backend_whose_webhook_covers_zeroscalers_own_pods_stays_awake(
    api: k8s.ApiClient, zeroscaler: Zeroscaler, guard: Guard, policy_ns: str
) -> None:
    # zeroscaler could not come back while it slept: nothing would wake it.
    with step("it stays awake, naming the webhook"):
        ref = Ref(guard.namespace, guard.name)
        with extra_hook(api, guard, PODS, [policy_ns]) as name:
            _stays_awake_naming(
                api, ref, f"{name}, webhook extra.guard.zeroscaler.io: its rule CREATE pods"
            )


def test_zeroscaler_restarted_while_a_backend_sleeps_still_wakes_it(
    cluster: Cluster,
    api: k8s.ApiClient,
    zeroscaler: Zeroscaler,
    guard: Guard,
    policy_ns: str,
    tmp_path: Path,
) -> None:
    with step("the backend sleeps"):
        ref = Ref(guard.namespace, guard.name)
        wait_asleep(api, ref, 1, timeout=90)
    with step("the webhook and the controller are restarted, and it stays asleep"):
        # Both go (their pods deleted, say) and come back: the webhook reads the activator's paths
        # again, and the new controller keeps the tokens the configuration holds.
        zeroscaler.controller.stop()
        zeroscaler.webhook.stop()
        zeroscaler.webhook.start(
            extra=[
                "--activator-requests",
                REQUESTS,
                "--activator-configuration",
                zeroscaler.activator,
            ]
        )
        zeroscaler.controller = start_controller(
            cluster,
            policy_ns,
            tmp_path,
            id="ctl-again",
            extra=[
                "--webhook-configuration", zeroscaler.webhook.config_name,
                "--activator-requests", REQUESTS,
                "--activator-configuration", zeroscaler.activator,
                "--activator-probe-interval", "2",
            ],
        )  # fmt: skip
        assert state_of(api, ref)[0] == 0  # a restart woke nothing
    with step("a covered request still wakes it"):
        woken = create_widget(api, guard.namespace, "after-restart")
        assert woken["metadata"]["labels"] == {"defaulted-by": "guard"}
        wait_event(api, ref, "Woken", "admission request", timeout=30)
