"""The webhook as a real process, called over TLS by the real API server."""

from __future__ import annotations

import socket
import ssl
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.crds import create_crd
from testkit.steps import step
from testkit.waiting import wait_for
from testkit.webhook import (
    ZEROSCALER,
    Admitted,
    Webhook,
    admitted_until,
    create_workload,
    deployment,
    events_for,
    put_policy,
    running_webhook,
    served_serial,
    wait_injected,
)

pytestmark = pytest.mark.cluster

GROUP = "webhook-test.zeroscaler.io"
GADGET = f"Gadget.{GROUP}"
INJECTED = "zeroscaler.io/injected"
TIMEOUT_KEY = "zeroscaler.io/idle-timeout"
WATCHED = "zeroscaler.io/watched-kinds"
MAX_SLEEP = "zeroscaler.io/max-sleep"
OWNED = "zeroscaler.io/owned-kinds"
SCOPE = "zeroscaler.io/watch-namespaces"


@pytest.fixture(scope="session")
def gadgets(api: k8s.ApiClient) -> None:
    create_crd(api, GROUP, "Gadget", "gadgets")


@pytest.fixture
def hook(
    cluster: Cluster, api: k8s.ApiClient, tmp_path: Path, policy_ns: str, opted_ns: str, ns: str
) -> Iterator[Webhook]:
    with running_webhook(cluster, api, tmp_path, policy_ns) as running:
        running.enrol(api, opted_ns)
        running.enrol(api, ns)
        yield running


def grant_cluster_watch(api: k8s.ApiClient, namespace: str, account: str) -> None:
    """A ServiceAccount bound by ClusterRoleBinding to watch Gadgets and ConfigMaps."""
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    name = f"{namespace}-{account}"
    rbac.create_cluster_role(
        {
            "metadata": {"name": name},
            "rules": [
                {"apiGroups": [GROUP], "resources": ["gadgets", "gadgets/status"],
                 "verbs": ["get", "list", "watch", "update"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
            ],
        }
    )  # fmt: skip
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }
    )


@pytest.fixture
def cluster_rbac(api: k8s.ApiClient, opted_ns: str) -> Iterator[str]:
    grant_cluster_watch(api, opted_ns, "op")
    yield "op"
    rbac = k8s.RbacAuthorizationV1Api(api)
    rbac.delete_cluster_role_binding(f"{opted_ns}-op")
    rbac.delete_cluster_role(f"{opted_ns}-op")


def has_kinds(admitted: Admitted) -> bool:
    return WATCHED in admitted.annotations


def test_crd_and_configmap_watch_comes_back_annotated(
    cluster: Cluster, api: k8s.ApiClient, gadgets: None, hook: Webhook, opted_ns: str,
    cluster_rbac: str,
) -> None:  # fmt: skip
    obj = deployment("operator", service_account=cluster_rbac)
    admitted_until(cluster, opted_ns, obj, has_kinds, "the webhook to see the new RBAC")
    created = create_workload(cluster, opted_ns, obj)
    assert created.annotations == {
        TIMEOUT_KEY: "15m",
        MAX_SLEEP: "10h",  # the policy's default longest sleep
        WATCHED: f"ConfigMap,{GADGET}",
        SCOPE: "*",
        INJECTED: f"{TIMEOUT_KEY},{MAX_SLEEP},{SCOPE},{WATCHED}",
    }
    assert OWNED not in created.annotations
    # An UPDATE of the mutated object is not changed again.
    apps = k8s.AppsV1Api(api)
    apps.patch_namespaced_deployment("operator", opted_ns, {"metadata": {"labels": {"x": "1"}}})
    after = apps.read_namespaced_deployment("operator", opted_ns).metadata.annotations
    assert {k: v for k, v in after.items() if k.startswith("zeroscaler.io/")} == created.annotations
    statefulset = create_workload(
        cluster, opted_ns, deployment("sts", service_account=cluster_rbac, kind="StatefulSet")
    )
    assert statefulset.annotations[WATCHED] == f"ConfigMap,{GADGET}"


def test_namespace_not_opted_in_is_untouched(
    cluster: Cluster, hook: Webhook, opted_ns: str, ns: str
) -> None:
    # First prove the registration is live, so "untouched" is not just "not called yet".
    wait_injected(cluster, opted_ns, "probe", "the API server to call the webhook")
    created = create_workload(cluster, ns, deployment("plain"))
    assert created.annotations == {}


def test_person_written_values_survive(
    cluster: Cluster, gadgets: None, hook: Webhook, opted_ns: str, cluster_rbac: str
) -> None:
    obj = deployment(
        "mine", {TIMEOUT_KEY: "42m", "zeroscaler.io/watch-namespaces": "a,b"}, cluster_rbac
    )
    admitted_until(cluster, opted_ns, obj, has_kinds, "the webhook to see the new RBAC")
    created = create_workload(cluster, opted_ns, obj)
    assert created.annotations[TIMEOUT_KEY] == "42m"
    assert created.annotations[SCOPE] == "a,b"
    assert created.annotations[WATCHED] == f"ConfigMap,{GADGET}"
    assert created.annotations[INJECTED] == f"zeroscaler.io/max-sleep,{WATCHED}"


def test_invalid_annotation_gets_a_warning(cluster: Cluster, hook: Webhook, opted_ns: str) -> None:
    obj = deployment("bad", {TIMEOUT_KEY: "ten minutes"})
    admitted = admitted_until(cluster, opted_ns, obj, lambda a: a.warnings, "an admission warning")
    assert any(
        w.startswith(f"{TIMEOUT_KEY}: 'ten minutes' is not a duration") for w in admitted.warnings
    ), admitted.warnings
    assert admitted.annotations[TIMEOUT_KEY] == "ten minutes"


def timeout_is(value: str) -> Callable[[Admitted], bool]:
    return lambda a: a.annotations.get(TIMEOUT_KEY) == value


def test_policy_changes_apply_without_restart_and_invalid_policy_is_kept_out(
    cluster: Cluster, api: k8s.ApiClient, hook: Webhook, opted_ns: str, policy_ns: str
) -> None:
    obj = deployment("by-policy")
    put_policy(api, policy_ns, "zs-policy", "defaults: {idleTimeout: 5m}")
    admitted_until(cluster, opted_ns, obj, timeout_is("5m"), "policy 5m in force")
    put_policy(
        api, policy_ns, "zs-policy", "defaults: {idleTimeout: 7m}\nbounds: {maxIdleTimeout: 1h}"
    )
    admitted_until(cluster, opted_ns, obj, timeout_is("7m"), "policy 7m in force")

    put_policy(api, policy_ns, "zs-policy", "defaults: {idleTimeout: whenever}")
    event = wait_for(
        lambda: [e for e in events_for(api, policy_ns, "ConfigMap", "zs-policy")
                 if e.reason == "InvalidPolicy"],
        "an InvalidPolicy event on the ConfigMap",
    )  # fmt: skip
    assert event[0].type == "Warning"
    assert "defaults.idleTimeout: 'whenever' is not a duration" in event[0].message
    assert "keeping the last valid one" in event[0].message
    kept = create_workload(cluster, opted_ns, deployment("kept", {TIMEOUT_KEY: "3h"}))
    assert kept.annotations[TIMEOUT_KEY] == "1h"  # the kept policy's bound still clamps
    assert any("above the policy maximum 1h" in w for w in kept.warnings)
    assert create_workload(cluster, opted_ns, obj, dry_run=True).annotations[TIMEOUT_KEY] == "7m"
    assert "zs-policy" in hook.log.read_text()

    # A rule excluding workloads by label, added as a second ConfigMap.
    put_policy(api, policy_ns, "zs-policy-rules",
               "rules: [{name: keep-awake, workloadSelector: {matchLabels: {app: awake}}, "
               "enabled: false}]")  # fmt: skip
    excluded = deployment("awake")
    admitted_until(cluster, opted_ns, excluded, lambda a: not a.annotations, "rule in force")


def test_failure_policy_ignore_admits_when_the_webhook_is_down(
    cluster: Cluster, api: k8s.ApiClient, tmp_path: Path, policy_ns: str, opted_ns: str
) -> None:
    with running_webhook(cluster, api, tmp_path, policy_ns, failure_policy="Ignore") as hook:
        hook.enrol(api, opted_ns)
        wait_injected(cluster, opted_ns, "probe", "the webhook to be called")
        hook.stop()
        created = create_workload(cluster, opted_ns, deployment("while-down"))
        assert created.annotations == {}
        assert k8s.AppsV1Api(api).read_namespaced_deployment("while-down", opted_ns)


def test_serving_certificate_reloads_without_restart(
    cluster: Cluster, hook: Webhook, opted_ns: str
) -> None:
    with step("a new certificate written is served by the same process"):
        before = served_serial(hook)
        fresh = hook.write_certs()
        wanted = x509.load_pem_x509_certificate(fresh.cert_pem).serial_number
        wait_for(lambda: served_serial(hook) == wanted, "the new certificate to be served", 30)
        assert wanted != before
        assert hook.proc is not None
        assert hook.proc.poll() is None
    with step("calls go on after the reload"):
        wait_injected(cluster, opted_ns, "after-reload", "calls to go on after the reload")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_tls_below_1_2_is_refused(hook: Webhook) -> None:
    def handshake(highest: ssl.TLSVersion) -> str:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(str(hook.ca_file))
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer TLS 1.0 and 1.1 at all
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = highest
        with (
            socket.create_connection(("127.0.0.1", hook.port), timeout=5) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            return str(tls.version())

    assert handshake(ssl.TLSVersion.TLSv1_2) == "TLSv1.2"  # the same client gets in with 1.2
    with pytest.raises(ssl.SSLError, match=r"ALERT_PROTOCOL_VERSION|UNEXPECTED_EOF"):
        handshake(ssl.TLSVersion.TLSv1_1)


def test_the_webhook_serves_health_and_its_review_and_process_metrics(
    cluster: Cluster, hook: Webhook, opted_ns: str
) -> None:
    wait_injected(cluster, opted_ns, "m", "the webhook to be called")
    assert hook.get("/healthz").status_code == 200
    text = hook.get("/metrics").text
    assert 'zeroscaler_webhook_reviews_total{outcome="patched"}' in text
    assert "zeroscaler_webhook_discovery_kinds" in text
    assert "process_resident_memory_bytes " in text
    assert "process_cpu_seconds_total " in text
    assert "# TYPE zeroscaler_webhook_api_errors_total counter" in text


def test_certs_command_issues_rotates_and_sets_the_ca_bundle(
    cluster: Cluster, api: k8s.ApiClient, tmp_path: Path, policy_ns: str, opted_ns: str
) -> None:
    hook = Webhook(cluster, tmp_path, policy_ns)
    hook.register(api)  # its caBundle is replaced by the command below
    try:
        with step("the certs command issues a pair, and a second run changes nothing"):
            command = [
                str(ZEROSCALER), "certs", "--kubeconfig", str(cluster.kubeconfig),
                "-n", policy_ns, "--webhook-configuration", hook.config_name,
                "--host", "127.0.0.1", "--write-dir", str(tmp_path),
            ]  # fmt: skip
            first = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
            assert f"secret {policy_ns}/zeroscaler-webhook-tls: issued" in first.stdout
            assert "caBundle set on 1 webhook(s)" in first.stdout
            again = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
            assert "current, unchanged" in again.stdout
            assert "caBundle current" in again.stdout

        with step("the Secret and the caBundle hold the issued CA"):
            secret = k8s.CoreV1Api(api).read_namespaced_secret("zeroscaler-webhook-tls", policy_ns)
            assert secret.type == "kubernetes.io/tls"
            assert set(secret.data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
            config = k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(
                hook.config_name
            )
            assert config.webhooks[0].client_config.ca_bundle == secret.data["ca.crt"]

        with step("the API server trusts the issued pair: served with it, the webhook is called"):
            hook.start()
            hook.enrol(api, opted_ns)
            wait_injected(cluster, opted_ns, "issued", "a call over the issued pair")

        with step("the rotated pair is served, and the API server still calls"):
            rotated = subprocess.run(
                [*command, "--rotate-ca"], capture_output=True, text=True, timeout=60, check=True
            )
            assert "CA rotated" in rotated.stdout
            bundle = (tmp_path / "ca.crt").read_bytes()
            assert bundle.count(b"BEGIN CERTIFICATE") == 2  # the old CA stays trusted
            wanted = x509.load_pem_x509_certificate(
                (tmp_path / "tls.crt").read_bytes()
            ).serial_number
            wait_for(lambda: served_serial(hook) == wanted, "the rotated pair to be served", 30)
            wait_injected(cluster, opted_ns, "rotated", "a call over the rotated pair")
    finally:
        hook.unregister(api)
        hook.stop()
        print(hook.log_tail(60))
