"""Benchmark: what each managed workload's own series cost. No cluster.

10,000 managed workloads (half asleep, each slept and woken once, so each has every series it
usually has) in the controller's metrics, with the series per workload on and, as the baseline in
the same run, off (`--no-workload-metrics`): the series a scrape carries, its bytes, how long
rendering /metrics takes, the memory the counts hold, and how long the periodic savings round takes.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from bench.saved import save_json
from zeroscaler.controller.accounting import Accounting
from zeroscaler.controller.clock import ManualClock
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.workload import EPOCH, Workload, WorkloadKey
from zeroscaler.core.annotations import WorkloadStatus


def fleet(count: int) -> dict[WorkloadKey, Workload]:
    workloads: dict[WorkloadKey, Workload] = {}
    for i in range(count):
        key = ("Deployment", f"team-{i % 100:03d}", f"operator-{i:05d}")
        w = Workload(key, {"metadata": {"name": key[2]}}, EPOCH)
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
        metrics.slept(w, "idle")
        metrics.woke(w, "activity", 0.3)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", type=int, default=10_000)
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    for label, per_workload in (("off", False), ("on", True)):
        results[label] = measure(args.workloads, per_workload)
    print(f"{args.workloads:,} managed workloads, series per workload off (baseline) and on:")
    print(f"{'':28}{'off':>14}{'on':>14}")
    for key in results["on"]:
        off, on = results["off"][key], results["on"][key]
        print(f"{key:28}{off:14,.2f}{on:14,.2f}")
    save_json("metrics", {"workloads": args.workloads, **results})


if __name__ == "__main__":
    main()
