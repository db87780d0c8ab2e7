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
import contextlib
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.controller_args import arguments, hand_over
from bench.judge import Run, Target, report
from bench.measures import (
    Baseline,
    DeploymentWatch,
    measure_controller,
    measure_idle,
    percentile,
    rss_mb,
    time_wake,
    wait_http_ok,
)
from bench.saved import RESULTS, save_json
from bench.workloads import (
    FAN_OUT,
    NAMESPACE,
    cluster_for,
    compile_bytecode,
    controller_command,
    ensure_workloads,
    fill_objects,
    gather_limited,
    kind_of,
    setup_cluster,
    workload_creator,
    workload_name,
)
from localcluster.processes import free_port, running
from zeroscaler.api import ClientLimits, Kube
from zeroscaler.api.credentials import load_access


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


def fan_out_name(i: int) -> str:
    return f"fan-{i:02d}"


async def ensure_fan_out(kube: Kube) -> list[str]:
    """FAN_OUT workloads that all watch Thing0 in the fan-out namespace."""
    kind, _ = kind_of(0)
    names = [fan_out_name(i) for i in range(FAN_OUT)]
    scope = f"{NAMESPACE}-fan-out"
    await gather_limited([workload_creator(kube, n, kind, scope) for n in names])
    return names


async def measure_fan_out(
    kube: Kube, watch: DeploymentWatch, samples: int, gap: float
) -> list[float]:
    """Latency to the last of FAN_OUT workloads woken by one write."""
    names = await ensure_fan_out(kube)
    kind, plural = kind_of(0)
    return [
        await time_wake(kube, watch, names, kind, plural, f"{NAMESPACE}-fan-out", gap)
        for _ in range(samples)
    ]


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
    async with Kube(load_access(kubeconfig), ClientLimits(max_connections=64)) as kube:
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
            await wait_http_ok(f"http://127.0.0.1:{port}/readyz")
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
                results.idle_rss_mb = rss_mb(proc.pid)
                results.idle_workloads, results.idle_objects = count, total
        watcher.cancel()
    return results


def main() -> None:
    args = arguments(__doc__).parse_args()
    if args.scale or args.scale_stages:
        hand_over("bench.bench_scale")
    compile_bytecode()
    workdir = Path(tempfile.mkdtemp(prefix="zeroscaler-bench-"))
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
