"""cert-manager's own certificate controllers (examples/cert-manager) installed as its users would
install them: its CRDs, a ServiceAccount with the RBAC those controllers need, and its Deployment
in a real container on the real node (host network), working in one namespace."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from image import static
from image.build import REPO
from localcluster import build
from localcluster.cluster import Cluster
from localcluster.processes import free_port
from testkit.real_chart import PLACEMENT
from testkit.waiting import wait_for

NAME = "cert-manager"
GROUP, VERSION = "cert-manager.io", "v1"
IMAGE = static.CERT_MANAGER.name()
CERTIFICATE = f"Certificate.{GROUP}"  # as zeroscaler's annotations name the kind


@dataclass(frozen=True)
class CertManager:
    namespace: str
    probe_port: int


def image_archive() -> Path:
    archive = REPO / "dist" / f"{static.CERT_MANAGER.repository}-image.tar"
    assert archive.exists(), f"{archive} is missing: `make test` builds it ({NAME})"
    return archive


def install_crds(api: k8s.ApiClient) -> None:
    """cert-manager's CRDs, from the module its build used (cached beside its binary)."""
    found = build.ensure_cert_manager()
    ext = k8s.ApiextensionsV1Api(api)
    for name in build.CERT_MANAGER_CRDS:
        crd = yaml.safe_load(found[name].read_text())
        try:
            ext.create_custom_resource_definition(crd)
        except ApiException as e:
            if e.status != 409:
                raise
    for name in build.CERT_MANAGER_CRDS:
        crd_name = str(yaml.safe_load(found[name].read_text())["metadata"]["name"])
        wait_for(functools.partial(_established, ext, crd_name), f"CRD {crd_name} established")


def _established(ext: k8s.ApiextensionsV1Api, name: str) -> bool:
    crd = ext.read_custom_resource_definition(name)
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def _rbac(api: k8s.ApiClient, ns: str) -> None:
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": NAME}})
    rules = [
        {"apiGroups": [GROUP], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    rbac.create_namespaced_role(ns, {"metadata": {"name": NAME}, "rules": rules})
    # ClusterIssuers are cluster-scoped: its informers list them even when it works in one
    # namespace.
    clustered = f"{NAME}-{ns}"
    read = ["get", "list", "watch"]
    cluster_rules = [{"apiGroups": [GROUP], "resources": ["clusterissuers"], "verbs": read}]
    rbac.create_cluster_role({"metadata": {"name": clustered}, "rules": cluster_rules})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": clustered},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": clustered,
            },
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}],
        }
    )
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}],
        },
    )


def deployment(server: str, ns: str, probe_port: int, annotations: dict[str, str]) -> Any:
    api = urlparse(server)
    probe = {"host": "127.0.0.1", "port": probe_port}
    labels = {"app.kubernetes.io/name": NAME}
    container = {
        "name": "controller",
        "image": IMAGE,
        "imagePullPolicy": "Never",
        "args": [
            f"--namespace={ns}",
            f"--cluster-resource-namespace={ns}",
            f"--health-probe-bind-address=127.0.0.1:{probe_port}",
        ],
        "env": [
            {"name": "KUBERNETES_SERVICE_HOST", "value": str(api.hostname)},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(api.port)},
        ],
        "readinessProbe": {"httpGet": {**probe, "path": "/readyz"}, "periodSeconds": 1},
        "ports": [{"containerPort": probe_port, "name": "probes"}],
        "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "labels": labels, "annotations": annotations},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": NAME,
                    "hostNetwork": True,
                    **PLACEMENT,
                    "terminationGracePeriodSeconds": 2,
                    "containers": [container],
                },
            },
        },
    }


@contextlib.contextmanager
def installed(
    cluster: Cluster, api: k8s.ApiClient, ns: str, *, annotations: dict[str, str]
) -> Iterator[CertManager]:
    """cert-manager in `ns`, working in `ns` alone; it goes with the namespace."""
    cluster.import_image(image_archive())
    install_crds(api)
    _rbac(api, ns)
    cm = CertManager(ns, free_port())
    body = deployment(cluster.server, ns, cm.probe_port, annotations)
    k8s.AppsV1Api(api).create_namespaced_deployment(ns, body)
    try:
        yield cm
    finally:
        rbac = k8s.RbacAuthorizationV1Api(api)
        with contextlib.suppress(ApiException):
            rbac.delete_cluster_role_binding(f"{NAME}-{ns}")
        with contextlib.suppress(ApiException):
            rbac.delete_cluster_role(f"{NAME}-{ns}")


def self_signed_issuer(api: k8s.ApiClient, ns: str, name: str = "self") -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Issuer", "metadata": {"name": name},
            "spec": {"selfSigned": {}}}  # fmt: skip
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, ns, "issuers", body)


def certificate(
    api: k8s.ApiClient, ns: str, name: str, *, duration: str, renew_before: str
) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Certificate",
        "metadata": {"name": name},
        "spec": {
            "secretName": f"{name}-tls",
            "commonName": f"{name}.example.com",
            "dnsNames": [f"{name}.example.com"],
            "duration": duration,
            "renewBefore": renew_before,
            "issuerRef": {"name": "self", "kind": "Issuer", "group": GROUP},
        },
    }
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, ns, "certificates", body
    )


def read_certificate(api: k8s.ApiClient, ns: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, "certificates", name
    )
    return found


def logs(api: k8s.ApiClient, ns: str) -> str:
    core = k8s.CoreV1Api(api)
    pods = core.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/name={NAME}")
    out = []
    for p in pods.items:
        with contextlib.suppress(ApiException):
            out.append(str(core.read_namespaced_pod_log(p.metadata.name, ns)))
    return "\n".join(out)
