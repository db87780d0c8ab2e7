"""In-process certificate renewal while the real API server keeps calling the webhook.

Two webhook replicas share one TLS Secret and one MutatingWebhookConfiguration (a webhook entry
each, failurePolicy Fail, so a certificate either replica serves that the API server does not
trust fails the admission). Lifetimes are seconds long, so within a minute each replica renews its
serving certificate and the CA rotates; dry-run creates run through the API server all along.
"""

from __future__ import annotations

import base64
import re
import socket
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from testkit.waiting import wait_for
from testkit.webhook import RUN_LABEL, Webhook, create_workload, deployment
from zeroscaler.certs.issue import new_ca, new_serving_cert
from zeroscaler.certs.rotation import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, split_bundle, stamps_for

SERVING_LIFE, CA_LIFE = timedelta(seconds=8), timedelta(seconds=24)
RENEWAL_FLAGS = [
    "--cert-renew-fraction", "0.5",
    "--cert-serving-lifetime", f"{SERVING_LIFE.seconds}s",
    "--cert-ca-lifetime", f"{CA_LIFE.seconds}s",
    "--cert-sync-interval", "0.25",
    "--cert-settle", "1.5",
]  # fmt: skip
LOOP_LIMIT = 120.0  # seconds; a rotation takes about half the CA lifetime plus two settle times


def _tls_data(bundle: bytes, ca_key: bytes, cert: bytes, key: bytes) -> dict[str, str]:
    raw = {CA_CERT: bundle, CA_KEY: ca_key, TLS_CERT: cert, TLS_KEY: key}
    return {k: base64.b64encode(v).decode() for k, v in raw.items()}


def _config(name: str, run: str, hooks: list[Webhook], bundle: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"replica-{i}.renewal.zeroscaler.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{hook.port}/mutate",
                    "caBundle": base64.b64encode(bundle).decode(),
                },
                "rules": [
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["deployments"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchLabels": {RUN_LABEL: run}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
            for i, hook in enumerate(hooks)
        ],
    }


def _served(hook: Webhook) -> x509.Certificate:
    """The certificate the replica presents now (not verified: the test checks its issuer)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", hook.port), timeout=5) as raw,
        ctx.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def _handshake_fails(hook: Webhook, index: int, api: k8s.ApiClient, config: str) -> str | None:
    """Why a new connection, trusting what the API server trusts now, fails (None: it works).

    The API server keeps its connections to a webhook open, so it meets a renewed certificate only
    on a new connection; this makes one for every replica each round.
    """
    entries = k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(config)
    trusted = base64.b64decode(entries.webhooks[index].client_config.ca_bundle).decode()
    ctx = ssl.create_default_context(cadata=trusted)
    try:
        with (
            socket.create_connection(("127.0.0.1", hook.port), timeout=5) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1"),
        ):
            return None
    except ssl.SSLError as e:
        return f"replica {index}: {e}"


def _issued_by(cert: x509.Certificate, ca_pem: bytes) -> bool:
    try:
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
    except Exception:
        return False
    return True


def _steps(hook: Webhook) -> dict[str, float]:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    text = httpx.get(f"https://127.0.0.1:{hook.port}/metrics", verify=ctx, timeout=5).text
    pattern = r'^zeroscaler_webhook_certificate_steps_total\{action="([a-z-]+)"\} (\S+)$'
    return {m[1]: float(m[2]) for m in re.finditer(pattern, text, re.M)}


@pytest.fixture
def replicas(
    cluster: Cluster, api: k8s.ApiClient, ns: str, opted_ns: str, tmp_path: Path
) -> Iterator[tuple[list[Webhook], str, str]]:
    """Two renewing replicas, their Secret (in `ns`) and their registration (for `opted_ns`)."""
    now = datetime.now(UTC)
    ca = new_ca("renewal-test-ca", lifetime=CA_LIFE, now=now)
    serving = new_serving_cert(ca, ["127.0.0.1"], lifetime=SERVING_LIFE, now=now)
    secret = "webhook-tls"
    core = k8s.CoreV1Api(api)
    core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": secret, "annotations": stamps_for("issued", now)},
            "type": "kubernetes.io/tls",
            "data": _tls_data(ca.cert_pem, ca.key_pem, serving.cert_pem, serving.key_pem),
        },
    )
    hooks = [Webhook(cluster, tmp_path / f"replica-{i}", ns) for i in range(2)]
    config = f"zeroscaler-renewal-{hooks[0].run}"
    admission = k8s.AdmissionregistrationV1Api(api)
    admission.create_mutating_webhook_configuration(
        _config(config, hooks[0].run, hooks, ca.cert_pem)
    )
    hooks[0].enrol(api, opted_ns)
    try:
        for hook in hooks:
            hook.workdir.mkdir()
            hook.cert_file.write_bytes(serving.cert_pem)
            hook.key_file.write_bytes(serving.key_pem)
            hook.ca_file.write_bytes(ca.cert_pem)  # for the kit's readiness check at start
            hook.start(
                ["--cert-secret", secret, "--cert-webhook-configuration", config, *RENEWAL_FLAGS]
            )
        yield hooks, secret, config
    finally:
        admission.delete_mutating_webhook_configuration(config)
        for hook in hooks:
            hook.stop()
            print(hook.log_tail(40))  # shown by pytest when the test failed


def test_serving_renewal_and_ca_rotation_fail_no_admission(
    cluster: Cluster,
    api: k8s.ApiClient,
    ns: str,
    opted_ns: str,
    replicas: tuple[list[Webhook], str, str],
) -> None:
    hooks, secret_name, config = replicas
    core = k8s.CoreV1Api(api)

    def bundle() -> list[bytes]:
        data = core.read_namespaced_secret(secret_name, ns).data
        return split_bundle(base64.b64decode(data[CA_CERT]))

    first_ca = bundle()[0]
    probe = deployment("probe")
    admitted, failed, handshakes, untrusted = 0, [], 0, []
    started = datetime.now(UTC)

    def rotated_and_served() -> bool:
        """The rotation's last step is done: the Secret and every webhook's caBundle hold only the
        new CA, and both replicas serve a pair it signed."""
        cas = bundle()
        if len(cas) != 1 or cas[0] == first_ca:
            return False
        entries = k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(config)
        trusted = {base64.b64decode(w.client_config.ca_bundle) for w in entries.webhooks}
        return trusted == {cas[0]} and all(_issued_by(_served(h), cas[0]) for h in hooks)

    while not rotated_and_served():
        assert (datetime.now(UTC) - started).total_seconds() < LOOP_LIMIT, (
            f"no completed CA rotation; steps so far: {[_steps(h) for h in hooks]}"
        )
        for _ in range(5):
            try:
                create_workload(cluster, opted_ns, probe, dry_run=True)
                admitted += 1
            except AssertionError as e:
                failed.append(str(e))
        for i, hook in enumerate(hooks):
            handshakes += 1
            if (why := _handshake_fails(hook, i, api, config)) is not None:
                untrusted.append(why)

    print(f"admitted {admitted}, new connections {handshakes}, steps {[_steps(h) for h in hooks]}")
    assert failed == [], (
        f"{len(failed)} of {admitted + len(failed)} admissions failed: {failed[:3]}"
    )
    assert untrusted == [], f"{len(untrusted)} of {handshakes} new connections: {untrusted[:3]}"
    assert admitted > 0
    steps = [_steps(h) for h in hooks]
    total = {a: sum(s.get(a, 0) for s in steps) for a in ("rotate-ca", "renew-serving")}
    # One renewal before the rotation and one inside it, at the least.
    assert total["renew-serving"] >= 2, steps
    assert total["rotate-ca"] >= 1, steps


def test_a_drifted_ca_bundle_is_repaired(
    api: k8s.ApiClient, ns: str, replicas: tuple[list[Webhook], str, str]
) -> None:
    _, secret_name, config = replicas
    admission = k8s.AdmissionregistrationV1Api(api)
    stranger = base64.b64encode(new_ca("someone-else").cert_pem).decode()
    patch = [{"op": "replace", "path": "/webhooks/1/clientConfig/caBundle", "value": stranger}]
    admission.patch_mutating_webhook_configuration(config, patch)

    def repaired() -> bool:
        # The Secret's CAs may change meanwhile (a rotation is due every few seconds): read both.
        wanted = k8s.CoreV1Api(api).read_namespaced_secret(secret_name, ns).data[CA_CERT]
        hooks = admission.read_mutating_webhook_configuration(config).webhooks
        return all(h.client_config.ca_bundle == wanted for h in hooks)

    wait_for(repaired, "the renewer to set the caBundle back to the Secret's CAs", 30)
