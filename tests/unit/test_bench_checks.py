"""The scale row's checker: a run that measured nothing, or only part, is a failure, not a pass."""

from __future__ import annotations

import pytest

from bench.bench_scale import ScaleResults, Stage, resident_limit_mib, rows, targets
from bench.judge import problems
from bench.measures import RAW, log_time, median_start, restart_rounds


def measured(**changes: object) -> Stage:
    stage = Stage(1000, latency=[0.01], paired=[0.01], managed_s=7.2)
    stage.idle_windows, stage.idle_quiet = [0.3, 0.4], True
    stage.idle_cpu_percent, stage.idle_rss_mb = 0.3, 90.0
    stage.seconds = {"all asleep": 12.0}
    stage.list_baseline_s, stage.list_baseline_objects = [6.0, 6.4], 51_000
    stage.calibration_ms = [52.0, 55.5]
    stage.restart_cpu_s, stage.list_baseline_cpu_s = 6.8, [5.5, 5.9, 5.0]
    for name, value in changes.items():
        setattr(stage, name, value)
    return stage


def failures(results: ScaleResults) -> list[str]:
    return [t.verdict() for t in targets(results) if not t.met]


def test_a_complete_run_within_its_targets_passes() -> None:
    large = measured(workloads=10_000, idle_rss_mb=140.0, managed_s=7.0, restart_cpu_s=6.0)
    assert failures(ScaleResults([measured(), large])) == []


def test_no_stage_is_nothing_to_judge() -> None:
    assert targets(ScaleResults()) == []
    assert problems(targets(ScaleResults())) == ["no figure was measured: nothing to judge"]


@pytest.mark.parametrize(
    ("missing", "said"),
    [
        ({"latency": []}, "wake p99 / baseline p99: not measured"),
        ({"paired": []}, "wake p99 / baseline p99: not measured"),
        ({"managed_s": 0.0}, "restart to every workload reconciled: not measured"),
        ({"list_baseline_s": [], "list_baseline_objects": 0}, "restart / raw list: not measured"),
        ({"idle_windows": []}, "idle CPU, a quiet cluster: not measured"),
        ({"idle_quiet": False}, "idle CPU, a quiet cluster: not measured"),
        ({"seconds": {}}, "to all asleep: not measured"),
        ({"calibration_ms": [52.0]}, "fixed work (before the restarts): not measured"),
        ({"restart_cpu_s": 0.0}, "restart CPU / raw list CPU: not measured"),
        ({"list_baseline_cpu_s": []}, "restart CPU / raw list CPU: not measured"),
    ],
)
def test_a_figure_a_stage_did_not_measure_fails(missing: dict[str, object], said: str) -> None:
    found = failures(ScaleResults([measured(), measured(workloads=2_000, **missing)]))
    assert found, "a figure not measured passed"
    assert all(f.startswith("2,000 workloads: ") for f in found)
    assert said in found[0]


def test_the_restart_is_judged_against_the_raw_list_in_time_and_in_cpu_from_10000() -> None:
    small = measured(managed_s=9.0, restart_cpu_s=9.0)  # 1.45x and 1.64x: measured, not judged
    large = measured(workloads=10_000, idle_rss_mb=140.0, managed_s=8.1, restart_cpu_s=6.5)
    assert failures(ScaleResults([small, large])) == [
        "10,000 workloads: restart / raw list: 1.31x, target at most 1.25x: "
        "MISSED by 0.06x (5% of the target)"
    ]
    judged = {t.what: t for t in targets(ScaleResults([small, large]))}
    assert judged["1,000 workloads: restart / raw list"].limit is None
    assert judged["10,000 workloads: restart CPU / raw list CPU"].met


def test_the_restart_s_cpu_alone_over_its_ratio_fails() -> None:
    large = measured(workloads=10_000, idle_rss_mb=140.0, managed_s=6.5, restart_cpu_s=7.0)
    found = failures(ScaleResults([large]))
    assert found == [
        "10,000 workloads: restart CPU / raw list CPU: 1.27x, target at most 1.25x: "
        "MISSED by 0.02x (2% of the target)"
    ]


@pytest.mark.parametrize(
    ("workloads", "limit"), [(100, 100.0), (1_000, 100.0), (10_000, 150.0), (100_000, 1024.0)]
)
def test_the_resident_target_grows_with_the_stage(workloads: int, limit: float) -> None:
    assert resident_limit_mib(workloads) == limit


def test_the_restart_may_grow_with_the_workloads_and_no_faster() -> None:
    stage = measured(workloads=100_000, idle_rss_mb=900.0, managed_s=210.0, restart_cpu_s=6.0)
    found = failures(ScaleResults([stage]))
    assert any("restart to every workload reconciled: 210 s, target at most 200 s" in f
               for f in found)  # fmt: skip


def test_the_table_has_rows_for_the_restart_modes_run_and_no_others() -> None:
    stage = measured()
    stage.restarts = {
        "cold": [[1.0, 2.0, 3.0], [1.0, 2.5, 9.0], [1.2, 1.5, 3.5]],
        "default": [[1.0, 4.0, 5.0]],
    }
    found = {name: values for name, values in rows(ScaleResults([stage])) if "restart, " in name}
    assert found == {
        "restart, watches by first reconciles: synced (s)": [2.0],
        "restart, watches by first reconciles: managed (s)": [3.5],
        "restart, as configured: synced (s)": [4.0],
        "restart, as configured: managed (s)": [5.0],
    }


def test_a_figure_is_the_median_of_its_starts_each_figure_on_its_own() -> None:
    starts = [[1.0, 6.0, 6.5], [3.0, 5.0, 9.0], [2.0, 7.0, 7.5]]
    assert median_start(starts) == [2.0, 6.0, 7.5]
    assert median_start([[1.0, 5.0], [2.0, 6.0]]) == [1.5, 5.5]


def test_the_machine_s_speed_is_reported_before_and_after_the_restarts() -> None:
    found = dict(rows(ScaleResults([measured()])))
    assert found["machine: fixed work before restarts (ms)"] == [52.0]
    assert found["machine: fixed work after restarts (ms)"] == [55.5]


def test_the_cpu_of_the_restart_is_set_beside_the_raw_list_s_median() -> None:
    found = dict(rows(ScaleResults([measured()])))
    assert found["restart: controller CPU to caught up (s)"] == [6.8]
    assert found["raw list: its own CPU (s, median)"] == [5.5]
    assert found["restart CPU / raw list CPU"] == [pytest.approx(6.8 / 5.5)]


def test_the_raw_list_is_the_median_of_its_rounds() -> None:
    stage = measured(list_baseline_s=[4.0, 9.0, 4.4])
    found = dict(rows(ScaleResults([stage])))
    assert found["raw list of the same types (s, median)"] == [4.4]


def test_each_round_runs_everything_once_and_none_always_first() -> None:
    rounds = restart_rounds(["cold", "default"], 3)
    assert all(sorted(r) == sorted([RAW, "cold", "default"]) for r in rounds)
    assert len({r[0] for r in rounds}) == 3
    # The last round ends with the row's mode: its controller runs on into the next stage.
    assert rounds[-1] == [RAW, "cold", "default"]
    assert restart_rounds(["default"], 1) == [[RAW, "default"]]


def test_a_restart_ends_at_its_caught_up_line_to_the_millisecond() -> None:
    line = b"time=2026-12-05T01:14:08.611Z level=info logger=zeroscaler.controller.assembly "
    line += b'msg="caught up" workloads=10001\n'
    assert log_time(line) == pytest.approx(1796433248.611, abs=1e-6)
