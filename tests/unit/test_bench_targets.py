"""Each benchmark's targets: a missed one fails its run, a figure asked for and not measured fails
it, and measurements without a target are reported without judging them."""

from __future__ import annotations

import argparse

import pytest

from bench import (
    bench_activator,
    bench_controller,
    bench_masswake,
    bench_memory,
    bench_metrics,
    bench_webhook,
)
from bench.bench_activator import COVERED, IDLE, NOOP, PLAIN, Wake, Way
from bench.bench_cluster import Results as ClusterResults
from bench.bench_cluster import targets as cluster_targets
from bench.judge import Target, problems


def failed(targets: list[Target]) -> list[str]:
    return [t.what for t in targets if not t.met]


def controller_args(**changes: object) -> argparse.Namespace:
    args = argparse.Namespace(
        workloads=[1, 1000], churn=True, fan_out=True, idle_only=False, objects=50_000
    )
    for name, value in changes.items():
        setattr(args, name, value)
    return args


def controller_results() -> bench_controller.Results:
    results = bench_controller.Results()
    for label in ("zeroscaler, 1 workload", "zeroscaler, 1000 workloads"):
        results.latency[label], results.paired[label] = [0.008, 0.012], [0.008, 0.010]
    churn = "zeroscaler, 1000 workloads, sleeps around"
    results.latency[churn], results.paired[churn] = [0.009], [0.008]
    results.latency[bench_controller.ALONE] = [0.007]
    results.latency[bench_controller.FAN_OUT_LABEL] = [0.2]
    results.idle_windows, results.idle_cpu_percent, results.idle_rss_mb = [0.3], 0.3, 80.0
    results.idle_workloads, results.idle_objects = 1000, 50_000
    return results


def test_the_controller_rows_within_their_targets_pass() -> None:
    assert failed(bench_controller.targets(controller_results(), controller_args())) == []


def test_a_controller_row_over_its_ratio_or_its_bound_fails() -> None:
    results = controller_results()
    results.paired["zeroscaler, 1 workload"] = [0.004, 0.006]  # 12 ms against 6: 2.0x
    results.latency["zeroscaler, 1000 workloads"] = [0.009, 0.150]
    results.paired["zeroscaler, 1000 workloads"] = [0.009, 0.140]
    assert failed(bench_controller.targets(results, controller_args())) == [
        "zeroscaler, 1 workload: wake p99 / baseline p99",
        "zeroscaler, 1000 workloads: wake p99",
    ]


def test_a_controller_row_asked_for_and_not_measured_fails() -> None:
    results = controller_results()
    del results.latency["zeroscaler, 1000 workloads, sleeps around"]
    results.idle_windows = []
    assert failed(bench_controller.targets(results, controller_args())) == [
        "zeroscaler, 1000 workloads, sleeps around: wake p99",
        "zeroscaler, 1000 workloads, sleeps around: wake p99 / baseline p99",
        "idle, 1000 workloads over 50000 objects: CPU",
        "idle, 1000 workloads over 50000 objects: resident",
    ]


def test_an_idle_only_run_is_judged_by_its_idle_cost_alone() -> None:
    results = bench_controller.Results()
    results.idle_windows, results.idle_cpu_percent, results.idle_rss_mb = [0.3], 0.3, 120.0
    judged = bench_controller.targets(results, controller_args(idle_only=True))
    assert [t.what.split(": ")[-1] for t in judged] == ["CPU", "resident"]
    assert failed(judged) == ["idle, 0 workloads over 0 objects: resident"]


def masswake_row(last: list[float], base: list[float]) -> bench_masswake.Row:
    return bench_masswake.Row(100, "split", last=last, baseline_last=base, cpu_ms_per_wake=[3.0])


def test_a_mass_wake_is_judged_by_the_median_of_its_samples_ratios() -> None:
    args = argparse.Namespace(modes=["split"], workloads=[100, 1000])
    results = bench_masswake.Results(rows=[masswake_row([1.0, 3.0, 1.2], [1.0, 1.0, 1.0])])
    found = bench_masswake.targets(results, args)
    ratio = next(
        t for t in found if t.what == "split, 100 workloads: last wake / baseline's last write"
    )
    assert ratio.value == pytest.approx(1.2)
    assert ratio.met
    # The 1,000 row was asked for and never measured.
    assert failed(found) == [
        "split, 1,000 workloads: last wake / baseline's last write",
        "split, 1,000 workloads: controller CPU per wake",
    ]


def webhook_result(server: str, rate: int, p99: float) -> bench_webhook.Result:
    return bench_webhook.Result(server, rate, 1000, 0, 2.0, p99, float(rate))


def test_the_webhook_is_judged_at_its_target_rate_only() -> None:
    results = [
        webhook_result("noop", 200, 5.0),
        webhook_result("webhook", 200, 8.0),  # 1.6x
        webhook_result("noop", 500, 5.0),
        webhook_result("webhook", 500, 60.0),  # measured, not judged
    ]
    found = bench_webhook.targets(results, [200, 500], None)
    assert failed(found) == ["200/s: webhook p99 / no-op p99"]


def test_failed_reviews_count_at_the_limit_in_the_webhook_s_percentiles() -> None:
    fast = bench_webhook.Slice(sent=100, latencies=[0.002] * 98, errors=2, seconds=1.0)
    row = bench_webhook.summarize("webhook", 200, [fast], cpu_seconds=0.2)
    assert row.errors == 2
    assert row.p99_ms == pytest.approx(bench_webhook.LIMIT * 1000)


def test_a_webhook_rate_or_the_apply_comparison_not_measured_fails() -> None:
    found = bench_webhook.targets([webhook_result("noop", 200, 5.0)], [200], [])
    assert failed(found) == [
        "200/s: webhook p99",
        "200/s: webhook p99 / no-op p99",
        "kubectl apply, p50 with the webhook less without",
    ]


def test_failed_creates_count_at_the_limit_in_the_activator_s_percentiles() -> None:
    samples = [bench_activator.Sample([0.003] * 97, 2), bench_activator.Sample([0.004], 0)]
    way = bench_activator.summarize(NOOP, samples)
    assert (way.requests, way.errors) == (98, 2)
    assert way.p99_ms == pytest.approx(bench_activator.LIMIT * 1000)


def test_the_activator_idle_is_judged_against_the_no_op_way() -> None:
    ways = [Way(PLAIN, 100, 0, 2.0, 5.0), Way(NOOP, 100, 0, 3.0, 8.0),
            Way(IDLE, 100, 0, 3.0, 9.5), Way(COVERED, 100, 0, 6.0, 50.0)]  # fmt: skip
    assert failed(bench_activator.targets(ways, None)) == [f"p99 of {IDLE!r} less {NOOP!r}"]
    ways[2] = Way(IDLE, 100, 0, 3.0, 8.9)
    assert failed(bench_activator.targets(ways, None)) == []
    assert failed(bench_activator.targets(ways, [])) == [
        "a covered create while its backend sleeps, median"
    ]
    wake = Wake(1.0, 0.03, 0.5, 0.3, 0.2)
    assert failed(bench_activator.targets(ways, [wake])) == []


def memory_results(**changes: float) -> dict[str, float]:
    results = {
        "bytes_per_object": 239.0,
        "workload_own_bytes": 1877.0,
        "waiting_event_bytes": 300.0,
        "one_process_10000_peak_bytes": 130 * 2**20,
        "one_process_10000_seconds": 8.0,
        "one_process_10000_cpu_seconds": 7.0,
        "one_process_100000_peak_bytes": 850 * 2**20,
        "one_process_100000_seconds": 79.0,
        "one_process_100000_cpu_seconds": 70.0,
    }
    results.update(changes)
    return results


def test_one_process_is_judged_by_its_memory_and_its_start_per_workload() -> None:
    assert failed(bench_memory.targets(memory_results())) == []
    slow = memory_results(one_process_100000_seconds=162.0, workload_own_bytes=2100.0)
    assert failed(bench_memory.targets(slow)) == [
        "one more workload: the controller's own state",
        "one process at 100,000 workloads: start time per workload / at 10,000",
    ]
    busy = memory_results(one_process_100000_cpu_seconds=134.4)  # as measured on 2026-12-06
    assert failed(bench_memory.targets(busy)) == [
        "one process at 100,000 workloads: start CPU per workload / at 10,000"
    ]
    big = memory_results(one_process_100000_peak_bytes=1.1 * 2**30)
    assert failed(bench_memory.targets(big)) == ["one process at 100,000 workloads: peak resident"]


def test_a_start_per_workload_without_the_10000_to_compare_with_fails() -> None:
    results = memory_results()
    del results["one_process_10000_seconds"], results["one_process_10000_peak_bytes"]
    del results["one_process_10000_cpu_seconds"]
    assert failed(bench_memory.targets(results)) == [
        "one process at 100,000 workloads: start time per workload / at 10,000",
        "one process at 100,000 workloads: start CPU per workload / at 10,000",
    ]


def test_the_metrics_measurements_fail_only_when_nothing_was_there() -> None:
    on = {"series_per_workload": 8.0, "render_ms": 200.0, "savings_round_ms": 9.0,
          "exposition_bytes": 9e6}  # fmt: skip
    off = {"series_per_workload": 0.0, "render_ms": 2.0, "savings_round_ms": 6.0,
           "exposition_bytes": 9e3}  # fmt: skip
    assert failed(bench_metrics.targets({"on": on, "off": off})) == []
    assert failed(bench_metrics.targets({"on": {**on, "series_per_workload": 0.0}, "off": off}))


def test_the_control_plane_s_measurements_fail_only_when_missing() -> None:
    measured = ClusterResults(starts=[6.8], rss_mb={"etcd": 42.0}, idle_cpu_percent={"etcd": 0.3},
                              real_node_ready=[7.4])  # fmt: skip
    assert problems(cluster_targets(measured)) == []
    assert failed(cluster_targets(ClusterResults(real_node_absent="no cgroups"))) == [
        "warm start to a Ready node, median",
        "idle resident, all components",
        "idle CPU, all components",
    ]
