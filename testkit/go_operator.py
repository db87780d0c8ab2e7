"""The example Go operator (examples/widget-operator) installed as its users would install it.

Its CRD, ServiceAccount and RBAC, a TLS Secret for its webhook, its Deployment in a real container
on the real node (host network), a Service selecting its pods, and a Mutating and a Validating
webhook configuration with `failurePolicy: Fail` naming that Service. Each configuration covers
the Widgets of the operator's namespace only, so operators of other tests never see them.

How the API server is told to reach the webhook is `registration`: "service" as the operator's
users write it (`clientConfig.service`, resolved by the API server to the Service's ready endpoint,
the real node's address), or "url" (the same port on 127.0.0.1, named directly), which no
Service links to a workload.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from image import static
from image.build import REPO
from localcluster.cluster import Cluster
from localcluster.processes import free_port
from testkit.crds import create_crd
from testkit.real_chart import PLACEMENT
from testkit.waiting import wait_for
from zeroscaler.certs.issue import new_ca, new_serving_cert

GROUP, VERSION, KIND, PLURAL = "example.zeroscaler.io", "v1", "Widget", "widgets"
WATCHED_KIND = f"{KIND}.{GROUP}"  # as zeroscaler's watched-kinds annotation names it
NAME = "widget-operator"
IMAGE = static.WIDGET_OPERATOR.name()
LEASE = NAME
Registration = Literal["service", "url"]


@dataclass(frozen=True)
class GoOperator:
    """One installed operator: where it is, what it registered, and its ports."""

    namespace: str
    webhook_port: int
    probe_port: int
    registration: Registration

    @property
    def configurations(self) -> str:
        """The name of both of its webhook configurations (they are cluster-scoped)."""
        return f"{NAME}-{self.namespace}"

    @property
    def service(self) -> str:
        return NAME


def _labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME}


def _rbac(api: k8s.ApiClient, ns: str) -> None:
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": NAME}})
    rules = [
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get", "update"]},
        # controller-runtime's leader election, and the Events it records about it
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "watch", "create", "update", "patch"],
        },
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    rbac.create_namespaced_role(ns, {"metadata": {"name": NAME}, "rules": rules})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}],
        },
    )


def _cluster_watch(api: k8s.ApiClient, ns: str, kinds: list[tuple[str, str]]) -> None:
    """Let the operator's ServiceAccount get, list and watch `kinds` in every namespace."""
    rbac = k8s.RbacAuthorizationV1Api(api)
    name = f"{NAME}-{ns}"
    rules = [
        {"apiGroups": [g], "resources": [r], "verbs": ["get", "list", "watch"]} for g, r in kinds
    ]
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}],
        }
    )


def _cluster_unwatch(api: k8s.ApiClient, ns: str) -> None:
    rbac = k8s.RbacAuthorizationV1Api(api)
    with contextlib.suppress(ApiException):
        rbac.delete_cluster_role_binding(f"{NAME}-{ns}")
    with contextlib.suppress(ApiException):
        rbac.delete_cluster_role(f"{NAME}-{ns}")


def _tls(api: k8s.ApiClient, ns: str) -> bytes:
    """The webhook's serving Secret, valid for the Service's name and for 127.0.0.1; the CA."""
    ca = new_ca(f"{NAME}-ca")
    serving = new_serving_cert(ca, ["127.0.0.1", f"{NAME}.{ns}.svc"])  # CN: 64 characters at most
    data = {"tls.crt": serving.cert_pem, "tls.key": serving.key_pem}
    k8s.CoreV1Api(api).create_namespaced_secret(
        ns,
        {
            "metadata": {"name": f"{NAME}-tls"},
            "type": "kubernetes.io/tls",
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        },
    )
    return ca.cert_pem


def deployment(
    server: str,
    webhook_port: int,
    probe_port: int,
    annotations: dict[str, str],
    extra_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The operator's Deployment: one replica on the real node's host network."""
    api = urlparse(server)
    probe = {"host": "127.0.0.1", "port": probe_port}
    container = {
        "name": "manager",
        "image": IMAGE,
        "imagePullPolicy": "Never",  # imported into the node, as there is no registry
        "args": [
            # All the node's addresses: its Service's endpoint is the node address, not 127.0.0.1.
            "--webhook-host=",
            f"--webhook-port={webhook_port}",
            f"--health-probe-bind-address=127.0.0.1:{probe_port}",
            "--cert-dir=/tls",
            *extra_args,
        ],
        "env": [
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            # No Service addresses on the real node: in-cluster config names the API server itself.
            {"name": "KUBERNETES_SERVICE_HOST", "value": str(api.hostname)},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(api.port)},
        ],
        "readinessProbe": {"httpGet": {**probe, "path": "/readyz"}, "periodSeconds": 1},
        "livenessProbe": {"httpGet": {**probe, "path": "/healthz"}, "periodSeconds": 5},
        "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}],
        # On the host network, declared ports keep a new pod off the node until the last one
        # has let them go: otherwise its probe would be answered by the pod stopping.
        "ports": [
            {"containerPort": webhook_port, "name": "webhook"},
            {"containerPort": probe_port, "name": "probes"},
        ],
        "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "labels": _labels(), "annotations": annotations},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": _labels()},
            "template": {
                "metadata": {"labels": _labels()},
                "spec": {
                    "serviceAccountName": NAME,
                    "hostNetwork": True,  # no pod network on the real node
                    **PLACEMENT,  # on the real node, as zeroscaler's own pods there
                    "terminationGracePeriodSeconds": 2,
                    "containers": [container],
                    "volumes": [{"name": "tls", "secret": {"secretName": f"{NAME}-tls"}}],
                },
            },
        },
    }


def _client_config(op: GoOperator, path: str, ca: bytes) -> dict[str, Any]:
    bundle = base64.b64encode(ca).decode()
    if op.registration == "url":
        return {"url": f"https://127.0.0.1:{op.webhook_port}{path}", "caBundle": bundle}
    service = {"namespace": op.namespace, "name": op.service, "path": path, "port": 443}
    return {"service": service, "caBundle": bundle}


def _webhook(op: GoOperator, name: str, path: str, ca: bytes) -> dict[str, Any]:
    return {
        "name": f"{name}.{GROUP}",
        "clientConfig": _client_config(op, path, ca),
        "rules": [
            {
                "apiGroups": [GROUP],
                "apiVersions": [VERSION],
                "operations": ["CREATE", "UPDATE"],
                "resources": [PLURAL],
            }
        ],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": op.namespace}},
        "failurePolicy": "Fail",  # as kubebuilder scaffolds every webhook
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 10,
    }


def _register(api: k8s.ApiClient, op: GoOperator, ca: bytes) -> None:
    registration = k8s.AdmissionregistrationV1Api(api)
    meta = {"name": op.configurations}
    registration.create_mutating_webhook_configuration(
        {"metadata": meta, "webhooks": [_webhook(op, "default", "/mutate", ca)]}
    )
    registration.create_validating_webhook_configuration(
        {"metadata": meta, "webhooks": [_webhook(op, "validate", "/validate", ca)]}
    )


def _unregister(api: k8s.ApiClient, op: GoOperator) -> None:
    registration = k8s.AdmissionregistrationV1Api(api)
    with contextlib.suppress(ApiException):
        registration.delete_mutating_webhook_configuration(op.configurations)
    with contextlib.suppress(ApiException):
        registration.delete_validating_webhook_configuration(op.configurations)


@contextlib.contextmanager
def installed(
    cluster: Cluster,
    api: k8s.ApiClient,
    ns: str,
    *,
    annotations: dict[str, str] | None = None,
    registration: Registration = "service",
    watch_pods: bool = False,
) -> Iterator[GoOperator]:
    """Install the operator in `ns` (its image imported into the real node first); its webhook
    configurations are removed on leaving, the rest goes with the namespace. With `watch_pods`
    it also watches Pods and ReplicaSets in every namespace (a ClusterRole lets it)."""
    cluster.import_image(image_archive())
    create_crd(api, GROUP, KIND, PLURAL)
    op = GoOperator(ns, free_port(), free_port(), registration)
    _rbac(api, ns)
    if watch_pods:
        _cluster_watch(api, ns, [("", "pods"), ("apps", "replicasets")])
    ca = _tls(api, ns)
    body = {
        "metadata": {"name": op.service, "labels": _labels()},
        "spec": {
            "selector": _labels(),
            "ports": [{"name": "webhook", "port": 443, "targetPort": op.webhook_port}],
        },
    }
    k8s.CoreV1Api(api).create_namespaced_service(ns, body)
    try:
        _register(api, op, ca)
        args = ("--watch-pods",) if watch_pods else ()
        body = deployment(cluster.server, op.webhook_port, op.probe_port, annotations or {}, args)
        k8s.AppsV1Api(api).create_namespaced_deployment(ns, body)
        yield op
    finally:
        _unregister(api, op)
        if watch_pods:
            _cluster_unwatch(api, ns)


def image_archive() -> Path:
    archive = REPO / "dist" / f"{static.WIDGET_OPERATOR.repository}-image.tar"
    assert archive.exists(), f"{archive} is missing: `make test` builds it ({NAME})"
    return archive


def ready_pods(api: k8s.ApiClient, op: GoOperator) -> list[Any]:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(
        op.namespace, label_selector=f"app.kubernetes.io/name={NAME}"
    )
    return [
        p
        for p in pods.items
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def wait_ready(api: k8s.ApiClient, op: GoOperator, timeout: float = 120) -> Any:
    """The operator's Ready pod (its webhook serves: the readiness check is the server's)."""
    try:
        return wait_for(lambda: next(iter(ready_pods(api, op)), None), f"{NAME} Ready", timeout)
    except AssertionError as e:
        pods = k8s.CoreV1Api(api).list_namespaced_pod(op.namespace)
        shown = [
            (p.metadata.name, p.status.conditions, p.status.container_statuses) for p in pods.items
        ]
        raise AssertionError(f"{e}\npods: {shown}\nlog:\n{logs(api, op)[-4000:]}") from None


def lease_holder(api: k8s.ApiClient, op: GoOperator) -> str:
    try:
        lease = k8s.CoordinationV1Api(api).read_namespaced_lease(LEASE, op.namespace)
    except ApiException as e:
        if e.status == 404:
            return ""
        raise
    return str(lease.spec.holder_identity or "")


def widget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


def create_widget(api: k8s.ApiClient, ns: str, name: str, **spec: Any) -> dict[str, Any]:
    created: dict[str, Any] = k8s.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, widget(name, spec)
    )
    return created


def read_widget(api: k8s.ApiClient, ns: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, name
    )
    return found


def logs(api: k8s.ApiClient, op: GoOperator) -> str:
    """The log of the operator's current pod(s)."""
    core = k8s.CoreV1Api(api)
    pods = core.list_namespaced_pod(op.namespace, label_selector=f"app.kubernetes.io/name={NAME}")
    return "\n".join(
        str(core.read_namespaced_pod_log(p.metadata.name, op.namespace)) for p in pods.items
    )
