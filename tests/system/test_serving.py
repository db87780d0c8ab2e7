"""Workloads the API server calls are never put to sleep; woken workloads get to be Ready first.

The backends here are paused Deployments (no pods, so no endpoints): the API server is never sent
to a pod address, and a registration that names them fails at once. The admission webhook is
`failurePolicy: Ignore` and covers a group no object is ever created in, so it touches no other
test. The slow starter is a real container on the real node, whose readiness probe passes late.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from localcluster import build, realnode
from localcluster.cluster import Cluster
from localcluster.processes import free_port
from testkit.controller import (
    ControllerProcess,
    Ref,
    config_for,
    create_configmap,
    create_workload,
    grant_watch,
    reasons,
    state_of,
    wait_asleep,
    wait_event,
    wait_woken,
)
from testkit.steps import step
from testkit.waiting import wait_for

NOWHERE_GROUP = "zs-serving.example.com"  # no object of this group is ever created


def create_service(api: k8s.ApiClient, ns: str, name: str, selector: dict[str, str]) -> None:
    body = {
        "metadata": {"name": name},
        "spec": {"selector": selector, "ports": [{"port": 443, "targetPort": 9443}]},
    }
    k8s.CoreV1Api(api).create_namespaced_service(ns, body)


@contextlib.contextmanager
def validating_webhook(api: k8s.ApiClient, name: str, ns: str, service: str) -> Iterator[None]:
    """A ValidatingWebhookConfiguration naming `ns/service`, for a group nothing is created in."""
    registration = k8s.AdmissionregistrationV1Api(api)
    registration.create_validating_webhook_configuration(
        {
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": f"check.{NOWHERE_GROUP}",
                    "clientConfig": {
                        "service": {"namespace": ns, "name": service, "path": "/validate"}
                    },
                    "rules": [
                        {
                            "apiGroups": [NOWHERE_GROUP],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["nothings"],
                        }
                    ],
                    "failurePolicy": "Ignore",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 1,
                }
            ],
        }
    )
    try:
        yield
    finally:
        with contextlib.suppress(ApiException):
            registration.delete_validating_webhook_configuration(name)


def test_a_workload_backing_a_validating_webhook_is_never_put_to_sleep(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    grant_watch(api, opted_ns, [("", ["configmaps"])])
    config = config_for("2s", "ConfigMap", watch_namespaces=opted_ns)
    create_service(api, opted_ns, "validator-webhook", {"app": "validator"})
    name = f"zs-serving-{secrets.token_hex(3)}"
    with validating_webhook(api, name, opted_ns, "validator-webhook"):
        with step("a workload behind a validating webhook, and a plain one"):
            validator = create_workload(api, opted_ns, "validator", config, paused=True)
            plain = create_workload(api, opted_ns, "plain", config, paused=True)

        with step("the validator is said to back the webhook, and stays awake past its timeout"):
            wait_event(api, validator, "BacksWebhook", f"ValidatingWebhookConfiguration {name}")
            wait_asleep(api, plain, 3)  # its timeout has passed: the validator's has too
            replicas, annotations = state_of(api, validator)
            assert replicas == 3
            assert annotations.get("zeroscaler.io/state") != "asleep"
            assert "Sleeping" not in reasons(api, validator)

    with step("without the webhook, it sleeps like any other"):
        # The link was the reason: without it, it sleeps like any other.
        wait_asleep(api, validator, 3)


def conversion_crd(name: str, plural: str, ns: str, service: str) -> dict[str, Any]:
    group = name.removeprefix(f"{plural}.")
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "names": {"kind": "Gadget", "plural": plural, "singular": "gadget"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"service": {"namespace": ns, "name": service}},
                    "conversionReviewVersions": ["v1"],
                },
            },
        },
    }


def api_service(group: str, ns: str, service: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"v1.{group}"},
        "spec": {
            "group": group,
            "version": "v1",
            "service": {"namespace": ns, "name": service, "port": 443},
            "groupPriorityMinimum": 100,
            "versionPriority": 10,
            "insecureSkipTLSVerify": True,
        },
    }


def test_a_sleeper_that_comes_to_back_a_conversion_or_an_api_service_is_woken(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess
) -> None:
    with step("a workload behind a Service sleeps"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        config = config_for("2s", "ConfigMap", watch_namespaces=opted_ns)
        create_service(api, opted_ns, "converter", {"app": "converter"})
        converter = create_workload(api, opted_ns, "converter", config, paused=True)
        wait_asleep(api, converter, 3)

    with step("a CRD converted through that Service is created"):
        group = f"g{secrets.token_hex(3)}.{NOWHERE_GROUP}"
        crd_name = f"gadgets.{group}"
        ext = k8s.ApiextensionsV1Api(api)
        crd = conversion_crd(crd_name, "gadgets", opted_ns, "converter")
        ext.create_custom_resource_definition(crd)
    try:
        with step("it is woken, as it backs the conversion"):
            why = f"backs CustomResourceDefinition {crd_name} (Service {opted_ns}/converter)"
            wait_woken(api, converter, why, 3)
            wait_event(api, converter, "BacksAPI", f"CustomResourceDefinition {crd_name}")
    finally:
        ext.delete_custom_resource_definition(crd_name)
    with step("the CRD gone, it sleeps again"):
        wait_asleep(api, converter, 3)  # the conversion gone, it sleeps again

    with step("an APIService served through that Service is registered"):
        # Not the CRD's group: the API server registers an APIService of its own for that one.
        aggregated = f"a{secrets.token_hex(3)}.{NOWHERE_GROUP}"
        registration = k8s.ApiregistrationV1Api(api)
        registration.create_api_service(api_service(aggregated, opted_ns, "converter"))
    try:  # kept short: an APIService without endpoints stalls namespace deletion everywhere
        with step("it is woken, as it backs the APIService"):
            why = f"backs APIService v1.{aggregated} (Service {opted_ns}/converter)"
            wait_woken(api, converter, why, 3)
            wait_event(api, converter, "BacksAPI", f"APIService v1.{aggregated}")
    finally:
        registration.delete_api_service(f"v1.{aggregated}")


def slow_starter(name: str, port: int, ready_after: int, config: dict[str, str]) -> dict[str, Any]:
    """A Deployment of one real container on the real node, Ready only `ready_after` s after it
    starts (its HTTP server, which the readiness probe asks, starts then)."""
    labels = {"app": name}
    script = (
        f"sleep {ready_after}; mkdir -p /tmp/www; echo ok > /tmp/www/index.html; "
        f"exec httpd -f -p 127.0.0.1:{port} -h /tmp/www"
    )
    probe = {"httpGet": {"host": "127.0.0.1", "port": port, "path": "/"}, "periodSeconds": 1}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": config},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "operator",
                    "automountServiceAccountToken": False,
                    "hostNetwork": True,  # no pod network on the real node
                    "nodeSelector": {realnode.LABEL: "true"},
                    "tolerations": [
                        {"key": realnode.LABEL, "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": build.BUSYBOX_IMAGE,
                            "imagePullPolicy": "Never",
                            "command": ["sh", "-c", script],
                            "readinessProbe": probe,
                            # A pod started while the last one stops waits for the port.
                            "ports": [{"containerPort": port, "name": "http"}],
                        }
                    ],
                },
            },
        },
    }


def ready_replicas(api: k8s.ApiClient, ref: Ref) -> int:
    obj = k8s.AppsV1Api(api).read_namespaced_deployment(ref.name, ref.namespace)
    return int(obj.status.ready_replicas or 0)


def awake_until_ready(api: k8s.ApiClient, ref: Ref) -> None:
    """Poll until the workload is Ready; fail if it is put to sleep before."""

    def ready() -> bool:
        replicas, annotations = state_of(api, ref)
        assert replicas == 1, "put back to sleep before it was Ready"
        assert annotations.get("zeroscaler.io/state") != "asleep"
        return ready_replicas(api, ref) >= 1

    wait_for(ready, f"{ref.name} Ready", timeout=90)


@pytest.fixture
def busybox(cluster: Cluster, real_node: realnode.RealNode) -> str:
    cluster.import_image(cluster.binaries["busybox.tar"])
    return build.BUSYBOX_IMAGE


def test_a_slow_starter_is_not_put_back_to_sleep_before_it_is_ready(
    api: k8s.ApiClient, opted_ns: str, controller: ControllerProcess, busybox: str
) -> None:
    with step("created not Ready, it is left awake until Ready, then sleeps"):
        grant_watch(api, opted_ns, [("", ["configmaps"])])
        config = config_for("3s", "ConfigMap", watch_namespaces=opted_ns)
        port = free_port()
        k8s.AppsV1Api(api).create_namespaced_deployment(
            opted_ns, slow_starter("slow", port, 12, config)
        )
        slow = Ref(opted_ns, "slow")
        awake_until_ready(api, slow)  # created not Ready: it waits as after a wake
        wait_asleep(api, slow, 1, timeout=90)

    with step("a change wakes it, it is left awake until Ready, then sleeps, its lateness said"):
        create_configmap(api, opted_ns, "trigger")
        wait_woken(api, slow, f"ConfigMap {opted_ns}/trigger created", 1)
        awake_until_ready(api, slow)  # 12 s to start, 3 s timeout: it waited
        wait_asleep(api, slow, 1, timeout=90)
        assert "NotReady" in reasons(api, slow)  # late, and said so
