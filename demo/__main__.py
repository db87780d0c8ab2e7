"""`make demo`: zeroscaler on a real local Kubernetes, from `helm install` to sleep and wake.

Everything runs on loopback: the control plane, and the webhook and controller as local processes
(kwok's pods run no containers), which the API server reaches by URL.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from certs.issue import new_ca, new_serving_cert
from localcluster import build
from localcluster.cluster import Cluster, start
from localcluster.processes import free_port, running

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
IDLE_TIMEOUT = "20s"

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.demo.zeroscaler.io}
spec:
  group: demo.zeroscaler.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""

OPERATOR = """
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {zeroscaler.io/enabled: "true"}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: widget-operator, namespace: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: widget-operator}
rules:
- apiGroups: [demo.zeroscaler.io]
  resources: [widgets, widgets/status]
  verbs: [get, list, watch, update, patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: widget-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widget-operator}
subjects:
- {kind: ServiceAccount, name: widget-operator, namespace: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: widget-operator, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: widget-operator}}
  template:
    metadata: {labels: {app: widget-operator}}
    spec:
      serviceAccountName: widget-operator
      containers: [{name: manager, image: registry.k8s.io/pause:3.10}]
"""

WIDGET = """
apiVersion: demo.zeroscaler.io/v1
kind: Widget
metadata: {name: blue, namespace: shop}
spec: {color: blue}
"""


def step(message: str) -> None:
    print(f"\n== {message}", flush=True)


def show(cluster: Cluster, *args: str) -> str:
    out = cluster.kubectl(*args).stdout.rstrip()
    print(f"$ kubectl {' '.join(args)}\n{out}", flush=True)
    return out


def wait(check: Callable[[], bool], what: str, timeout: float = 90) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if check():
            return time.monotonic() - began
        time.sleep(0.2)
    raise SystemExit(f"demo failed: {what} did not happen within {timeout:.0f}s")


def replicas(cluster: Cluster) -> int:
    out = cluster.kubectl(
        "-n",
        "shop",
        "get",
        "deployment",
        "widget-operator",
        "-o",
        "jsonpath={.spec.replicas}",
        check=False,
    ).stdout
    return int(out) if out.strip().isdigit() else -1


def zeroscaler_status(cluster: Cluster) -> None:
    out = subprocess.run(
        [str(BIN / "zeroscaler"), "status", "--kubeconfig", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.rstrip()
    print(f"$ zeroscaler status\n{out}", flush=True)


def main() -> int:
    binaries = build.ensure_binaries(progress=lambda m: print(f"[controlplane] {m}", flush=True))
    work = Path(tempfile.mkdtemp(prefix="zeroscaler-demo-"))
    step("a real control plane on 127.0.0.1: etcd, API server, controllers, scheduler, kwok")
    cluster = start(binaries, nodes=2, progress=lambda m: print(f"   {m}", flush=True))
    try:
        return run(cluster, binaries["helm"], work)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def run(cluster: Cluster, helm: Path, work: Path) -> int:
    kubeconfig = str(cluster.kubeconfig)
    port, metrics_port = free_port(), free_port()
    ca = new_ca("zeroscaler-demo-ca")
    cert, key = new_serving_cert(ca, ["127.0.0.1"]).write(work, "webhook")

    step("helm install zeroscaler (webhook registered by URL on loopback; policy: idle after 20s)")
    cluster.kubectl("create", "namespace", "zeroscaler")
    cluster.kubectl(
        "-n",
        "zeroscaler",
        "create",
        "secret",
        "tls",
        "zeroscaler-webhook-tls",
        f"--cert={cert}",
        f"--key={key}",
    )
    subprocess.run([
        str(helm), "install", "zeroscaler", str(ROOT / "charts" / "zeroscaler"),
        "--kubeconfig", kubeconfig, "--namespace", "zeroscaler",
        "--set", "webhook.clientConfig.mode=url",
        "--set", f"webhook.clientConfig.url=https://127.0.0.1:{port}/mutate",
        "--set", "certificates.mode=secret",
        "--set", f"certificates.caBundle={base64.b64encode(ca.cert_pem).decode()}",
        "--set", f"policy.defaults.idleTimeout={IDLE_TIMEOUT}",
        "--set", "policy.bounds.minIdleTimeout=10s",
    ], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    show(cluster, "-n", "zeroscaler", "get", "deployments,poddisruptionbudgets,configmaps")

    step("the webhook and the controller run as local processes (kwok pods run no containers)")
    webhook_cmd = [
        str(BIN / "zeroscaler-webhook"),
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        "zeroscaler",
        "--cert-file",
        str(cert),
        "--key-file",
        str(key),
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    controller_cmd = [
        str(BIN / "zeroscaler-controller"),
        "--kubeconfig",
        kubeconfig,
        "--lease-namespace",
        "zeroscaler",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        str(metrics_port),
        "--log-level",
        "warning",
    ]
    with (
        running(webhook_cmd, work / "webhook.log"),
        running(controller_cmd, work / "controller.log"),
    ):
        tls = ssl.create_default_context(cafile=str(work / "webhook.crt"))
        tls.load_verify_locations(cadata=ca.cert_pem.decode())
        wait(lambda: _ok(f"https://127.0.0.1:{port}/readyz", tls), "the webhook getting ready")
        wait(
            lambda: _ok(f"http://127.0.0.1:{metrics_port}/readyz", None),
            "the controller getting ready",
        )
        print("   webhook and controller ready", flush=True)
        return sleep_and_wake(cluster)


def sleep_and_wake(cluster: Cluster) -> int:
    step("an operator arrives: a Widget CRD, RBAC to watch Widgets and ConfigMaps, 2 replicas")
    # One apply, CRD and all: the Deployment is admitted before discovery serves the new type.
    cluster.kubectl("apply", "-f", "-", input=CRD + "---" + OPERATOR)
    annotations = json.loads(
        cluster.kubectl(
            "-n",
            "shop",
            "get",
            "deployment",
            "widget-operator",
            "-o",
            "jsonpath={.metadata.annotations}",
        ).stdout
        or "{}"
    )
    print("annotations the webhook wrote from policy and RBAC:")
    for k, v in sorted(annotations.items()):
        if k.startswith("zeroscaler.io/"):
            print(f"   {k}: {v}")

    step(f"nothing changes for {IDLE_TIMEOUT}: the operator is put to sleep")
    slept = wait(lambda: replicas(cluster) == 0, "the operator going to sleep")
    print(f"   asleep after {slept:.1f}s", flush=True)
    zeroscaler_status(cluster)

    step("someone creates a Widget: the operator wakes, to the 2 replicas it had")
    created = time.monotonic()
    cluster.kubectl("apply", "-f", "-", input=WIDGET)
    wait(lambda: replicas(cluster) == 2, "the operator waking")
    print(f"   awake {time.monotonic() - created:.2f}s after `kubectl apply` returned", flush=True)
    show(
        cluster,
        "-n",
        "shop",
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=widget-operator",
        "-o",
        "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message",
    )
    zeroscaler_status(cluster)
    step("done; stopping everything")
    return 0


def _ok(url: str, tls: ssl.SSLContext | None) -> bool:
    try:
        return httpx.get(url, verify=tls if tls else True, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


if __name__ == "__main__":
    sys.exit(main())
