"""Helpers for the webhook's system tests: a real webhook process called by the API server."""

from __future__ import annotations

import base64
import secrets
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from cryptography import x509
from kubernetes import client as k8s
from kubernetes import utils
from kubernetes.client.exceptions import ApiException

from localcluster.cluster import Cluster
from localcluster.processes import free_port, stop
from testkit.waiting import wait_for
from zeroscaler.certs.issue import CertPair, new_ca, new_serving_cert

WEBHOOK = Path(sys.executable).parent / "zeroscaler-webhook"
ZEROSCALER = Path(sys.executable).parent / "zeroscaler"
IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok only pretends to run containers
RUN_LABEL = "webhook-test.zeroscaler.io/run"
ENABLED = "zeroscaler.io/enabled"
INJECTED = "zeroscaler.io/injected"
TIMEOUT = 60.0
Obj = dict[str, Any]


@dataclass
class Webhook:
    """One `zeroscaler-webhook` process, its certificates and its registration."""

    cluster: Cluster
    workdir: Path
    policy_namespace: str
    run: str = field(default_factory=lambda: secrets.token_hex(4))
    port: int = field(default_factory=free_port)
    ca: CertPair = field(default_factory=new_ca)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def cert_file(self) -> Path:
        return self.workdir / "tls.crt"

    @property
    def key_file(self) -> Path:
        return self.workdir / "tls.key"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "ca.crt"

    @property
    def log(self) -> Path:
        return self.workdir / "webhook.log"

    @property
    def config_name(self) -> str:
        return f"zeroscaler-test-{self.run}"

    def write_certs(self) -> CertPair:
        pair = new_serving_cert(self.ca, ["127.0.0.1"])
        self.key_file.touch(mode=0o600, exist_ok=True)
        self.key_file.write_bytes(pair.key_pem)
        self.cert_file.write_bytes(pair.cert_pem)
        self.ca_file.write_bytes(self.ca.cert_pem)
        return pair

    def start(self, extra: Sequence[str] = (), command: Sequence[str] = ()) -> None:
        """Run the webhook; a `command` given replaces `zeroscaler-webhook` before its flags."""
        if not self.cert_file.exists():
            self.write_certs()
        cmd = [
            *(command or [str(WEBHOOK)]),
            "--kubeconfig", str(self.cluster.kubeconfig),
            "--namespace", self.policy_namespace,
            "--cert-file", str(self.cert_file),
            "--key-file", str(self.key_file),
            "--port", str(self.port),
            "--discovery-interval", "5",
            "--cert-check-interval", "0.5",
            "--log-level", "debug",
            *extra,
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        wait_for(self.is_ready, f"webhook ready on port {self.port}\n{self.log_tail()}", TIMEOUT)

    def get(self, path: str) -> httpx.Response:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        return httpx.get(f"https://127.0.0.1:{self.port}{path}", verify=ctx, timeout=5)

    def is_ready(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise AssertionError(f"webhook exited\n{self.log_tail()}")
        try:
            return self.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)

    def log_tail(self, lines: int = 60) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def register(self, api: k8s.ApiClient, failure_policy: str = "Fail") -> None:
        """Register by URL on loopback; only namespaces labelled with this run are sent to it."""
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": self.config_name},
            "webhooks": [
                {
                    "name": "mutate.zeroscaler.io",
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{self.port}/mutate",
                        "caBundle": base64.b64encode(self.ca.cert_pem).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["deployments", "statefulsets"],
                            "scope": "Namespaced",
                        }
                    ],
                    "namespaceSelector": {"matchLabels": {ENABLED: "true", RUN_LABEL: self.run}},
                    "failurePolicy": failure_policy,
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 5,
                    "reinvocationPolicy": "IfNeeded",
                }
            ],
        }
        k8s.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(body)

    def unregister(self, api: k8s.ApiClient) -> None:
        try:
            k8s.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(
                self.config_name
            )
        except ApiException as e:
            if e.status != 404:
                raise

    def enrol(self, api: k8s.ApiClient, namespace: str) -> None:
        """Label a namespace so this run's registration sends it here."""
        body = {"metadata": {"labels": {RUN_LABEL: self.run}}}
        k8s.CoreV1Api(api).patch_namespace(namespace, body)


@contextmanager
def running_webhook(
    cluster: Cluster, api: k8s.ApiClient, workdir: Path, policy_namespace: str,
    failure_policy: str = "Fail",
) -> Iterator[Webhook]:  # fmt: skip
    hook = Webhook(cluster, workdir, policy_namespace)
    hook.start()
    hook.register(api, failure_policy)
    try:
        yield hook
    finally:
        hook.unregister(api)
        hook.stop()
        print(hook.log_tail(80))  # shown by pytest when the test failed


def deployment(name: str, annotations: dict[str, str] | None = None,
               service_account: str | None = None, kind: str = "Deployment") -> Obj:  # fmt: skip
    pod: Obj = {"containers": [{"name": "main", "image": IMAGE}]}
    if service_account:
        pod["serviceAccountName"] = service_account
    meta: Obj = {"name": name, "labels": {"app": name}}
    if annotations:
        meta["annotations"] = annotations
    spec: Obj = {
        "replicas": 1,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec}


@dataclass(frozen=True)
class Admitted:
    """What the API server returned for a create: the object and any warnings."""

    obj: Obj
    warnings: tuple[str, ...]

    @property
    def annotations(self) -> dict[str, str]:
        result: dict[str, str] = self.obj.get("metadata", {}).get("annotations") or {}
        return result


def create_workload(
    cluster: Cluster, namespace: str, obj: Obj, *, dry_run: bool = False
) -> Admitted:
    """Create through the API server (so through the webhook); raises on an error status."""
    resource = "statefulsets" if obj["kind"] == "StatefulSet" else "deployments"
    params = {"dryRun": "All"} if dry_run else {}
    with cluster.client() as http:
        resp = http.post(
            f"/apis/apps/v1/namespaces/{namespace}/{resource}", json=obj, params=params
        )
    if resp.status_code >= 300:
        raise AssertionError(f"create {obj['metadata']['name']}: {resp.status_code} {resp.text}")
    return Admitted(resp.json(), tuple(_warnings(resp.headers.get_list("warning"))))


def _warnings(headers: list[str]) -> Iterator[str]:
    # Warning: 299 - "text"   (one header per warning, quoted-string with backslash escapes)
    for header in headers:
        _, _, rest = header.partition(' - "')
        yield rest.rstrip('"').replace('\\"', '"').replace("\\\\", "\\")


def admitted_until(
    cluster: Cluster, namespace: str, obj: Obj, ok: Callable[[Admitted], object], what: str
) -> Admitted:
    """Dry-run creates until `ok(admitted)` holds: the webhook's caches have caught up."""
    last: list[Admitted] = []

    def check() -> bool:
        last[:] = [create_workload(cluster, namespace, obj, dry_run=True)]
        return bool(ok(last[0]))

    try:
        wait_for(check, what, TIMEOUT, interval=0.3)
    except AssertionError as e:
        raise AssertionError(f"{e}\nlast admitted: {last and last[0]}") from None
    return last[0]


def wait_injected(cluster: Cluster, namespace: str, name: str, what: str) -> Admitted:
    """Dry-run creates of a plain Deployment until the webhook annotates it."""
    return admitted_until(
        cluster, namespace, deployment(name), lambda a: INJECTED in a.annotations, what
    )


def apply_objects(api: k8s.ApiClient, objects: Sequence[Obj]) -> None:
    """Create objects with the generic client; an existing object is left as it is."""
    for obj in objects:
        try:
            utils.create_from_dict(api, obj)
        except utils.FailToCreateError as e:
            if any(getattr(x, "status", None) != 409 for x in e.api_exceptions):
                raise


def put_policy(api: k8s.ApiClient, namespace: str, name: str, text: str) -> None:
    """Create or replace a policy ConfigMap."""
    core = k8s.CoreV1Api(api)
    body = {
        "metadata": {"name": name, "labels": {"zeroscaler.io/policy": "true"}},
        "data": {"policy.yaml": text},
    }
    try:
        core.replace_namespaced_config_map(name, namespace, body)
    except k8s.ApiException as e:
        if e.status != 404:
            raise
        core.create_namespaced_config_map(namespace, body)


def events_for(api: k8s.ApiClient, namespace: str, kind: str, name: str) -> list[Any]:
    events = k8s.CoreV1Api(api).list_namespaced_event(namespace).items
    return [e for e in events if e.involved_object.kind == kind and e.involved_object.name == name]


def times_reported(events: Iterable[Any], reason: str) -> int:
    """How often Events of `reason` were reported: a repeat raises one Event's count."""
    return sum(e.count or 1 for e in events if e.reason == reason)


def served_serial(hook: Webhook) -> int:
    """The serial number of the certificate the webhook presents now (TLS 1.2 or later)."""
    ctx = ssl.create_default_context(cafile=str(hook.ca_file))
    with (
        socket.create_connection(("127.0.0.1", hook.port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        if tls.version() not in ("TLSv1.2", "TLSv1.3"):
            raise AssertionError(f"negotiated {tls.version()}")
    if der is None:
        raise AssertionError("no peer certificate")
    return int(x509.load_der_x509_certificate(der).serial_number)
