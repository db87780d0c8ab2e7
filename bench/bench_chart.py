"""Benchmark: `helm install` of the chart on the real node until the webhook is Ready and a
controller leads; the image's size and build time as `make image` recorded them.

Each run installs a fresh release (default certificate mode: the certs Job runs in a pod first),
times `helm install` returning, the webhook pod Ready and a Ready controller pod holding the Lease,
then uninstalls it. Needs the real node and `make image`'s archive.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.saved import save_json
from image import build as image_build
from localcluster import build
from localcluster.cluster import Cluster, start
from localcluster.processes import free_port
from testkit.real_chart import real_node_values

CHART = Path(__file__).resolve().parents[1] / "charts" / "zeroscaler"
ARCHIVE = Path(os.environ.get("ZEROSCALER_IMAGE", image_build.REPO / "dist/zeroscaler-image.tar"))


def _get(client: httpx.Client, path: str) -> dict[str, Any]:
    response = client.get(path)
    if response.status_code == 404:
        return {}
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def _ready_pod_names(
    client: httpx.Client, namespace: str, release: str, component: str
) -> set[str]:
    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component={component}"
    pods = _get(client, f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")
    return {
        p["metadata"]["name"]
        for p in pods.get("items", [])
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    }


def _leading(client: httpx.Client, namespace: str, release: str) -> bool:
    lease = _get(
        client,
        f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{release}-zeroscaler-controller",
    )
    holder = (lease.get("spec") or {}).get("holderIdentity")
    return bool(holder) and holder in _ready_pod_names(client, namespace, release, "controller")


def _install_once(cluster: Cluster, home: Path) -> dict[str, float]:
    name = f"zs-{secrets.token_hex(3)}"
    namespace = f"bench-{name}"
    values = home / f"{name}.yaml"
    # One controller replica: the second could not be placed on the one node (same ports).
    spec = real_node_values(cluster.server, free_port(), free_port(), controller_replicas=1)
    values.write_text(yaml.safe_dump(spec))
    with cluster.client() as client:
        client.post("/api/v1/namespaces", json={"metadata": {"name": namespace}}).raise_for_status()
        began = time.monotonic()
        cluster.helm(
            home, "install", name, str(CHART), "-n", namespace, "-f", str(values), check=True
        )
        times = {"helm install returned": time.monotonic() - began}
        while len(times) < 3:
            now = time.monotonic() - began
            if now > 300:
                raise RuntimeError(f"not up after 300 s: {times}")
            if "webhook Ready" not in times and _ready_pod_names(
                client, namespace, name, "webhook"
            ):
                times["webhook Ready"] = now
            if "controller leading" not in times and _leading(client, namespace, name):
                times["controller leading"] = now
            time.sleep(0.1)
        cluster.helm(home, "uninstall", name, "-n", namespace, "--wait", check=True)
        client.delete(f"/api/v1/namespaces/{namespace}")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not ARCHIVE.exists():
        print(f"{ARCHIVE} is missing: run `make image` first", file=sys.stderr)
        return 1
    record = json.loads(ARCHIVE.with_suffix(".json").read_text())
    binaries = build.ensure_binaries(node=True)
    with tempfile.TemporaryDirectory(prefix="bench-chart-") as tmp:
        cluster = start(binaries, nodes=1, real_node=True)
        try:
            if cluster.real_node is None:
                print(f"no real node: {cluster.real_node_absent}", file=sys.stderr)
                return 1
            began = time.monotonic()
            cluster.import_image(ARCHIVE)
            imported = time.monotonic() - began
            runs = [_install_once(cluster, Path(tmp)) for _ in range(args.runs)]
        finally:
            cluster.stop()
    size = f"{record['compressed_bytes'] / 1e6:.1f} MB compressed"
    size += f", {record['unpacked_bytes'] / 1e6:.1f} MB unpacked"
    print(f"\nimage: {size}; `make image` took {record['seconds']} s; ctr import {imported:.1f} s")
    print(f"{'helm install to':<24} {'median':>8} {'max':>8}   ({args.runs} installs)")
    summary: dict[str, dict[str, float]] = {}
    for key in runs[0]:
        values = [r[key] for r in runs]
        summary[key] = {"median": statistics.median(values), "max": max(values)}
        print(f"{key:<24} {summary[key]['median']:>7.1f}s {summary[key]['max']:>7.1f}s")
    save_json(
        "chart", {"image": record, "import_seconds": imported, "runs": runs, "summary": summary}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
