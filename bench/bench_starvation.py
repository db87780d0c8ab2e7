"""Whether held activator requests slow a wake or the Lease, in the combined process.

`zeroscaler-combined` runs the controller and the webhook in one process. Here its webhook half
holds as many covered requests as it takes at once (`--activator-max-waiting`), each waiting on a
Service of its own, so each holds a watch of the activator's; meanwhile the controller half wakes
a sleeper for a ConfigMap created and renews its Lease. Rounds alternate: a wake with nothing held
(the baseline), then one with every waiter held. The Lease's renewals are watched throughout.

Targets: the p99 of wakes with the waiters held at most 1.5x the baseline's (the same run, the
same machine), and every renewal while held within twice the renewal interval.

    python -m bench.bench_starvation            # 20 wakes each way, 200 held requests
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import secrets
import ssl
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench.saved import save_json
from localcluster import build
from localcluster.cluster import Cluster, start
from localcluster.processes import free_port
from testkit.webhook import Webhook
from zeroscaler.api import Kube
from zeroscaler.api.credentials import load_access

COMBINED = Path(sys.executable).parent / "zeroscaler-combined"
HOME, WORK = "bench-starvation", "bench-starvation-ops"
LEASE = "zeroscaler-controller"
LEASE_SECONDS = 3  # renewed every second (a third of it)
HELD = "bench-held-activator"
CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
WAKE_LIMIT = 30.0  # seconds a wake may take before the benchmark gives up
HELD_WAIT = 29  # seconds each held request waits (the most the API server gives a webhook)
WINDOW_MARGIN = 2.0  # seconds kept clear of the held requests' ends and new arrivals
CYCLE = 5.0  # seconds one wake takes, the sleep before it included
BLOCKS = 2
RATIO_TARGET = 1.5
RENEWAL_TARGET = 2.0  # renewal intervals


@dataclass(frozen=True)
class Wake:
    held: bool
    seconds: float  # from the ConfigMap created to the watch seeing replicas above zero


def problems(wakes: list[Wake], gaps: list[float], interval: float) -> list[str]:
    """What misses a target; nothing measured misses too."""
    found = []
    quiet = sorted(w.seconds for w in wakes if not w.held)
    held = sorted(w.seconds for w in wakes if w.held)
    if not quiet or not held:
        return ["no wakes measured with or without the waiters held"]
    ratio = _p99(held) / _p99(quiet)
    if ratio > RATIO_TARGET:
        found.append(f"wake p99 held {ratio:.2f}x the baseline's, over {RATIO_TARGET}x")
    if not gaps:
        found.append("no Lease renewal seen while the waiters were held")
    elif max(gaps) > RENEWAL_TARGET * interval:
        found.append(
            f"a renewal {max(gaps):.2f} s after the one before, over {RENEWAL_TARGET:g}x the "
            f"{interval:g} s interval"
        )
    return found


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def _held_configuration(count: int) -> dict[str, Any]:
    rule = {"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"],
            "resources": ["nothings"]}  # fmt: skip
    return {
        "metadata": {"name": HELD},
        "webhooks": [
            {
                "name": f"h{i}.activator.zeroscaler.io",
                "clientConfig": {"url": f"https://127.0.0.1:9{_path(i)}"},
                "rules": [rule],  # a kind no one makes: the API server never calls these
                "failurePolicy": "Ignore",
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1"],
            }
            for i in range(count)
        ],
    }


def _path(i: int) -> str:
    return f"/activate/{'b' * 16}{i:08d}/{HELD_WAIT}/deployment/{WORK}/held-{i}/held-{i}"


REVIEW = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "held",
            "operation": "CREATE",
            "resource": {"group": "example.com", "version": "v1", "resource": "nothings"},
            "namespace": WORK,
            "name": "n",
        },
    }
).encode()


async def _hold(client: httpx.AsyncClient, i: int, until: asyncio.Event) -> int:
    """Send covered requests at one path, one after another, while `until` is not set."""
    sent = 0
    while not until.is_set():
        with contextlib.suppress(httpx.HTTPError):
            await client.post(_path(i), content=REVIEW, timeout=HELD_WAIT + 10)
        sent += 1
    return sent


async def _lease_renewals(kube: Kube, renewals: list[float]) -> None:
    """Each renewTime the Lease's watch shows, as seconds since the epoch."""
    path = f"/apis/coordination.k8s.io/v1/namespaces/{HOME}/leases"
    _, version = await kube.list_all(path)
    async for event in kube.watch(path, resource_version=version, timeout_seconds=600):
        spec = (event.get("object") or {}).get("spec") or {}
        if spec.get("renewTime"):
            renewals.append(_micro(str(spec["renewTime"])))


def _micro(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()  # a MicroTime, to the microsecond


async def _replicas(kube: Kube, seen: dict[str, int]) -> None:
    path = f"/apis/apps/v1/namespaces/{WORK}/deployments"
    _, version = await kube.list_all(path)
    async for event in kube.watch(path, resource_version=version, timeout_seconds=600):
        obj = event.get("object") or {}
        seen[(obj.get("metadata") or {}).get("name", "")] = int(
            (obj.get("spec") or {}).get("replicas") or 0
        )


async def _wake_once(kube: Kube, seen: dict[str, int], held: bool) -> Wake:
    deadline = time.monotonic() + WAKE_LIMIT
    while seen.get("op", 1) != 0:  # asleep again after the last wake
        if time.monotonic() > deadline:
            raise SystemExit("the sleeper did not fall asleep again")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # the sleep recorded
    began = time.monotonic()
    name = f"wake-{secrets.token_hex(4)}"
    await kube.create(f"/api/v1/namespaces/{WORK}/configmaps", {"metadata": {"name": name}})
    while seen.get("op", 0) == 0:
        if time.monotonic() > deadline + WAKE_LIMIT:
            raise SystemExit("a wake never came")
        await asyncio.sleep(0.002)
    return Wake(held, time.monotonic() - began)


async def _all_held(hook: Webhook, held: int) -> float:
    """Until the webhook holds every waiter (its gauge says so); when that was seen (monotonic):
    wakes are timed against requests held, not against their arrival."""
    deadline = time.monotonic() + HELD_WAIT + WAKE_LIMIT
    wanted = f"zeroscaler_activator_waiting_requests {float(held)}"
    while wanted not in await asyncio.to_thread(lambda: hook.get("/metrics").text):
        if time.monotonic() > deadline:
            raise SystemExit(f"the webhook never held {held} requests at once")
        await asyncio.sleep(0.1)
    return time.monotonic()


async def _measure(cluster: Cluster, hook: Webhook, rounds: int, held: int) -> dict[str, Any]:
    async with Kube(load_access(str(cluster.kubeconfig))) as kube:
        seen: dict[str, int] = {}
        renewals: list[float] = []
        watchers: list[asyncio.Task[None]] = [
            asyncio.create_task(_replicas(kube, seen)),
            asyncio.create_task(_lease_renewals(kube, renewals)),
        ]
        ctx = ssl.create_default_context(cafile=str(hook.ca_file))
        limits = httpx.Limits(max_connections=held + 10, max_keepalive_connections=held + 10)
        wakes: list[Wake] = []
        windows: list[tuple[float, float]] = []  # times the waiters were held
        async with httpx.AsyncClient(
            base_url=f"https://127.0.0.1:{hook.port}", verify=ctx, limits=limits
        ) as client:
            # Blocks alternate: wakes with nothing held, then with every waiter held. Held
            # requests are answered at their wait's end (29 s) and sent again at once; wakes are
            # timed only inside a window in which all are held and none arrives.
            per_block = max(1, rounds // BLOCKS)
            for block in range(BLOCKS):
                for _ in range(per_block):
                    wakes.append(await _wake_once(kube, seen, held=False))
                stop = asyncio.Event()
                holders = [asyncio.create_task(_hold(client, i, stop)) for i in range(held)]
                done = 0
                while done < per_block:
                    window_end = await _all_held(hook, held) + HELD_WAIT - WINDOW_MARGIN
                    began = time.time()
                    while done < per_block and time.monotonic() + CYCLE < window_end:
                        wakes.append(await _wake_once(kube, seen, held=True))
                        done += 1
                    windows.append((began, time.time()))
                    await asyncio.sleep(max(0.0, window_end + 2 * WINDOW_MARGIN - time.monotonic()))
                stop.set()
                for holder in holders:
                    holder.cancel()
                await asyncio.gather(*holders, return_exceptions=True)
                quiet = [w.seconds * 1e3 for w in wakes if not w.held][-per_block:]
                loaded = [w.seconds * 1e3 for w in wakes if w.held][-per_block:]
                print(f"[bench starvation] block {block + 1}/{BLOCKS}: median "
                      f"{statistics.median(quiet):.0f} ms quiet, "
                      f"{statistics.median(loaded):.0f} ms held", flush=True)  # fmt: skip
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    gaps = [
        b - a for a, b in itertools.pairwise(renewals) if any(lo <= b <= hi for lo, hi in windows)
    ]
    return {"wakes": wakes, "gaps": gaps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="wakes each way (max 100)")
    parser.add_argument("--held", type=int, default=200, help="requests held (max 200)")
    args = parser.parse_args(argv)
    rounds, held = min(args.rounds, 100), min(args.held, 200)
    binaries = build.find_binaries(build.load_versions())
    if any(name not in binaries for name in ("kube-apiserver", "etcd")):
        print("control plane not built (make controlplane)", file=sys.stderr)
        return 1
    print("[bench starvation] starting a control plane", flush=True)
    cluster = start(binaries, nodes=1)
    work = Path(tempfile.mkdtemp(prefix="bench-starvation-"))
    hook = Webhook(cluster, work, HOME)
    try:
        for namespace, labels in ((HOME, {}), (WORK, {"zeroscaler.io/enabled": "true"})):
            cluster.kubectl("create", "namespace", namespace)
            if labels:
                cluster.kubectl("label", "namespace", namespace, "zeroscaler.io/enabled=true")
        _objects(cluster, work, held)
        controller = [
            str(COMBINED),
            "--kubeconfig", str(cluster.kubeconfig),
            "--metrics-port", str(free_port()),
            "--metrics-host", "127.0.0.1",
            "--lease-namespace", HOME,
            "--lease-duration", str(LEASE_SECONDS),
            "--id", "bench",
            "--access-review-ttl", "60",
            "--log-level", "warning",
            "--",
        ]  # fmt: skip
        hook.start(
            command=controller,
            extra=[
                "--log-level", "warning",
                "--activator-configuration", HELD,
                "--activator-max-waiting", str(held),
            ],
        )  # fmt: skip
        measured = asyncio.run(_measure(cluster, hook, rounds, held))
    finally:
        hook.stop()
        cluster.stop()
    wakes: list[Wake] = measured["wakes"]
    gaps: list[float] = measured["gaps"]
    interval = LEASE_SECONDS / 3
    saved: dict[str, Any] = {"held": held, "rounds": rounds, "renewal_interval_s": interval}
    for phase, is_held in (("baseline", False), ("held", True)):
        values = [w.seconds for w in wakes if w.held is is_held]
        saved[phase] = {
            "wakes": len(values),
            "p50_ms": statistics.median(values) * 1e3,
            "p99_ms": _p99(values) * 1e3,
        }
        print(f"{phase:<8} {len(values):>3} wakes: p50 {saved[phase]['p50_ms']:.1f} ms, "
              f"p99 {saved[phase]['p99_ms']:.1f} ms")  # fmt: skip
    saved["renewal_gaps_s"] = {"seen": len(gaps), "max": max(gaps) if gaps else None}
    longest = max(gaps) if gaps else float("nan")
    print(f"Lease renewals while held: {len(gaps)}, longest gap {longest:.2f} s "
          f"(renewed every {interval:g} s)")  # fmt: skip
    found = problems(wakes, gaps, interval)
    for p in found:
        print(f"OVER TARGET: {p}")
    if not found:
        print("wakes and the Lease unaffected by the held requests: ok")
    saved["wake_samples"] = [(w.held, w.seconds) for w in wakes]
    print(f"written {save_json('starvation', saved)}")
    return 1 if found else 0


def _objects(cluster: Cluster, work: Path, held: int) -> None:
    """The held requests' configuration, the sleeper, and what it may watch."""
    manifest = work / "objects.json"
    sleeper = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "op",
            "namespace": WORK,
            "annotations": {
                "zeroscaler.io/idle-timeout": "2s",
                "zeroscaler.io/watched-kinds": "ConfigMap",
                "zeroscaler.io/watch-namespaces": WORK,
            },
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "op"}},
            "template": {
                "metadata": {"labels": {"app": "op"}},
                "spec": {"containers": [{"name": "op", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "op-view", "namespace": WORK},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "view",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": WORK}],
    }
    requests = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "zeroscaler-activator-requests", "namespace": HOME},
    }
    configuration = _held_configuration(held) | {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
    }
    items = [configuration, requests, role, sleeper]
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    cluster.kubectl("apply", "-f", str(manifest))


if __name__ == "__main__":
    sys.exit(main())
