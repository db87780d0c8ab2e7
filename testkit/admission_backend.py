"""An operator's own admission webhooks, served for real: validating and mutating, over TLS, from
a container on the real node, registered by `clientConfig.service` as operators ship them.

The server is Python's standard library in zeroscaler's image (the only image with Python here).
It refuses Widgets named `bad-*` (validating, `failurePolicy: Fail`), labels the others
`defaulted-by: guard` (mutating), and writes one line per review to a file on a host directory,
so a test can read what the backend itself saw.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from localcluster import realnode
from zeroscaler.certs.issue import CertPair, new_ca, new_serving_cert

SERVER = r"""
import json, os, signal, ssl, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, log = int(os.environ["PORT"]), os.environ["REVIEW_LOG"]
for name in ("tls.crt", "tls.key"):
    with open("/tmp/" + name, "w") as f:
        f.write(os.environ[name.replace(".", "_").upper()])

class Hook(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = review["request"]
        meta = (req.get("object") or {}).get("metadata") or {}
        name = meta.get("name", "")
        answer = {"uid": req["uid"], "allowed": True}
        path = self.path.split("?")[0]  # the API server adds ?timeout=
        with open(log, "a") as f:
            f.write(f"{path} {req['operation']} {name}\n")
        if path == "/validate" and name.startswith("bad-"):
            answer = {"uid": req["uid"], "allowed": False,
                      "status": {"code": 403, "message": f"guard refuses {name}"}}
        elif path == "/mutate":
            labels = dict(meta.get("labels") or {}, **{"defaulted-by": "guard"})
            patch = [{"op": "add", "path": "/metadata/labels", "value": labels}]
            answer["patchType"] = "JSONPatch"
            answer["patch"] = __import__("base64").b64encode(json.dumps(patch).encode()).decode()
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": answer}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

# As PID 1 it would ignore SIGTERM and hold its port for the whole grace period.
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
server = ThreadingHTTPServer(("", port), Hook)  # the node's addresses: its endpoint too
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("/tmp/tls.crt", "/tmp/tls.key")
server.socket = context.wrap_socket(server.socket, server_side=True)
print("serving", port, flush=True)
server.serve_forever()
"""


@dataclass(frozen=True)
class Guard:
    """One backend: its names, port, CA and the host file it logs reviews to."""

    namespace: str
    name: str
    port: int
    ca: CertPair
    reviews: Path

    def reviewed(self) -> list[str]:
        """Lines `PATH OPERATION NAME` of every review the backend answered."""
        return self.reviews.read_text().splitlines() if self.reviews.exists() else []


def new_guard(namespace: str, name: str, port: int, workdir: Path) -> Guard:
    logs = workdir / "guard-logs"
    logs.mkdir(mode=0o777, exist_ok=True)
    logs.chmod(0o777)  # the container runs as another user
    return Guard(namespace, name, port, new_ca(f"{name}-ca"), logs / "reviews.log")


def guard_deployment(guard: Guard, image: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A Deployment of the backend: one host-network pod on the real node, Ready once it serves."""
    pair = new_serving_cert(guard.ca, [f"{guard.name}.{guard.namespace}.svc"])
    labels = {"app": guard.name}
    env = {
        "PORT": str(guard.port),
        "REVIEW_LOG": f"/reviews/{guard.reviews.name}",
        "TLS_CRT": pair.cert_pem.decode(),
        "TLS_KEY": pair.key_pem.decode(),
    }
    probe = {
        "httpGet": {"host": "127.0.0.1", "port": guard.port, "path": "/", "scheme": "HTTPS"},
        "periodSeconds": 1,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": guard.name, "annotations": annotations},
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
                    "volumes": [
                        {"name": "reviews", "hostPath": {"path": str(guard.reviews.parent)}}
                    ],
                    "containers": [
                        {
                            "name": "main",
                            "image": image,
                            "imagePullPolicy": "Never",
                            "command": ["/usr/bin/python3", "-c", SERVER],
                            "env": [{"name": k, "value": v} for k, v in env.items()],
                            "volumeMounts": [{"name": "reviews", "mountPath": "/reviews"}],
                            "readinessProbe": probe,
                            # Declared, so that a pod started while the last one stops waits
                            # for the node's port rather than passing that pod's probe.
                            "ports": [{"containerPort": guard.port, "name": "https"}],
                        }
                    ],
                },
            },
        },
    }


def guard_service(guard: Guard) -> dict[str, Any]:
    return {
        "metadata": {"name": guard.name},
        "spec": {
            "selector": {"app": guard.name},
            "ports": [{"port": 443, "targetPort": guard.port}],
        },
    }


def _webhook(guard: Guard, name: str, path: str, group: str, resource: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {
            "service": {"namespace": guard.namespace, "name": guard.name, "path": path},
            "caBundle": base64.b64encode(guard.ca.cert_pem).decode(),
        },
        "rules": [
            {
                "apiGroups": [group],
                "apiVersions": ["*"],
                "operations": ["CREATE"],
                "resources": [resource],
                "scope": "Namespaced",
            }
        ],
        # Only its own namespace: no other test's objects ever reach it.
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": guard.namespace}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }


def register_guard(
    api: k8s.ApiClient, guard: Guard, group: str, resource: str, suffix: str
) -> list[tuple[str, str]]:
    """Its ValidatingWebhookConfiguration and MutatingWebhookConfiguration (kubebuilder's
    `failurePolicy: Fail`); returns (kind, name) of each, to delete afterwards."""
    registration = k8s.AdmissionregistrationV1Api(api)
    validating = f"guard-validating-{suffix}"
    mutating = f"guard-mutating-{suffix}"
    registration.create_validating_webhook_configuration(
        {
            "metadata": {"name": validating},
            "webhooks": [_webhook(guard, f"check.{group}", "/validate", group, resource)],
        }
    )
    registration.create_mutating_webhook_configuration(
        {
            "metadata": {"name": mutating},
            "webhooks": [_webhook(guard, f"default.{group}", "/mutate", group, resource)],
        }
    )
    return [
        ("ValidatingWebhookConfiguration", validating),
        ("MutatingWebhookConfiguration", mutating),
    ]


def unregister(api: k8s.ApiClient, registrations: list[tuple[str, str]]) -> None:
    registration = k8s.AdmissionregistrationV1Api(api)
    for kind, name in registrations:
        if kind == "ValidatingWebhookConfiguration":
            registration.delete_validating_webhook_configuration(name)
        else:
            registration.delete_mutating_webhook_configuration(name)
