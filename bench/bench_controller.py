"""Benchmark: the controller's wake latency and idle cost on the local cluster, against a baseline.

Wake latency is measured from the moment the API server acknowledged a write of a watched object to
the moment a Deployment watch shows the scaled-up replica count, with 1, 100 and 1,000 managed
workloads spread over 50 watched custom resource types. Workload i watches type i mod 50 in scope
namespace i div 50, so each write wakes exactly one workload. The baseline is one raw watch that
patches the scale subresource directly, timed the same way; it runs throughout, and every
controller sample is followed by a baseline sample, so each row is compared with a baseline that
saw the same cluster (objects, background work). In the quiet rows a sample waits until the
workload woken before it has gone back to sleep; the "sleeps around" row does not, so earlier
targets fall asleep around later samples. One more row times one write that wakes 20 workloads
at once (all watching one type in one namespace) to the last of them. Then the controller's CPU
(per 10 s window) and RSS are sampled while idle with 1,000 workloads and 50,000 watched objects.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.judge import Run, Target, report
from bench.saved import RESULTS, save_json
from localcluster.processes import free_port, running
from zeroscaler.api import Conflict, Kube, KubeError
from zeroscaler.api.credentials import load_access

GROUP = "bench.zeroscaler.example.com"
NAMESPACE = "zs-bench"  # the workloads, the baseline and its objects
SCOPES = 200  # namespaces zs-bench-0.. that the workloads watch, one per 50 workloads
FILLED_SCOPES = range(20)  # where the idle row's objects go: the scopes of 1,000 workloads
FAN_OUT = 20  # workloads woken together by one write in the fan-out row
TYPES = 50
TIMEOUT = "2s"

BIN = Path(sys.executable).parent


@dataclass
class Results:
    latency: dict[str, list[float]] = field(default_factory=dict)  # label -> seconds
    paired: dict[str, list[float]] = field(default_factory=dict)  # label -> baseline beside it
    idle_windows: list[float] = field(default_factory=list)  # CPU % per 10 s window
    idle_cpu_percent: float = 0.0
    idle_rss_mb: float = 0.0
    idle_workloads: int = 0
    idle_objects: int = 0
    notes: list[str] = field(default_factory=list)


def kind_of(i: int) -> tuple[str, str]:
    """Kind and plural of watched type number i."""
    return f"Thing{i}", f"things{i}"


async def _create(kube: Kube, path: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(Conflict):
        await kube.create(path, body)


async def _gather_limited(
    jobs: list[Callable[[], Awaitable[None]]], limit: int = 32, progress: str = ""
) -> None:
    """Run `jobs`, `limit` at a time; with a `progress` label, print how far every 10 s."""
    gate = asyncio.Semaphore(limit)
    done = 0

    async def one(job: Callable[[], Awaitable[None]]) -> None:
        nonlocal done
        async with gate:
            await job()
        done += 1

    async def report() -> None:
        began = time.monotonic()
        while True:
            await asyncio.sleep(10)
            rate = done / (time.monotonic() - began)
            print(f"{progress}: {done} / {len(jobs)} ({rate:.0f}/s)", flush=True)

    reporter = asyncio.create_task(report()) if progress and jobs else None
    try:
        await asyncio.gather(*(one(j) for j in jobs))
    finally:
        if reporter is not None:
            reporter.cancel()


def scope_of(i: int) -> str:
    """The namespace workload number i watches."""
    return f"{NAMESPACE}-{(i // TYPES) % SCOPES}"


async def setup_cluster(kube: Kube) -> None:
    """Namespaces (the workloads' one opted in), 50 CRDs, a ServiceAccount allowed to watch them."""
    await _create(
        kube,
        "/api/v1/namespaces",
        {"metadata": {"name": NAMESPACE, "labels": {"zeroscaler.io/enabled": "true"}}},
    )
    for k in range(SCOPES + 1):
        name = f"{NAMESPACE}-{k}" if k < SCOPES else f"{NAMESPACE}-fan-out"
        await _create(kube, "/api/v1/namespaces", {"metadata": {"name": name}})
    await _create(
        kube, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", {"metadata": {"name": "op"}}
    )
    await _create(
        kube,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "metadata": {"name": "zs-bench-watch"},
            "rules": [
                {"apiGroups": [GROUP], "resources": ["*"], "verbs": ["get", "list", "watch"]}
            ],
        },
    )
    await _create(
        kube,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": "zs-bench-watch"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "zs-bench-watch",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": NAMESPACE}],
        },
    )
    for i in range(TYPES):
        kind, plural = kind_of(i)
        await _create(
            kube,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            {
                "metadata": {"name": f"{plural}.{GROUP}"},
                "spec": {
                    "group": GROUP,
                    "names": {"kind": kind, "plural": plural, "listKind": f"{kind}List"},
                    "scope": "Namespaced",
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "subresources": {"status": {}},
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    ],
                },
            },
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        served = {r.resource for r in await kube.discover() if r.group == GROUP}
        if len(served) >= TYPES:
            return
        await asyncio.sleep(1)
    raise RuntimeError("the benchmark's CRDs were not served in time")


def deployment(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A paused Deployment: the API object scales, but no Pods are made (cheap on 2 cores)."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 1,
            "paused": True,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "op",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def workload_name(i: int) -> str:
    return f"op-{i:04d}"


def fan_out_name(i: int) -> str:
    return f"fan-{i:02d}"


async def ensure_workloads(kube: Kube, count: int, first: int = 0, progress: str = "") -> None:
    """Workloads `first` to `count` - 1 (those that exist already are left as they are)."""

    def job(i: int) -> Callable[[], Awaitable[None]]:
        kind, _ = kind_of(i % TYPES)
        return _workload_creator(kube, workload_name(i), kind, scope_of(i))

    await _gather_limited([job(i) for i in range(first, count)], progress=progress)


async def ensure_fan_out(kube: Kube) -> list[str]:
    """FAN_OUT workloads that all watch Thing0 in the fan-out namespace."""
    kind, _ = kind_of(0)
    names = [fan_out_name(i) for i in range(FAN_OUT)]
    scope = f"{NAMESPACE}-fan-out"
    await _gather_limited([_workload_creator(kube, n, kind, scope) for n in names])
    return names


def _workload_creator(
    kube: Kube, name: str, kind: str, scope: str
) -> Callable[[], Awaitable[None]]:
    annotations = {
        "zeroscaler.io/idle-timeout": TIMEOUT,
        "zeroscaler.io/watched-kinds": f"{kind}.{GROUP}",
        "zeroscaler.io/watch-namespaces": scope,
    }
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    return lambda: _create(kube, path, deployment(name, annotations))


class DeploymentWatch:
    """Replica counts and states of the benchmark's Deployments, kept by one watch."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.replicas: dict[str, int] = {}
        self.state: dict[str, str] = {}
        self.changed = asyncio.Condition()
        self.seen_at: dict[str, float] = {}
        self.last_event = time.monotonic()  # of any change to any of them, status included

    async def run(self) -> None:
        path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
        while True:
            try:
                items, rv = await self.kube.list_all(path)
                for obj in items:
                    self._take(obj)
                async for event in self.kube.watch(path, resource_version=rv):
                    if event["type"] != "BOOKMARK":
                        self.last_event = time.monotonic()
                        self._take(event["object"])
                        async with self.changed:
                            self.changed.notify_all()
            except KubeError:
                await asyncio.sleep(0.5)

    def _take(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        replicas = int(obj["spec"].get("replicas") or 0)
        if replicas > 0 and self.replicas.get(name) == 0:
            self.seen_at[name] = time.perf_counter()
        self.replicas[name] = replicas
        self.state[name] = (obj["metadata"].get("annotations") or {}).get("zeroscaler.io/state", "")

    async def wait(self, check: Callable[[], bool], limit: float) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(check), limit)

    def asleep(self, names: list[str]) -> bool:
        return all(self.replicas.get(n) == 0 and self.state.get(n) == "asleep" for n in names)


async def _wait_http_ok(url: str, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.5)
    raise RuntimeError(f"{url} never became ready")


async def measure_controller(
    kube: Kube,
    watch: DeploymentWatch,
    baseline: Baseline,
    count: int,
    samples: int,
    gap: float,
    *,
    churn: bool,
) -> tuple[list[float], list[float]]:
    """Wake latencies with `count` managed workloads, each sample paired with a baseline one.

    Each sample wakes one workload, then the raw-watch baseline times the same thing beside it,
    so both see the same cluster (objects, background work). Without `churn` each waits until
    the previous target is asleep again; with it, they follow each other after `gap` while the
    earlier targets' sleeps happen around them.
    """
    names = [workload_name(i) for i in range(count)]
    await watch.wait(lambda: watch.asleep(names), limit=60 + count * 0.2)
    latencies, beside = [], []
    for j in range(samples):
        # Step through the workloads so that consecutive samples differ in type and scope.
        i = (j * 37) % count
        kind, plural = kind_of(i % TYPES)
        target = [workload_name(i)]
        latencies.append(await _time_wake(kube, watch, target, kind, plural, scope_of(i), gap))
        if not churn:
            await watch.wait(lambda target=target: watch.asleep(target), limit=60)  # type: ignore[misc]
        beside.append(await baseline.sample(gap))
    return latencies, beside


async def measure_fan_out(
    kube: Kube, watch: DeploymentWatch, samples: int, gap: float
) -> list[float]:
    """Latency to the last of FAN_OUT workloads woken by one write."""
    names = await ensure_fan_out(kube)
    kind, plural = kind_of(0)
    return [
        await _time_wake(kube, watch, names, kind, plural, f"{NAMESPACE}-fan-out", gap)
        for _ in range(samples)
    ]


async def _time_wake(
    kube: Kube,
    watch: DeploymentWatch,
    targets: list[str],
    kind: str,
    plural: str,
    namespace: str,
    gap: float,
) -> float:
    """Create one watched object once `targets` sleep; seconds until the last of them woke."""
    await watch.wait(lambda: watch.asleep(targets), limit=60)
    path = f"/apis/{GROUP}/v1/namespaces/{namespace}/{plural}"
    return await _time_scale_up(kube, watch, targets, path, kind, gap)


WAKE_LIMIT = 30.0  # seconds a wake may take; one that never comes counts as this long


async def _time_scale_up(
    kube: Kube, watch: DeploymentWatch, targets: list[str], path: str, kind: str, gap: float
) -> float:
    """After `gap`, create a `kind` object at `path`: seconds from the API server's answer until
    the last of `targets` is seen scaled up; WAKE_LIMIT if that never came (a failed wake is the
    slowest sample, not one left out)."""
    await asyncio.sleep(gap)  # one wake at a time: latency, not throughput
    for name in targets:
        watch.seen_at.pop(name, None)
    body = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"generateName": "s-"}}
    try:
        await kube.create(path, body)
    except KubeError as e:
        print(f"a wake's create failed, counted as {WAKE_LIMIT:g} s: {e}", flush=True)
        return WAKE_LIMIT
    acked = time.perf_counter()
    try:
        await watch.wait(lambda: all(n in watch.seen_at for n in targets), limit=WAKE_LIMIT)
    except TimeoutError:
        print(f"a wake of {', '.join(targets)} never came, counted as {WAKE_LIMIT:g} s", flush=True)
        return WAKE_LIMIT
    return max(watch.seen_at[n] for n in targets) - acked


class Baseline:
    """One raw watch (`bench.baseline`, a process) that scales a Deployment up on any event."""

    def __init__(self, kube: Kube, watch: DeploymentWatch) -> None:
        self.kube = kube
        self.watch = watch
        deployments = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
        self.deployments = deployments
        self.scale = f"{deployments}/baseline/scale"
        # Thing0 in the workloads' own namespace: no managed workload watches it there.
        self.watched = f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/things0"

    @contextlib.asynccontextmanager
    async def running(self, kubeconfig: str, workdir: Path) -> AsyncIterator[Baseline]:
        await _create(self.kube, self.deployments, deployment("baseline", {}))
        cmd = [str(BIN / "python"), "-m", "bench.baseline", "--kubeconfig", kubeconfig]
        log = workdir / "baseline.log"
        with running([*cmd, "--watch", self.watched, "--scale", self.scale], log):
            for _ in range(300):  # up to a minute for "ready": it has listed, its watch follows
                if "ready" in log.read_text():
                    break
                await asyncio.sleep(0.2)
            yield self

    async def sample(self, gap: float) -> float:
        """Scale to zero, wait `gap`, write a watched object: seconds until it is scaled up."""
        await self.kube.patch(self.scale, {"spec": {"replicas": 0}})
        await self.watch.wait(lambda: self.watch.replicas.get("baseline") == 0, limit=30)
        watched, kind = self.watched, "Thing0"
        return await _time_scale_up(self.kube, self.watch, ["baseline"], watched, kind, gap)


def _creator(kube: Kube, path: str, body: dict[str, Any]) -> Callable[[], Awaitable[None]]:
    async def create() -> None:
        await kube.create(path, body)

    return create


def _etcd_put(t: int, namespace: str, name: str) -> dict[str, Any]:
    """A put that stores one object straight in etcd, as the API server stores a custom resource."""
    kind, plural = kind_of(t)
    obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "generation": 1,
            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
    key = f"/registry/{GROUP}/{plural}/{namespace}/{name}"
    return {"key": _b64(key), "value": _b64(json.dumps(obj, separators=(",", ":")))}


def _etcd_txn(
    client: httpx.AsyncClient, etcd: str, puts: list[dict[str, Any]]
) -> Callable[[], Awaitable[None]]:
    body = {"success": [{"requestPut": put} for put in puts]}

    async def create() -> None:
        (await client.post(f"{etcd}/v3/kv/txn", json=body)).raise_for_status()

    return create


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def fill_objects(
    kube: Kube,
    total: int,
    scopes: Sequence[int | str] = FILLED_SCOPES,
    progress: str = "",
    etcd: str = "",
    on_listed: Callable[[], None] = lambda: None,
) -> int:
    """Create watched objects until `scopes` (namespaces zs-bench-<scope>) hold `total`, spread
    evenly over types and scopes.

    With `etcd` (its client URL) they are written to etcd directly, one of each type to a
    transaction (the API server's watches see them as they see its own writes; two of one type
    at one resourceVersion and a watch missed some): many times as fast as creating them one by
    one through the API server. Returns how many the benchmark's types hold in all scopes.
    """
    places = [(t, k) for t in range(TYPES) for k in scopes]
    per_place, extra = divmod(total, len(places))
    have: dict[tuple[int, str], int] = {}
    existing = 0
    for t in range(TYPES):  # one list per type, not one per place: 10,000 lists take a while
        items, _ = await kube.list_all(f"/apis/{GROUP}/v1/{kind_of(t)[1]}", metadata_only=True)
        existing += len(items)
        for obj in items:
            where = (t, obj["metadata"]["namespace"])
            have[where] = have.get(where, 0) + 1
    jobs: list[Callable[[], Awaitable[None]]] = []
    puts: dict[int, list[dict[str, Any]]] = {t: [] for t in range(TYPES)}
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=4), timeout=60) as client:
        for n, (t, k) in enumerate(places):
            kind, plural = kind_of(t)
            namespace = f"{NAMESPACE}-{k}"
            path = f"/apis/{GROUP}/v1/namespaces/{namespace}/{plural}"
            # Small objects: the controller's watches store metadata only anyway.
            body = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"generateName": "o-"}}
            wanted = per_place + (1 if n < extra else 0)
            for j in range(have.pop((t, namespace), 0), wanted):
                if etcd:  # the same names again after a partial fill: overwritten
                    puts[t].append(_etcd_put(t, namespace, f"e-{k}-{j}"))
                else:
                    jobs.append(_creator(kube, path, body))
        batches = [[p for p in batch if p] for batch in itertools.zip_longest(*puts.values())]
        jobs += [_etcd_txn(client, etcd, batch) for batch in batches]
        on_listed()  # what was there is counted; the writes begin
        await _gather_limited(jobs, limit=4 if etcd else 48, progress=progress)
    return existing + len(jobs) - len(batches) + sum(len(b) for b in batches)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def measure_idle(pid: int, seconds: float) -> tuple[list[float], float]:
    """CPU of process `pid` as % of a core: per 10 s window, and over all `seconds`."""
    windows = []
    before, started = _cpu_seconds(pid), time.monotonic()
    window = (before, started)
    while time.monotonic() - started < seconds:
        await asyncio.sleep(10)
        now = (_cpu_seconds(pid), time.monotonic())
        windows.append(100 * (now[0] - window[0]) / (now[1] - window[1]))
        window = now
    return windows, 100 * (_cpu_seconds(pid) - before) / (time.monotonic() - started)


def compile_bytecode() -> None:
    """Compile the project's modules ahead of the starts, as the image does at its build: with
    PYTHONDONTWRITEBYTECODE set, each controller start would compile its 58 modules again (about
    70 ms here, which no start in a cluster pays) and the raw list beside it far fewer."""
    import compileall

    import zeroscaler

    root = Path(zeroscaler.__file__).parent
    # compileall does not follow links; the controller's and the webhook's packages are ones.
    trees = [root, *(p.resolve() for p in root.iterdir() if p.is_symlink() and p.is_dir())]
    trees.append(Path(__file__).parent)  # the raw list and the baseline are started from here
    if not all([compileall.compile_dir(tree, quiet=1) for tree in trees]):
        print("note: some bytecode could not be written; starts will compile it", flush=True)


def controller_command(kubeconfig: str, port: int, log_level: str = "") -> list[str]:
    """The controller as the benchmarks run it (ZEROSCALER_BENCH_PROFILE: under cProfile)."""
    profile = os.environ.get("ZEROSCALER_BENCH_PROFILE")  # a cProfile output path
    launcher = ["-m", "cProfile", "-o", profile] if profile else []
    level = log_level or os.environ.get("ZEROSCALER_BENCH_LOG_LEVEL", "warning")
    return [
        str(BIN / "python"), *launcher, "-m", "zeroscaler.cli.controller_main",
        "--kubeconfig", kubeconfig,
        "--metrics-host", "127.0.0.1",
        "--metrics-port", str(port),
        "--lease-namespace", NAMESPACE,
        "--log-level", level,
        "--access-review-ttl", "600",
    ]  # fmt: skip


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def p99_ratio(values: list[float], baseline: list[float]) -> float:
    return percentile(values, 0.99) / max(percentile(baseline, 0.99), 1e-9)


def print_table(results: Results) -> None:
    head = f"{'wake latency (ms)':<42}{'n':>5}{'p50':>8}{'p99':>8}{'max':>8}"
    print(f"\n{head}{'baseline beside p50':>22}{'p99':>8}{'p99 ratio':>11}")
    for label, values in results.latency.items():
        if not values:
            continue
        line = (
            f"{label:<42}{len(values):>5}{percentile(values, 0.5) * 1000:>8.1f}"
            f"{percentile(values, 0.99) * 1000:>8.1f}{max(values) * 1000:>8.1f}"
        )
        base = results.paired.get(label)
        if base:
            line += (
                f"{percentile(base, 0.5) * 1000:>22.1f}{percentile(base, 0.99) * 1000:>8.1f}"
                f"{p99_ratio(values, base):>10.2f}x"
            )
        print(line)
    print(
        f"\nidle controller, {results.idle_workloads} workloads, {results.idle_objects} watched "
        f"objects: CPU {results.idle_cpu_percent:.2f}% of a core, RSS {results.idle_rss_mb:.0f} MB"
    )
    for note in results.notes:
        print(f"note: {note}")


def plot(results: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [k for k, v in results.latency.items() if v]
    p50 = [percentile(results.latency[k], 0.5) * 1000 for k in labels]
    p99 = [percentile(results.latency[k], 0.99) * 1000 for k in labels]
    beside = [percentile(results.paired.get(k) or [0.0], 0.99) * 1000 for k in labels]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = range(len(labels))
    ax.bar([x - 0.27 for x in xs], p50, width=0.27, label="p50")
    ax.bar(list(xs), p99, width=0.27, label="p99")
    ax.bar([x + 0.27 for x in xs], beside, width=0.27, label="p99 of the baseline beside it")
    short = [k.removeprefix("zeroscaler, ").replace(" (raw watch)", "") for k in labels]
    ax.set_xticks(list(xs), short, rotation=12, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("wake latency (ms, log scale)")
    ax.set_title(
        f"zeroscaler wake latency; idle: {results.idle_cpu_percent:.2f}% CPU, "
        f"{results.idle_rss_mb:.0f} MB RSS ({results.idle_workloads} workloads, "
        f"{results.idle_objects} objects)",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


async def bench(args: argparse.Namespace, kubeconfig: str, workdir: Path) -> Results:
    results = Results()
    async with Kube(load_access(kubeconfig), max_connections=64) as kube:
        await setup_cluster(kube)
        watch = DeploymentWatch(kube)
        watcher = asyncio.create_task(watch.run())
        port = free_port()
        controller = controller_command(kubeconfig, port)
        async with contextlib.AsyncExitStack() as stack:
            baseline = await stack.enter_async_context(
                Baseline(kube, watch).running(kubeconfig, workdir)
            )
            if not args.idle_only:
                alone = [await baseline.sample(args.gap) for _ in range(args.samples)]
                results.latency[ALONE] = alone
            proc = stack.enter_context(running(controller, workdir / "controller.log"))
            await _wait_http_ok(f"http://127.0.0.1:{port}/readyz")
            for count in [] if args.idle_only else args.workloads:
                await ensure_workloads(kube, count)
                label = _label(count)
                results.latency[label], results.paired[label] = await measure_controller(
                    kube, watch, baseline, count, args.samples, args.gap, churn=False
                )
                print(f"{label}: done", flush=True)
            if args.churn and not args.idle_only:
                count = max(args.workloads)
                label = f"{_label(count)}, sleeps around"
                results.latency[label], results.paired[label] = await measure_controller(
                    kube, watch, baseline, count, args.samples, args.gap, churn=True
                )
                print(f"{label}: done", flush=True)
            if args.fan_out and not args.idle_only:
                results.latency[FAN_OUT_LABEL] = await measure_fan_out(
                    kube, watch, max(5, args.samples // 4), args.gap
                )
                print(f"{FAN_OUT_LABEL}: done", flush=True)
            if args.objects:
                count = max(args.workloads)
                await ensure_workloads(kube, count)
                total = await fill_objects(kube, args.objects)
                names = [workload_name(i) for i in range(count)]
                await watch.wait(lambda: watch.asleep(names), limit=300)
                # The fill woke every workload; their sleeps' Events trail the scale writes.
                await asyncio.sleep(args.idle_settle)
                results.idle_windows, results.idle_cpu_percent = await measure_idle(
                    proc.pid, args.idle_seconds
                )
                results.idle_rss_mb = _rss_mb(proc.pid)
                results.idle_workloads, results.idle_objects = count, total
        watcher.cancel()
    return results


@contextlib.contextmanager
def cluster_for(kubeconfig: str | None) -> Iterator[tuple[str, str]]:
    """The cluster `kubeconfig` names, else a local one for the run: its kubeconfig and, for one
    started here, its etcd's client URL."""
    if kubeconfig is not None:
        yield kubeconfig, ""
        return
    from localcluster import build
    from localcluster.cluster import start

    binaries = build.ensure_binaries(progress=lambda m: print(m, file=sys.stderr))
    cluster = start(binaries, nodes=1, progress=lambda m: print(m, file=sys.stderr))
    try:
        etcd = next(c for c in cluster.components if c.name == "etcd")
        urls = [a.split("=", 1)[1] for a in etcd.cmd if a.startswith("--listen-client-urls=")]
        yield str(cluster.kubeconfig), urls[0]
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting a local one")
    parser.add_argument("--workloads", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument(
        "--samples", type=int, default=200, help="wakes timed per row (the fan-out row: a quarter)"
    )
    parser.add_argument("--objects", type=int, default=50_000)
    parser.add_argument(
        "--churn",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time wakes while earlier targets fall asleep around them",
    )
    parser.add_argument(
        "--fan-out",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"also time one write that wakes {FAN_OUT} workloads",
    )
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument(
        "--idle-settle", type=float, default=60.0, help="seconds after the fill before measuring"
    )
    parser.add_argument("--gap", type=float, default=0.5, help="quiet seconds before a sample")
    parser.add_argument(
        "--idle-only",
        action="store_true",
        help="measure only the idle cost (its result file holds that alone)",
    )
    parser.add_argument(
        "--scale",
        type=int,
        nargs=2,
        metavar=("WORKLOADS", "OBJECTS"),
        help="only the scale row: 1,000 workloads over 50,000 objects, then these counts "
        "(10000 200000: about 30 minutes on 2 cores), each figure's growth between them",
    )
    parser.add_argument(
        "--scale-from",
        type=int,
        nargs=2,
        default=[1000, 50_000],
        metavar=("WORKLOADS", "OBJECTS"),
        help="the scale row's first stage, which growth is measured from",
    )
    parser.add_argument(
        "--etcd",
        default="",
        help="with --kubeconfig: its etcd's client URL, to store the scale row's objects "
        "directly (a cluster the benchmark starts is found by itself)",
    )
    parser.add_argument(
        "--scale-stages",
        type=lambda text: [tuple(int(n) for n in pair.split(":")) for pair in text.split(",")],
        help="the scale row's stages instead of --scale-from and --scale, as WORKLOADS:OBJECTS "
        "comma-separated (100:5000,1000:50000,10000:200000 for the plot against size)",
    )
    parser.add_argument(
        "--restarts",
        default="pages,streaming",
        type=lambda text: text.split(","),
        help="the scale row's restarts, in order, each how the controller lists: pages, "
        "streaming, cold (watches started by the workloads' first reconciles, not warmed), "
        "default (no flag: for code before them); the last gives the row's figures",
    )
    parser.add_argument(
        "--restart-rounds",
        type=int,
        default=3,
        help="the scale row's rounds of restarts: each lists raw once and starts every mode "
        "once, in a rotated order; each figure is the median over the rounds",
    )
    args = parser.parse_args()
    compile_bytecode()
    workdir = Path(tempfile.mkdtemp(prefix="zeroscaler-bench-"))
    if args.scale or args.scale_stages:
        from bench.bench_scale import bench_scale, print_scale, write
        from bench.bench_scale import targets as scale_targets

        scale_run = Run()
        with cluster_for(args.kubeconfig) as (kubeconfig, etcd):
            args.etcd = args.etcd or etcd
            scale = asyncio.run(bench_scale(args, kubeconfig, workdir))
        scale.notes.append(
            f"{args.samples} wakes per stage; {os.cpu_count()} cores, shared with other work; "
            f"logs in {workdir}"
        )
        print_scale(scale)
        write(scale, scale_run)
        sys.exit(1 if report(scale_targets(scale)) else 0)
    run = Run()
    with cluster_for(args.kubeconfig) as (kubeconfig, _):
        results = asyncio.run(bench(args, kubeconfig, workdir))
    if results.idle_windows:
        windows = ", ".join(f"{w:.2f}" for w in results.idle_windows)
        results.notes.append(f"idle CPU % per 10 s window: {windows}")
    print_table(results)
    judged = targets(results, args)
    save_json("controller", run.stamped(asdict(results), judged))
    if results.latency:
        plot(results, RESULTS / "controller.png")
        print(f"wrote {RESULTS / 'controller.png'}")
    print(f"logs in {workdir}")
    sys.exit(1 if report(judged) else 0)


# The targets of the rows (docs/figures.md, "Controller").
WAKE_P99_MS = 100.0
WAKE_P99_RATIO = 1.5
IDLE_CPU_PERCENT = 1.0
IDLE_RESIDENT_MB = 100.0


def targets(results: Results, args: argparse.Namespace) -> list[Target]:
    """What this run is judged by: each row of wakes asked for (its p99, and against the
    baseline beside it), the fan-out row and the baseline alone as measurements, and the idle
    cost when objects were filled. A row asked for and not measured fails."""
    found: list[Target] = []
    labels = [] if args.idle_only else [_label(count) for count in args.workloads]
    if args.churn and not args.idle_only:
        labels.append(f"{_label(max(args.workloads))}, sleeps around")
    for label in labels:
        values, beside = results.latency.get(label, []), results.paired.get(label, [])
        p99 = percentile(values, 0.99) * 1000 if values else None
        ratio = p99_ratio(values, beside) if values and beside else None
        found.append(Target(f"{label}: wake p99", p99, WAKE_P99_MS, "ms"))
        found.append(Target(f"{label}: wake p99 / baseline p99", ratio, WAKE_P99_RATIO, "x"))
    alone = results.latency.get(ALONE, [])
    if not args.idle_only:
        found.append(Target(f"{ALONE}: p99", _p99_ms(alone), None, "ms"))
    if args.fan_out and not args.idle_only:
        fan = results.latency.get(FAN_OUT_LABEL, [])
        found.append(Target(f"{FAN_OUT_LABEL}: p99", _p99_ms(fan), None, "ms"))
    if args.objects:
        where = f"idle, {results.idle_workloads} workloads over {results.idle_objects} objects"
        measured = bool(results.idle_windows)
        cpu = results.idle_cpu_percent if measured else None
        rss = results.idle_rss_mb if measured else None
        found.append(Target(f"{where}: CPU", cpu, IDLE_CPU_PERCENT, "%"))
        found.append(Target(f"{where}: resident", rss, IDLE_RESIDENT_MB, "MB"))
    return found


def _p99_ms(values: list[float]) -> float | None:
    return percentile(values, 0.99) * 1000 if values else None


def _label(count: int) -> str:
    return f"zeroscaler, {count} workload{'s' if count > 1 else ''}"


ALONE = "baseline (raw watch), no controller"
FAN_OUT_LABEL = f"zeroscaler, {FAN_OUT} woken by one write (last)"


if __name__ == "__main__":
    main()
