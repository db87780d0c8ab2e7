"""The scale row's checker: a run that measured nothing, or only part, is a failure, not a pass."""

from __future__ import annotations

import pytest

from bench.bench_scale import (
    RAW,
    ScaleResults,
    Stage,
    check,
    log_time,
    median_start,
    restart_rounds,
    rows,
)


def measured(**changes: object) -> Stage:
    stage = Stage(1000, latency=[0.01], paired=[0.01], managed_s=7.2)
    stage.idle_windows, stage.idle_quiet = [0.3, 0.4], True
    stage.list_baseline_s, stage.list_baseline_objects = [6.0, 6.4], 51_000
    stage.calibration_ms = [52.0, 55.5]
    stage.restart_cpu_s, stage.list_baseline_cpu_s = 6.8, [5.5, 5.9, 5.0]
    for name, value in changes.items():
        setattr(stage, name, value)
    return stage


def test_a_complete_run_passes() -> None:
    assert check(ScaleResults([measured(), measured(workloads=10_000)])) == []


def test_no_stage_fails() -> None:
    assert check(ScaleResults()) == ["no stage was measured"]


@pytest.mark.parametrize(
    ("missing", "said"),
    [
        ({"latency": []}, "no wake timed"),
        ({"paired": []}, "no baseline sample beside the wakes"),
        ({"managed_s": 0.0}, "no restart"),
        ({"list_baseline_s": []}, "no raw list"),
        ({"list_baseline_objects": 0}, "listed nothing"),
        ({"idle_windows": []}, "idle CPU not measured"),
        ({"idle_quiet": False}, "measured while workloads changed"),
        ({"calibration_ms": []}, "the machine's speed not measured"),
        ({"calibration_ms": [52.0]}, "the machine's speed not measured"),
        ({"restart_cpu_s": 0.0}, "the CPU of the restart or of the raw list not measured"),
        ({"list_baseline_cpu_s": []}, "the CPU of the restart or of the raw list not measured"),
    ],
)
def test_a_stage_without_samples_fails(missing: dict[str, object], said: str) -> None:
    problems = check(ScaleResults([measured(), measured(workloads=10_000, **missing)]))
    assert len(problems) == 1
    assert problems[0].startswith("10000 workloads: ")
    assert said in problems[0]


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
