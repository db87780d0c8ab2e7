"""`make demo`: a real local Kubernetes on loopback, shown at work."""

from __future__ import annotations

import sys
import time

from localcluster import build
from localcluster.cluster import Cluster, start


def _say(message: str) -> None:
    print(f"\n== {message}", flush=True)


def _show(cluster: Cluster, *args: str) -> str:
    out = cluster.kubectl(*args).stdout
    print(f"$ kubectl {' '.join(args)}\n{out.rstrip()}", flush=True)
    return out


def _wait_pods(cluster: Cluster, ns: str, want: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = cluster.kubectl("get", "pods", "-n", ns, "--no-headers", check=False).stdout
        running = [line for line in out.splitlines() if "Running" in line and "1/1" in line]
        if len(running) == want and len(out.splitlines()) == want:
            return
        time.sleep(0.3)
    raise SystemExit(f"pods in {ns} did not reach {want} within {timeout:.0f}s")


def main() -> int:
    binaries = build.ensure_binaries(progress=lambda m: print(f"[controlplane] {m}", flush=True))
    _say("starting etcd, kube-apiserver, controller-manager, scheduler and kwok on 127.0.0.1")
    started = time.monotonic()
    cluster = start(binaries, nodes=2, progress=lambda m: print(f"   {m}", flush=True))
    try:
        _say(f"cluster up in {time.monotonic() - started:.1f}s; kubeconfig {cluster.kubeconfig}")
        _show(cluster, "version")
        _show(cluster, "get", "nodes", "-o", "wide")
        _say("an operator-like Deployment with 2 replicas gets Pods on the fake nodes")
        cluster.kubectl("create", "namespace", "demo")
        cluster.kubectl(
            "-n",
            "demo",
            "create",
            "deployment",
            "operator",
            "--image=registry.k8s.io/pause:3.10",
            "--replicas=2",
        )
        _wait_pods(cluster, "demo", 2)
        _show(cluster, "-n", "demo", "get", "deployment,pods", "-o", "wide")
        _say("scaling it to zero through the scale subresource, as zeroscaler does")
        cluster.kubectl("-n", "demo", "scale", "deployment/operator", "--replicas=0")
        _wait_pods(cluster, "demo", 0)
        _show(cluster, "-n", "demo", "get", "deployment")
        _say("and back to 2")
        cluster.kubectl("-n", "demo", "scale", "deployment/operator", "--replicas=2")
        _wait_pods(cluster, "demo", 2)
        _show(cluster, "-n", "demo", "get", "pods")
        _say("done; stopping the control plane")
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
