"""Benchmark: what each managed workload's own series cost. No cluster.

10,000 managed workloads (half asleep, each slept and woken once, so each has every series it
usually has) in the controller's metrics, with the series per workload on and, as the baseline in
the same run, off (`--no-workload-metrics`), the two taking turns over ROUNDS rounds: the series
a scrape carries, its bytes, how long rendering /metrics takes, the memory the counts hold, and
how long the periodic savings round takes. Measurements without a target: the run fails only when
the workloads' series were not there to measure.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from bench.judge import Run, Target, alternated, report
from bench.saved import save_json
from zeroscaler.controller.accounting import Accounting
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.workload import EPOCH, Workload, WorkloadKey
from zeroscaler.controller.workload_object import trim_workload
from zeroscaler.core.annotations import WorkloadStatus
from zeroscaler.runtime.clock import ManualClock


def fleet(count: int) -> dict[WorkloadKey, Workload]:
    workloads: dict[WorkloadKey, Workload] = {}
    for i in range(count):
        key = ("Deployment", f"team-{i % 100:03d}", f"operator-{i:05d}")
        obj = trim_workload({"metadata": {"name": key[2]}, "spec": {"replicas": 0}})
        w = Workload(key, obj, EPOCH)
        w.managed = True
        w.status = WorkloadStatus("asleep", 2) if i % 2 else WorkloadStatus("awake")
        workloads[key] = w
    return workloads


def metrics_for(workloads: dict[WorkloadKey, Workload], per_workload: bool) -> Metrics:
    metrics = Metrics(
        lambda: True,
        workloads=workloads.values if per_workload else None,
    )
    for w in workloads.values():
        metrics.slept(w.report, w.managed, "idle")
        metrics.woke(w.report, w.managed, "activity", 0.3)
    return metrics


def median_ms(action: Callable[[], object], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        action()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def measure(count: int, per_workload: bool) -> dict[str, float]:
    gc.collect()
    tracemalloc.start()
    workloads = fleet(count)
    before = tracemalloc.get_traced_memory()[0]
    metrics = metrics_for(workloads, per_workload)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    text = metrics.render().decode()
    samples = sum(
        len(f.samples)
        for f in text_string_to_metric_families(text)
        if f.name.startswith("zeroscaler_workload_")
    )
    clock = ManualClock()
    accounting = Accounting(metrics, clock)
    accounting.account_all(workloads.values())

    def round_of_savings() -> None:
        clock.advance(10)
        accounting.account_all(workloads.values())

    return {
        "workload_series": samples,
        "series_per_workload": samples / count,
        "exposition_bytes": len(text.encode()),
        "render_ms": median_ms(metrics.render),
        "counts_bytes_per_workload": held / count,
        "savings_round_ms": median_ms(round_of_savings),
    }


ROUNDS = 4  # each way measured this many times, taking turns; each figure the median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", type=int, default=10_000)
    args = parser.parse_args()
    run = Run()
    rounds: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    for order in alternated(["off", "on"], ROUNDS):
        for label in order:
            rounds[label].append(measure(args.workloads, label == "on"))
    results = {label: _medians(found) for label, found in rounds.items()}
    print(f"{args.workloads:,} managed workloads, series per workload off (baseline) and on,")
    print(f"the median of {ROUNDS} rounds each, taking turns:")
    print(f"{'':28}{'off':>14}{'on':>14}")
    for key in results["on"]:
        off, on = results["off"][key], results["on"][key]
        print(f"{key:28}{off:14,.2f}{on:14,.2f}")
    judged = targets(results)
    save_json("metrics", run.stamped({"workloads": args.workloads, **results}, judged))
    sys.exit(1 if report(judged) else 0)


def _medians(found: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in found) for key in found[0]}


def targets(results: dict[str, dict[str, float]]) -> list[Target]:
    """Measurements without a target (the costs are stated, not bounded), each against the
    baseline beside it; a run whose workloads' series were not there fails."""
    on, off = results.get("on", {}), results.get("off", {})
    series = on.get("series_per_workload") or None  # none at all: nothing was measured
    found = [Target("series per workload, on", series, None)]
    for key, unit in (("render_ms", "ms"), ("savings_round_ms", "ms"), ("exposition_bytes", "B")):
        found.append(Target(f"{key}, on", on.get(key), None, unit))
        found.append(Target(f"{key}, off (the baseline)", off.get(key), None, unit))
    return found


if __name__ == "__main__":
    main()
