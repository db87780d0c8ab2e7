"""Benchmark: one event that wakes every workload at once, against a raw baseline beside it.

N Deployments (100, then 1,000) all watch one custom resource type in one namespace, so creating
one object there wakes all of them. Time runs from the API server's answer to that create until a
Deployment watch shows the last of them scaled up. The baseline, measured in the same run before
each sample, is one raw client (`bench.baseline`, a process) that on a watch event of its own sends
the same N scale-subresource writes to N unmanaged Deployments with the controller's connection
count. Beside the times: the controller's CPU per wake (from the create until every wake is
recorded on its workload and its Events had a few seconds), how many answers were 429, and the
shortest time any woken workload stayed up before sleeping again, against its idle timeout (the
clock starts when each one is awake, not at the event).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.judge import Run, Target, alternated, report
from bench.measures import cpu_seconds, percentile, rss_mb, wait_http_ok
from bench.saved import RESULTS, save_json
from bench.workloads import BIN, GROUP, cluster_for, create_if_missing, deployment, gather_limited
from localcluster.processes import free_port, running
from zeroscaler.api import ClientLimits, Kube, KubeError
from zeroscaler.api.credentials import load_access

NAMESPACE = "zs-mass"  # the managed workloads
SCOPE = "zs-mass-signals"  # where the one watched object is created
RAW = "zs-mass-raw"  # the baseline's Deployments and its signal; not opted in
KIND, PLURAL = "Signal", "signals"
TIMEOUT = 5.0  # the workloads' idle timeout, seconds
WAKE_LIMIT = 120.0  # seconds one event's wakes may take; a sample short of them counts as this
RATIO = 1.5  # the target: the last wake over the baseline's last write, median of the samples
CONNECTIONS = 16  # the controller's request connections (its default), and the baseline's
SETTLE = 3.0  # seconds after the last record for Events before the CPU is read


@dataclass
class Row:
    count: int
    mode: str  # split (controller and webhook) or combined (one process)
    last: list[float] = field(default_factory=list)  # seconds to the last wake
    median: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    baseline_last: list[float] = field(default_factory=list)
    baseline_cpu_ms_per_write: list[float] = field(default_factory=list)
    recorded: list[float] = field(default_factory=list)  # seconds to the last record
    cpu_ms_per_wake: list[float] = field(default_factory=list)
    shortest_awake: list[float] = field(default_factory=list)  # seconds up before sleeping again
    throttled: list[float] = field(default_factory=list)  # 429 answers seen, per sample


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    timeout: float = TIMEOUT
    rss_mb: dict[str, float] = field(default_factory=dict)  # process -> MB after the row
    notes: list[str] = field(default_factory=list)


class Watch:
    """Replicas and state of the Deployments in one namespace, with when each changed."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
        self.replicas: dict[str, int] = {}
        self.state: dict[str, str] = {}
        self.up_at: dict[str, float] = {}
        self.down_at: dict[str, float] = {}
        self.awake_at: dict[str, float] = {}  # state annotation seen "awake"
        self.changed = asyncio.Event()

    async def run(self) -> None:
        while True:
            try:
                items, rv = await self.kube.list_all(self.path)
                for obj in items:
                    self._take(obj)
                async for event in self.kube.watch(self.path, resource_version=rv):
                    if event["type"] != "BOOKMARK":
                        self._take(event["object"])
                        self.changed.set()
            except KubeError:
                await asyncio.sleep(0.5)

    def _take(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        replicas = int(obj["spec"].get("replicas") or 0)
        state = (obj["metadata"].get("annotations") or {}).get("zeroscaler.io/state", "")
        now = time.perf_counter()
        before = self.replicas.get(name)
        if replicas > 0 and before == 0:
            self.up_at[name] = now
        if replicas == 0 and before and before > 0:
            self.down_at[name] = now
        if state == "awake" and self.state.get(name) != "awake":
            self.awake_at[name] = now
        self.replicas[name], self.state[name] = replicas, state

    async def until(self, check: Any, limit: float, what: str) -> None:
        deadline = time.monotonic() + limit
        while not check():
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"timed out waiting for {what}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))


def managed_name(i: int) -> str:
    return f"mass-{i:04d}"


def raw_name(i: int) -> str:
    return f"raw-{i:04d}"


async def setup(kube: Kube) -> None:
    """The namespaces, the Signal type, and a ServiceAccount that may watch it."""
    labels = {"zeroscaler.io/enabled": "true"}
    await create_if_missing(
        kube, "/api/v1/namespaces", {"metadata": {"name": NAMESPACE, "labels": labels}}
    )
    for name in (SCOPE, RAW):
        await create_if_missing(kube, "/api/v1/namespaces", {"metadata": {"name": name}})
    for ns in (NAMESPACE, RAW):
        path = f"/api/v1/namespaces/{ns}/serviceaccounts"
        await create_if_missing(kube, path, {"metadata": {"name": "op"}})
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    rules = [{"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch"]}]
    await create_if_missing(
        kube, f"{rbac}/clusterroles", {"metadata": {"name": "zs-mass"}, "rules": rules}
    )
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "zs-mass"}
    subject = {"kind": "ServiceAccount", "name": "op", "namespace": NAMESPACE}
    binding = {"metadata": {"name": "zs-mass"}, "roleRef": ref, "subjects": [subject]}
    await create_if_missing(kube, f"{rbac}/clusterrolebindings", binding)
    crd = {
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "plural": PLURAL, "listKind": f"{KIND}List"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    await create_if_missing(kube, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    for _ in range(120):
        if any(r.group == GROUP and r.resource == PLURAL for r in await kube.discover()):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError("the Signal type was not served in time")


async def ensure_deployments(kube: Kube, count: int) -> None:
    """`count` managed Deployments that watch Signals in SCOPE, and as many raw ones."""
    annotations = {
        "zeroscaler.io/idle-timeout": f"{TIMEOUT:g}s",
        "zeroscaler.io/watched-kinds": f"{KIND}.{GROUP}",
        "zeroscaler.io/watch-namespaces": SCOPE,
    }

    def creator(ns: str, body: dict[str, Any]) -> Any:
        return lambda: create_if_missing(kube, f"/apis/apps/v1/namespaces/{ns}/deployments", body)

    jobs = [creator(NAMESPACE, deployment(managed_name(i), annotations)) for i in range(count)]
    jobs += [creator(RAW, deployment(raw_name(i), {})) for i in range(count)]
    await gather_limited(jobs, limit=32)


async def signal(kube: Kube, namespace: str) -> float:
    """Create a Signal; the moment the API server answered."""
    body = {"apiVersion": f"{GROUP}/v1", "kind": KIND, "metadata": {"generateName": "s-"}}
    await kube.create(f"/apis/{GROUP}/v1/namespaces/{namespace}/{PLURAL}", body)
    return time.perf_counter()


async def throttled_count(client: httpx.AsyncClient, url: str) -> float:
    """The controller's count of 429 answers (0 when it exports none)."""
    text = (await client.get(url)).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("zeroscaler_api_throttled_responses_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def sample_baseline(kube: Kube, raw: Watch, row: Row, pid: int) -> None:
    """Scale the raw Deployments to zero, then signal the baseline: seconds to the last one up,
    and the baseline's CPU per write."""
    count = row.count
    names = [raw_name(i) for i in range(count)]

    def zero(name: str) -> Any:
        path = f"/apis/apps/v1/namespaces/{RAW}/deployments/{name}/scale"
        return lambda: kube.patch(path, {"spec": {"replicas": 0}})

    await gather_limited([zero(n) for n in names], limit=CONNECTIONS)
    await raw.until(lambda: all(raw.replicas.get(n) == 0 for n in names), 120, "raw at zero")
    await asyncio.sleep(0.5)
    for n in names:
        raw.up_at.pop(n, None)
    cpu = cpu_seconds(pid)
    acked = await signal(kube, RAW)
    await raw.until(lambda: all(n in raw.up_at for n in names), 120, "the baseline's writes")
    row.baseline_last.append(max(raw.up_at[n] for n in names) - acked)
    await asyncio.sleep(1.0)  # its last answers
    row.baseline_cpu_ms_per_write.append((cpu_seconds(pid) - cpu) * 1000 / count)


async def sample_controller(
    kube: Kube, watch: Watch, row: Row, pid: int, metrics: str, http: httpx.AsyncClient
) -> None:
    """Wake every managed Deployment with one Signal; record the times and the CPU."""
    names = [managed_name(i) for i in range(row.count)]

    def asleep() -> bool:
        return all(watch.replicas.get(n) == 0 and watch.state.get(n) == "asleep" for n in names)

    await watch.until(asleep, 120 + row.count * 0.1, "every workload asleep")
    await asyncio.sleep(SETTLE)  # the sleeps' Events
    for table in (watch.up_at, watch.down_at, watch.awake_at):
        for n in names:
            table.pop(n, None)
    throttled = await throttled_count(http, metrics)
    cpu = cpu_seconds(pid)
    acked = await signal(kube, SCOPE)
    try:
        await watch.until(lambda: all(n in watch.up_at for n in names), WAKE_LIMIT, "every wake")
    except RuntimeError:
        # Not every wake came: the sample counts as the whole limit, and the row ends here.
        row.last.append(WAKE_LIMIT)
        raise
    ups = sorted(watch.up_at[n] - acked for n in names)
    await watch.until(lambda: all(n in watch.awake_at for n in names), 120, "every record")
    row.recorded.append(max(watch.awake_at[n] for n in names) - acked)
    await asyncio.sleep(SETTLE)
    row.cpu_ms_per_wake.append((cpu_seconds(pid) - cpu) * 1000 / row.count)
    row.throttled.append(await throttled_count(http, metrics) - throttled)
    row.first.append(ups[0])
    row.median.append(percentile(ups, 0.5))
    row.last.append(ups[-1])
    await watch.until(lambda: all(n in watch.down_at for n in names), 120, "every sleep after")
    row.shortest_awake.append(min(watch.down_at[n] - watch.up_at[n] for n in names))


def print_table(results: Results) -> None:
    print(
        f"\n{'mass wake (s; median of samples)':<34}{'n':>3}{'first':>8}{'median':>8}{'last':>8}"
        f"{'baseline':>10}{'ratio':>8}{'recorded':>10}{'CPU ms/wake':>13}{'base ms':>9}{'429s':>6}"
        f"{'shortest up':>13}"
    )
    for row in results.rows:
        if not (row.last and row.baseline_last and row.recorded and row.shortest_awake):
            print(f"{row.mode}, {row.count} workloads: not every figure measured")
            continue
        last, base = statistics.median(row.last), statistics.median(row.baseline_last)
        # Each sample against the baseline measured beside it, on the same busy machine.
        pairs = zip(row.last, row.baseline_last, strict=False)
        ratio = statistics.median(a / max(b, 1e-9) for a, b in pairs)
        print(
            f"{f'{row.mode}, {row.count} workloads':<34}{len(row.last):>3}"
            f"{statistics.median(row.first):>8.2f}{statistics.median(row.median):>8.2f}{last:>8.2f}"
            f"{base:>10.2f}{ratio:>7.2f}x{statistics.median(row.recorded):>10.2f}"
            f"{statistics.median(row.cpu_ms_per_wake):>13.2f}"
            f"{statistics.median(row.baseline_cpu_ms_per_write):>9.2f}{sum(row.throttled):>6.0f}"
            f"{min(row.shortest_awake):>12.2f}s"
        )
    rss = ", ".join(f"{name} {mb:.0f} MB" for name, mb in results.rss_mb.items())
    print(f"idle timeout {results.timeout:g}s; resident after the rows: {rss}")
    for note in results.notes:
        print(f"note: {note}")


def plot(results: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    rows = [r for r in results.rows if r.last and r.baseline_last and r.recorded]
    labels = [f"{r.mode}, {r.count}" for r in rows]
    xs = range(len(labels))
    last = [statistics.median(r.last) for r in rows]
    base = [statistics.median(r.baseline_last) for r in rows]
    recorded = [statistics.median(r.recorded) for r in rows]
    ax.bar([x - 0.27 for x in xs], last, width=0.27, label="zeroscaler: last scaled up")
    ax.bar(list(xs), base, width=0.27, label="raw client, same writes: last scaled up")
    ax.bar([x + 0.27 for x in xs], recorded, width=0.27, label="zeroscaler: last recorded")
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("seconds after the one event")
    ax.set_title("One event wakes every workload (median of samples)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def _controller_flags(kubeconfig: str, port: int) -> list[str]:
    return [
        "--kubeconfig", kubeconfig,
        "--metrics-host", "127.0.0.1",
        "--metrics-port", str(port),
        "--lease-namespace", NAMESPACE,
        "--log-level", "warning",
        "--access-review-ttl", "600",
    ]  # fmt: skip


def _webhook_flags(kubeconfig: str, port: int, workdir: Path) -> list[str]:
    from zeroscaler.certs.issue import new_ca, new_serving_cert

    ca = new_ca()
    cert, key = new_serving_cert(ca, ["127.0.0.1"]).write(workdir, "webhook")
    return [
        "--kubeconfig", kubeconfig,
        "--namespace", NAMESPACE,
        "--cert-file", str(cert),
        "--key-file", str(key),
        "--port", str(port),
        "--log-level", "warning",
    ]  # fmt: skip


async def _wait_https_ok(url: str, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    async with httpx.AsyncClient(verify=False) as client:  # our own test certificate
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.5)
    raise RuntimeError(f"{url} never became ready")


@contextlib.contextmanager
def components(
    mode: str, kubeconfig: str, workdir: Path
) -> Iterator[tuple[dict[str, subprocess.Popen[bytes]], int, int]]:
    """zeroscaler's processes in `mode` (split: controller and webhook; combined: one), with
    the controller's metrics port and the webhook's port."""
    port, hook_port = free_port(), free_port()
    profile = os.environ.get("ZEROSCALER_BENCH_PROFILE")  # a cProfile output path
    launcher = ["-m", "cProfile", "-o", profile] if profile else []
    python = [str(BIN / "python"), *launcher, "-m"]
    controller = _controller_flags(kubeconfig, port)
    webhook = _webhook_flags(kubeconfig, hook_port, workdir)
    with contextlib.ExitStack() as stack:
        if mode == "combined":
            cmd = [*python, "zeroscaler.cli.combined_main", *controller, "--", *webhook]
            procs = {"combined": stack.enter_context(running(cmd, workdir / "combined.log"))}
        else:
            ctl = [*python, "zeroscaler.cli.controller_main", *controller]
            hook = [str(BIN / "zeroscaler-webhook"), *webhook]
            procs = {
                "controller": stack.enter_context(running(ctl, workdir / "controller.log")),
                "webhook": stack.enter_context(running(hook, workdir / "webhook.log")),
            }
        yield procs, port, hook_port


async def bench(args: argparse.Namespace, kubeconfig: str, workdir: Path) -> Results:
    results = Results()
    async with Kube(load_access(kubeconfig), ClientLimits(max_connections=64)) as kube:
        await setup(kube)
        watch, raw = Watch(kube, NAMESPACE), Watch(kube, RAW)
        watchers = [asyncio.create_task(watch.run()), asyncio.create_task(raw.run())]
        scale_file = workdir / "scale-paths"
        for mode in args.modes:
            with components(mode, kubeconfig, workdir) as (procs, port, hook_port):
                metrics = f"http://127.0.0.1:{port}/metrics"
                await wait_http_ok(f"http://127.0.0.1:{port}/readyz")
                await _wait_https_ok(f"https://127.0.0.1:{hook_port}/readyz")
                pid = procs.get("controller", procs.get("combined"))
                assert pid is not None
                async with httpx.AsyncClient() as http:
                    for count in args.workloads:
                        row = Row(count, mode)
                        results.rows.append(row)
                        try:
                            await _row(kube, watch, raw, row, args.samples, kubeconfig, workdir,
                                       scale_file, pid.pid, metrics, http)  # fmt: skip
                        except RuntimeError as e:  # a wait over its bound: judged as measured
                            results.notes.append(f"{mode}, {count} workloads: {e}")
                            break
                        print(f"{mode}, {count} workloads: done", flush=True)
                for name, proc in procs.items():
                    results.rss_mb[f"{mode}: {name}" if mode == "split" else mode] = rss_mb(
                        proc.pid
                    )
        for task in watchers:
            task.cancel()
    return results


def _write_scale_paths(path: Path, count: int) -> None:
    """The baseline's writes: the scale subresources of the first `count` raw Deployments."""
    lines = [
        f"/apis/apps/v1/namespaces/{RAW}/deployments/{raw_name(i)}/scale" for i in range(count)
    ]
    path.write_text("\n".join(lines) + "\n")


async def _row(
    kube: Kube,
    watch: Watch,
    raw: Watch,
    row: Row,
    samples: int,
    kubeconfig: str,
    workdir: Path,
    scale_file: Path,
    pid: int,
    metrics: str,
    http: httpx.AsyncClient,
) -> None:
    """One row: the baseline and a mass wake, `samples` times, with `row.count` workloads."""
    count = row.count
    await ensure_deployments(kube, count)
    _write_scale_paths(scale_file, count)
    log = workdir / f"baseline-{row.mode}-{count}.log"
    base_cmd = [
        str(BIN / "python"), "-m", "bench.baseline",
        "--kubeconfig", kubeconfig,
        "--watch", f"/apis/{GROUP}/v1/namespaces/{RAW}/{PLURAL}",
        "--scale-file", str(scale_file),
        "--connections", str(CONNECTIONS),
    ]  # fmt: skip
    with running(base_cmd, log) as baseline:
        for _ in range(300):
            if "ready" in log.read_text():
                break
            await asyncio.sleep(0.2)
        # The two alternate which goes first, so that neither always follows the other's quiet.
        for order in alternated(["baseline", "zeroscaler"], samples):
            for side in order:
                if side == "baseline":
                    await sample_baseline(kube, raw, row, baseline.pid)
                else:
                    await sample_controller(kube, watch, row, pid, metrics, http)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting a local one")
    parser.add_argument("--workloads", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--samples", type=int, default=3, help="mass wakes timed per row")
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=["split", "combined"],
        default=["split", "combined"],
        help="split: controller and webhook processes; combined: zeroscaler-combined",
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="zeroscaler-bench-"))
    run = Run()
    with cluster_for(args.kubeconfig) as (kubeconfig, _):
        results = asyncio.run(bench(args, kubeconfig, workdir))
    results.notes.append(
        "ratio: median over samples of zeroscaler's last wake / the last write of the baseline "
        f"measured beside it (target {RATIO}x); base ms: "
        "the baseline's CPU per write; CPU ms/wake covers the wake, its record and Event; "
        f"{os.cpu_count()} cores, shared with other work while measured"
    )
    print_table(results)
    judged = targets(results, args)
    save_json("masswake", run.stamped(asdict(results), judged))
    if any(r.last for r in results.rows):
        plot(results, RESULTS / "masswake.png")
        print(f"wrote {RESULTS / 'masswake.png'}")
    print(f"logs in {workdir}")
    sys.exit(1 if report(judged) else 0)


def targets(results: Results, args: argparse.Namespace) -> list[Target]:
    """Each row asked for: its last wake against the baseline's last write beside it (the median
    of the samples' ratios), and its CPU per wake as a measurement. A row not measured fails."""
    rows = {(r.mode, r.count): r for r in results.rows}
    found = []
    for mode in args.modes:
        for count in args.workloads:
            row = rows.get((mode, count))
            where = f"{mode}, {count:,} workloads"
            pairs = list(zip(row.last, row.baseline_last, strict=False)) if row else []
            ratio = statistics.median(a / max(b, 1e-9) for a, b in pairs) if pairs else None
            found.append(Target(f"{where}: last wake / baseline's last write", ratio, RATIO, "x"))
            cpu = statistics.median(row.cpu_ms_per_wake) if row and row.cpu_ms_per_wake else None
            found.append(Target(f"{where}: controller CPU per wake", cpu, None, "ms"))
    return found


if __name__ == "__main__":
    main()
