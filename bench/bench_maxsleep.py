"""Benchmark: 1,000 sleepers with a short max-sleep wake spread over their jitter window.

N paused Deployments (no Pods) with a short idle timeout and a short `zeroscaler.io/max-sleep`
fall asleep together (their namespace is opted in once they all exist, so their idle clocks start
at once); nothing they watch changes. Each is then woken by max-sleep alone, within a
tenth of max-sleep after it by its jitter (docs/DESIGN.md, "Work on a clock"). A Deployment watch
of the benchmark's own takes the time of each scale-up. The figures: how far after its own sleep
each woke (in units of max-sleep: all between 1.0 and 1.1), how the wakes spread over time (the
most in any one second, against N at once), and the window they covered, beside the window the
sleeps themselves covered (the baseline: without jitter the wakes would repeat it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.measures import percentile, wait_http_ok
from bench.saved import save_json
from bench.workloads import (
    cluster_for,
    controller_command,
    create_if_missing,
    deployment,
    gather_limited,
)
from localcluster.processes import free_port, running
from zeroscaler.api import ClientLimits, Kube, KubeError
from zeroscaler.api.credentials import load_access
from zeroscaler.core.durations import parse_time

NAMESPACE = "zs-maxsleep"
TIMEOUT = 5.0  # seconds idle before the first sleep
MAX_SLEEP = 120.0  # seconds asleep before the max-sleep wake; the spread is a tenth of it
LIMIT = 600.0  # seconds the whole run may take once the workloads exist


@dataclass
class Results:
    count: int
    max_sleep: float
    asleep_at: dict[str, float] = field(default_factory=dict)  # epoch seconds: its asleep-since
    woken_at: dict[str, float] = field(default_factory=dict)  # epoch seconds: its scale-up seen
    notes: list[str] = field(default_factory=list)


def name_of(i: int) -> str:
    return f"sleeper-{i:04d}"


async def setup(kube: Kube, count: int) -> None:
    """The sleepers, in a namespace not yet opted in (so none is managed until all exist)."""
    await create_if_missing(
        kube, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", {"metadata": {"name": "op"}}
    )
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    role = {"metadata": {"name": "op"}, "rules": rules}
    await create_if_missing(kube, f"{rbac}/namespaces/{NAMESPACE}/roles", role)
    binding = {
        "metadata": {"name": "op"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "op"},
        "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": NAMESPACE}],
    }
    await create_if_missing(kube, f"{rbac}/namespaces/{NAMESPACE}/rolebindings", binding)
    annotations = {
        "zeroscaler.io/idle-timeout": f"{TIMEOUT:g}s",
        "zeroscaler.io/watched-kinds": "ConfigMap",
        "zeroscaler.io/watch-namespaces": NAMESPACE,
        "zeroscaler.io/max-sleep": f"{MAX_SLEEP:g}s",
    }
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"

    def creator(i: int) -> Any:
        return lambda: create_if_missing(kube, path, deployment(name_of(i), annotations))

    await gather_limited([creator(i) for i in range(count)], limit=32, progress="created")
    opted = {"metadata": {"labels": {"zeroscaler.io/enabled": "true"}}}
    await kube.patch(f"/api/v1/namespaces/{NAMESPACE}", opted)


async def watch(kube: Kube, results: Results, done: asyncio.Event) -> None:
    """Each Deployment's first sleep and the scale-up after it, by loop time."""
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    seen: dict[str, int] = {}

    def take(obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        replicas = int(obj["spec"].get("replicas") or 0)
        since = (obj["metadata"].get("annotations") or {}).get("zeroscaler.io/asleep-since")
        before = seen.get(name)
        if replicas == 0 and before and since and name not in results.asleep_at:
            results.asleep_at[name] = parse_time(since).timestamp()
        if replicas > 0 and before == 0 and name in results.asleep_at:
            results.woken_at.setdefault(name, time.time())
        seen[name] = replicas
        if len(results.woken_at) == results.count:
            done.set()

    while not done.is_set():
        try:
            items, rv = await kube.list_all(path)
            for obj in items:
                take(obj)
            async for event in kube.watch(path, resource_version=rv):
                if event["type"] != "BOOKMARK":
                    take(event["object"])
        except KubeError:
            await asyncio.sleep(0.5)


async def bench(args: argparse.Namespace, kubeconfig: str, workdir: Path) -> Results:
    results = Results(args.workloads, MAX_SLEEP)
    async with Kube(load_access(kubeconfig), ClientLimits(max_connections=32)) as kube:
        done = asyncio.Event()
        watcher = asyncio.create_task(watch(kube, results, done))
        port = free_port()
        cmd = controller_command(kubeconfig, port)
        cmd[cmd.index("--lease-namespace") + 1] = NAMESPACE  # its Lease beside the sleepers
        labels = {"zeroscaler.io/enabled": "true"}
        await create_if_missing(
            kube, "/api/v1/namespaces", {"metadata": {"name": NAMESPACE, "labels": labels}}
        )
        with running(cmd, workdir / "controller.log"):
            await wait_http_ok(f"http://127.0.0.1:{port}/readyz")
            await setup(kube, args.workloads)
            try:
                await asyncio.wait_for(done.wait(), LIMIT)
            except TimeoutError:
                results.notes.append(f"stopped after {LIMIT:g} s: not every sleeper was woken")
        watcher.cancel()
    return results


def summarize(results: Results) -> dict[str, float]:
    both = [n for n in results.woken_at if n in results.asleep_at]
    after = [(results.woken_at[n] - results.asleep_at[n]) / results.max_sleep for n in both]
    wakes = sorted(results.woken_at[n] for n in both)
    sleeps = sorted(results.asleep_at[n] for n in both)  # whole seconds, as annotated
    per_second: dict[int, int] = {}
    for t in wakes:
        per_second[int(t - wakes[0])] = per_second.get(int(t - wakes[0]), 0) + 1
    sleeps_per_second: dict[int, int] = {}
    for t in sleeps:
        key = int(t - sleeps[0])
        sleeps_per_second[key] = sleeps_per_second.get(key, 0) + 1
    return {
        "woken": len(both),
        "after_min": min(after),
        "after_p50": percentile(after, 0.5),
        "after_max": max(after),
        "wake_window_s": wakes[-1] - wakes[0],
        "sleep_window_s": sleeps[-1] - sleeps[0],
        "most_wakes_in_a_second": max(per_second.values()),
        "most_sleeps_in_a_second": max(sleeps_per_second.values()),
        "jitter_window_s": results.max_sleep / 10,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting a local one")
    parser.add_argument("--workloads", type=int, default=1000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="zeroscaler-bench-"))
    with cluster_for(args.kubeconfig) as (kubeconfig, _):
        results = asyncio.run(bench(args, kubeconfig, workdir))
    figures = summarize(results) if results.woken_at else {}
    results.notes.append(f"{os.cpu_count()} cores, shared with other work while measured")
    print(json.dumps(figures, indent=1))
    for note in results.notes:
        print(note)
    save_json("maxsleep", {"summary": figures, **asdict(results)})
    print(f"logs in {workdir}")


if __name__ == "__main__":
    main()
