"""How far the API server's own view of a ready endpoint trails a client's watch of it.

The activator answers a covered request once its watch of the backend's EndpointSlices shows a
ready endpoint, and READY_SETTLE seconds more; the API server then resolves the backend's Service
from its own watch of the same EndpointSlices. This measures the gap between the two on a real API
server: a Service whose one endpoint (kept by hand, on loopback, in front of a TLS webhook) is
flipped between not ready and ready, and a webhook with `failurePolicy: Fail` reached through that
Service. Each round confirms the API server saw the endpoint go (a dry-run create fails with "no
endpoints available"), makes it ready, and times dry-run creates from the moment the client's
watch shows it until one is admitted.

Rounds run quiet, then under load: two processes spinning on the CPU and four ConfigMap writers.
Target: every round admitted within READY_SETTLE of the client's watch.

    python -m bench.bench_endpoints             # 30 rounds quiet, 30 loaded
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.judge import Run, Target, report
from bench.saved import RESULTS
from bench.webhooks import noop_webhook, webhook_configuration
from localcluster import build, netns
from localcluster.cluster import start
from localcluster.processes import free_port, stop
from testkit.admission_backend import SERVER
from zeroscaler.api import ClientLimits, Kube, KubeError
from zeroscaler.api.credentials import load_access
from zeroscaler.certs.issue import CertPair, new_ca, new_serving_cert
from zeroscaler.webhook.activation import READY_SETTLE

NAMESPACE = "bench-endpoints"
SLICES = f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
PROBE = {"metadata": {"generateName": "probe-", "labels": {"bench-endpoints": "probe"}}}
ROUND_LIMIT = 30.0  # seconds a round may take before the benchmark gives up
MAX_ROUNDS = 200


@dataclass(frozen=True)
class Trail:
    """One round: from the client's watch showing the endpoint ready to a create admitted."""

    loaded: bool
    seconds: float
    refused: int  # creates refused for want of an endpoint after the watch showed one


def summary(trails: list[Trail]) -> dict[str, Any]:
    values = sorted(t.seconds for t in trails)
    return {
        "rounds": len(trails),
        "refused_first": sum(t.refused > 0 for t in trails),
        "p50_ms": statistics.median(values) * 1e3,
        "max_ms": values[-1] * 1e3,
    }


async def _set_ready(kube: Kube, ready: bool) -> str:
    endpoint = {"addresses": [netns.NODE_ADDRESS], "conditions": {"ready": ready}}
    obj = await kube.patch(f"{SLICES}/fence", {"endpoints": [endpoint]})
    return str(obj["metadata"]["resourceVersion"])


async def _admitted(kube: Kube) -> bool:
    """Whether a dry-run create was admitted; False if the API server found no endpoint."""
    try:
        await kube.create(CONFIGMAPS, PROBE, dry_run=True)
    except KubeError as e:
        if "no endpoints available" in str(e):
            return False
        raise
    return True


async def _until(kube: Kube, admitted: bool) -> int:
    """Dry-run creates until one is (or is not) admitted; how many were not that."""
    deadline = time.monotonic() + ROUND_LIMIT
    misses = 0
    while await _admitted(kube) is not admitted:
        misses += 1
        if time.monotonic() > deadline:
            raise SystemExit(f"the API server never saw the endpoint {'up' if admitted else 'go'}")
        await asyncio.sleep(0.005 if admitted else 0.05)
    return misses


async def _started(kube: Kube) -> None:
    """Until a create is admitted: the webhook up, its configuration in use."""
    deadline = time.monotonic() + ROUND_LIMIT
    while True:
        try:
            if await _admitted(kube):
                return
        except KubeError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def _round(kube: Kube, seen: dict[str, float], loaded: bool) -> Trail:
    await _set_ready(kube, False)
    await _until(kube, admitted=False)
    version = await _set_ready(kube, True)
    deadline = time.monotonic() + ROUND_LIMIT
    while version not in seen:
        if time.monotonic() > deadline:
            raise SystemExit("the watch never showed the endpoint ready")
        await asyncio.sleep(0.001)
    refused = await _until(kube, admitted=True)
    return Trail(loaded, time.monotonic() - seen[version], refused)


@contextlib.asynccontextmanager
async def _load(kube: Kube) -> AsyncIterator[None]:
    """Two processes spinning on the CPU and four ConfigMap writers, until the block ends."""
    spin = (sys.executable, "-c", "while True: pass")
    spinners = [await asyncio.create_subprocess_exec(*spin) for _ in range(2)]
    body = {"metadata": {"generateName": "load-"}, "data": {"x": "y" * 2000}}

    async def write() -> None:
        while True:
            with contextlib.suppress(KubeError):
                await kube.create(CONFIGMAPS, body)
            await asyncio.sleep(0.01)

    writers = [asyncio.create_task(write()) for _ in range(4)]
    try:
        yield
    finally:
        for task in writers:
            task.cancel()
        await asyncio.gather(*writers, return_exceptions=True)
        for p in spinners:
            p.kill()
            await p.wait()


def _webhook(ca: bytes) -> dict[str, Any]:
    """The activator benchmark's no-op webhook, reached through the Service, for probes only."""
    hook = noop_webhook("", ca, [NAMESPACE])
    service = {"namespace": NAMESPACE, "name": "fence", "path": "/mutate"}
    hook.update(
        name="fence.bench.zeroscaler.io",
        clientConfig={"service": service, "caBundle": hook["clientConfig"]["caBundle"]},
        objectSelector={"matchLabels": PROBE["metadata"]["labels"]},
    )
    return webhook_configuration("bench-endpoints", [hook])


def _serve(ca: CertPair) -> tuple[subprocess.Popen[bytes], int]:
    """The webhook behind the Service (the activator tests' backend), on a free port."""
    work = Path(tempfile.mkdtemp(prefix="bench-endpoints-"))
    pair = new_serving_cert(ca, [f"fence.{NAMESPACE}.svc"])
    port = free_port()
    env = {**os.environ, "PORT": str(port), "REVIEW_LOG": str(work / "reviews.log"),
           "TLS_CRT": pair.cert_pem.decode(), "TLS_KEY": pair.key_pem.decode()}  # fmt: skip
    cmd = [sys.executable, "-c", SERVER]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL), port


async def _measure(kubeconfig: str, ca: CertPair, port: int, rounds: int) -> list[Trail]:
    kube = Kube(load_access(kubeconfig), ClientLimits(max_connections=16))
    trails: list[Trail] = []
    try:
        await kube.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        service = {"metadata": {"name": "fence"}, "spec": {"ports": [{"port": 443}]}}
        await kube.create(f"/api/v1/namespaces/{NAMESPACE}/services", service)
        await kube.create(SLICES, {
            "metadata": {"name": "fence", "labels": {"kubernetes.io/service-name": "fence"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [netns.NODE_ADDRESS], "conditions": {"ready": True}}],
            "ports": [{"port": port, "protocol": "TCP"}],
        })  # fmt: skip
        admission = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
        await kube.create(admission, _webhook(ca.cert_pem))
        await _started(kube)

        seen: dict[str, float] = {}  # resourceVersion: when the watch showed it

        async def watch(version: str) -> None:
            async for event in kube.watch(SLICES, resource_version=version, timeout_seconds=600):
                seen[str(event["object"]["metadata"]["resourceVersion"])] = time.monotonic()

        listing = await kube.get(SLICES)
        watcher = asyncio.create_task(watch(str(listing["metadata"]["resourceVersion"])))
        try:
            for loaded in (False, True):
                async with _load(kube) if loaded else contextlib.nullcontext():
                    for i in range(rounds):
                        trails.append(await _round(kube, seen, loaded))
                        if (i + 1) % 10 == 0:
                            phase = "loaded" if loaded else "quiet"
                            print(f"[bench endpoints] {phase}: {i + 1}/{rounds}", flush=True)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
    finally:
        await kube.aclose()
    return trails


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help=f"a phase (max {MAX_ROUNDS})")
    args = parser.parse_args(argv)
    binaries = build.find_binaries(build.load_versions())
    if any(name not in binaries for name in ("kube-apiserver", "etcd")):
        print("control plane not built (make controlplane)", file=sys.stderr)
        return 1
    print("[bench endpoints] starting a control plane", flush=True)
    run = Run()
    cluster = start(binaries, nodes=1)
    ca = new_ca("bench-endpoints-ca")
    server, port = _serve(ca)
    try:
        rounds = min(args.rounds, MAX_ROUNDS)
        trails = asyncio.run(_measure(str(cluster.kubeconfig), ca, port, rounds))
    finally:
        stop(server)
        cluster.stop()
    print("\nfrom a client's watch showing the endpoint ready to a create admitted")
    saved: dict[str, Any] = {"settle_s": READY_SETTLE}
    for loaded in (False, True):
        phase = "loaded" if loaded else "quiet"
        measured = [t for t in trails if t.loaded is loaded]
        s = summary(measured) if measured else {}
        saved[phase] = s
        if s:
            print(f"{phase:<7} {s['rounds']:>3} rounds: p50 {s['p50_ms']:.1f} ms, max "
                  f"{s['max_ms']:.1f} ms, refused first {s['refused_first']}")  # fmt: skip
    judged = targets(trails, READY_SETTLE)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "endpoints.json"
    saved["trails"] = [asdict(t) for t in trails]
    out.write_text(json.dumps(run.stamped(saved, judged), indent=2))
    print(f"written {out}")
    return 1 if report(judged) else 0


def targets(trails: list[Trail], settle: float) -> list[Target]:
    """Each phase's slowest round against the activator's settle; a phase not measured fails."""
    found = []
    for loaded in (False, True):
        phase = [t.seconds for t in trails if t.loaded is loaded]
        slowest = max(phase) if phase else None
        what = f"{'loaded' if loaded else 'quiet'} rounds: the slowest ({len(phase)} rounds)"
        found.append(Target(what, slowest, settle, "s"))
    return found


if __name__ == "__main__":
    sys.exit(main())
