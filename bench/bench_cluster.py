"""Benchmark: warm start, memory and idle CPU of the local control plane. No cluster before it.

Starts the control plane several times from cached binaries and reports how long each start took
until a Ready node and the `default` ServiceAccount existed; then samples every component's resident
memory and CPU while idle. Then starts it with the real node (where this machine can run one): how
long the node took to be Ready, and the kubelet's and containerd's memory and CPU while idle.

These are measurements without a target and without a baseline: the control plane is the test
bed, not the product. The run fails only when a figure it is asked for was not measured. Build
times are not this run's: the builds record them themselves (`build-times.json` beside the
binaries, written by `python -m localcluster build`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.judge import Run, Target, report
from bench.saved import RESULTS, save_json
from localcluster import build, realnode
from localcluster.cluster import start

TICKS = 100  # USER_HZ on Linux


@dataclass
class Results:
    starts: list[float] = field(default_factory=list)
    rss_mb: dict[str, float] = field(default_factory=dict)
    idle_cpu_percent: dict[str, float] = field(default_factory=dict)
    real_node_starts: list[float] = field(default_factory=list)  # whole cluster, with the node
    real_node_ready: list[float] = field(default_factory=list)  # the node alone, to Ready
    real_node_rss_mb: dict[str, float] = field(default_factory=dict)
    real_node_idle_cpu_percent: dict[str, float] = field(default_factory=dict)
    real_node_absent: str = ""


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _sample_idle(
    pids: dict[str, int], seconds: float, rss: dict[str, float], cpu: dict[str, float]
) -> None:
    before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    for name, pid in pids.items():
        cpu[name] = round(100 * (_cpu_seconds(pid) - before[name]) / seconds, 2)
        rss[name] = round(_rss_mb(pid), 1)


def _real_node(
    results: Results, binaries: dict[str, Path], starts: int, settle: float, idle: float
) -> None:
    for i in range(starts):
        began = time.monotonic()
        cluster = start(binaries, nodes=2, real_node=True)
        try:
            if cluster.real_node is None:
                results.real_node_absent = cluster.real_node_absent
                return
            results.real_node_starts.append(round(time.monotonic() - began, 2))
            results.real_node_ready.append(cluster.real_node_seconds)
            if i == starts - 1:
                time.sleep(settle)
                pids = {
                    c.name: realnode.inner_pid(c.pid)
                    for c in cluster.components
                    if c.name in ("kubelet", "containerd")
                }
                _sample_idle(
                    pids, idle, results.real_node_rss_mb, results.real_node_idle_cpu_percent
                )
        finally:
            cluster.stop()
        print(
            f"real node start {i + 1}/{starts}: {results.real_node_ready[-1]:.1f}s", file=sys.stderr
        )


def run(starts: int, settle: float, idle: float) -> Results:
    results = Results()
    binaries = build.ensure_binaries(node=True)
    for i in range(starts):
        began = time.monotonic()
        cluster = start(binaries, nodes=2)
        results.starts.append(round(time.monotonic() - began, 2))
        try:
            if i == starts - 1:
                print(f"settling {settle:.0f}s, then sampling {idle:.0f}s idle", file=sys.stderr)
                time.sleep(settle)
                pids = {c.name: c.pid for c in cluster.components}
                _sample_idle(pids, idle, results.rss_mb, results.idle_cpu_percent)
        finally:
            cluster.stop()
        print(f"start {i + 1}/{starts}: {results.starts[-1]:.1f}s", file=sys.stderr)
    _real_node(results, binaries, starts, settle, idle)
    return results


def print_table(r: Results) -> None:
    print("\nlocal control plane")
    print(
        f"  warm start to Ready node (n={len(r.starts)}): median "
        f"{statistics.median(r.starts):.1f}s, max {max(r.starts):.1f}s"
    )
    print(f"  {'component':26} {'RSS MB':>8} {'idle CPU %':>11}")
    for name, rss in r.rss_mb.items():
        print(f"  {name:26} {rss:8.1f} {r.idle_cpu_percent[name]:11.2f}")
    print(f"  {'total':26} {sum(r.rss_mb.values()):8.1f} {sum(r.idle_cpu_percent.values()):11.2f}")
    if r.real_node_absent:
        print(f"  real node: not measured: {r.real_node_absent}")
    elif r.real_node_ready:
        print(
            f"  real node to Ready (n={len(r.real_node_ready)}): median "
            f"{statistics.median(r.real_node_ready):.1f}s; whole start with it: median "
            f"{statistics.median(r.real_node_starts):.1f}s"
        )
        for name, rss in r.real_node_rss_mb.items():
            cpu = r.real_node_idle_cpu_percent[name]
            print(f"  {name:26} {rss:8.1f} {cpu:11.2f}")


def plot(r: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    names = list(r.rss_mb)
    ax.barh(names, [r.rss_mb[n] for n in names], color="#4878a8", label="control plane")
    if r.real_node_rss_mb:
        node = [f"{n} (real node)" for n in r.real_node_rss_mb]
        ax.barh(node, list(r.real_node_rss_mb.values()), color="#d08c3c", label="real node")
        ax.legend(loc="center right")
    ax.set_xlabel("resident memory while idle (MB)")
    title = (
        f"local control plane: {sum(r.rss_mb.values()):.0f} MB, "
        f"warm start {statistics.median(r.starts):.1f}s"
    )
    if r.real_node_ready:
        title += f"; real node Ready in {statistics.median(r.real_node_ready):.1f}s"
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--settle", type=float, default=15.0)
    parser.add_argument("--idle", type=float, default=20.0)
    args = parser.parse_args(argv)
    began = Run()
    results = run(max(1, args.starts), args.settle, args.idle)
    print_table(results)
    judged = targets(results)
    save_json("cluster", began.stamped(asdict(results), judged))
    if results.starts and results.rss_mb:
        plot(results, RESULTS / "cluster.png")
        print(f"wrote {RESULTS / 'cluster.png'}")
    sys.exit(1 if report(judged) else 0)


def targets(r: Results) -> list[Target]:
    """Measurements without a target; each missing one fails (the real node's only where this
    machine could start one, which the results say)."""
    median = statistics.median(r.starts) if r.starts else None
    cpu = sum(r.idle_cpu_percent.values()) if r.rss_mb else None
    found = [
        Target("warm start to a Ready node, median", median, None, "s"),
        Target("idle resident, all components", sum(r.rss_mb.values()) or None, None, "MB"),
        Target("idle CPU, all components", cpu, None, "%"),
    ]
    if not r.real_node_absent:
        node = statistics.median(r.real_node_ready) if r.real_node_ready else None
        found.append(Target("real node to Ready, median", node, None, "s"))
    return found


if __name__ == "__main__":
    main()
