"""The benchmarks' judge: a target missed fails the run and says by how much; so does a figure that
was never measured; failed requests count at their limit; orders alternate."""

from __future__ import annotations

import io
import math

import pytest

from bench.judge import Run, Target, alternated, exit_code, problems, report, with_failures


@pytest.mark.parametrize(
    ("target", "met", "missed_by"),
    [
        (Target("p99 ratio", 1.20, 1.25, "x"), True, 0.0),
        (Target("p99 ratio", 1.25, 1.25, "x"), True, 0.0),
        (Target("p99 ratio", 1.31, 1.25, "x"), False, pytest.approx(0.06)),
        (Target("resident", 300.0, 256.0, "MiB"), False, 44.0),
        (Target("objects kept", 10.0, 20.0, at_least=True), False, 10.0),
        (Target("objects kept", 30.0, 20.0, at_least=True), True, 0.0),
        (Target("a measurement", 3.0), True, 0.0),
        (Target("not measured", None, 1.0), False, 0.0),
        (Target("not measured", math.nan, 1.0), False, 0.0),
        (Target("a measurement not made", None), False, 0.0),
    ],
)
def test_a_target_is_met_or_missed_by_how_much(target: Target, met: bool, missed_by: float) -> None:
    assert target.met is met
    assert target.missed_by() == missed_by


def test_a_missed_target_says_its_value_its_limit_and_by_how_much() -> None:
    verdict = Target("wake p99 / baseline p99 at 1,000", 1.5, 1.25, "x").verdict()
    assert verdict == (
        "wake p99 / baseline p99 at 1,000: 1.50x, target at most 1.25x: "
        "MISSED by 0.25x (20% of the target)"
    )


def test_a_met_target_and_a_measurement_say_so() -> None:
    assert Target("idle CPU", 0.2, 0.5, "%").verdict() == (
        "idle CPU: 0.20%, target at most 0.50%: met"
    )
    assert Target("fan-out p50", 229.0, None, "ms").verdict() == (
        "fan-out p50: 229 ms (a measurement; no target)"
    )


def test_nothing_to_judge_fails() -> None:
    assert problems([]) == ["no figure was measured: nothing to judge"]
    assert exit_code([]) == 1
    assert problems([Target("restart", None, 20.0, "s")]) == [
        "restart: not measured, nothing to judge"
    ]


def test_the_run_fails_on_any_failure_and_passes_only_when_all_are_met() -> None:
    good = [Target("a", 1.0, 2.0), Target("b", 5.0)]
    assert exit_code(good) == 0
    assert exit_code([*good, Target("c", 3.0, 2.0)]) == 1
    out = io.StringIO()
    assert report([*good, Target("c", 3.0, 2.0)], out) == [
        "c: 3.00, target at most 2.00: MISSED by 1.00 (50% of the target)"
    ]
    assert "FAILED: 1 of 3 figures (2 with a target, 1 measurements without one)" in out.getvalue()


def test_a_failed_request_counts_as_one_that_took_the_whole_limit() -> None:
    assert with_failures([0.01, 0.02], 2, 30.0) == [0.01, 0.02, 30.0, 30.0]
    assert with_failures([], 0, 30.0) == []
    with pytest.raises(ValueError, match="failures: -1"):
        with_failures([0.01], -1, 30.0)


def test_orders_alternate_so_that_none_always_goes_first() -> None:
    assert alternated(["baseline", "subject"], 4) == [
        ["baseline", "subject"],
        ["subject", "baseline"],
        ["baseline", "subject"],
        ["subject", "baseline"],
    ]
    assert alternated(["a"], 2) == [["a"], ["a"]]
    with pytest.raises(ValueError, match="rounds: 0"):
        alternated(["a", "b"], 0)


def test_a_result_file_carries_its_run_and_its_verdicts() -> None:
    targets = [Target("a", 1.0, 2.0, "s"), Target("b", None)]
    saved = Run().stamped({"figures": [1]}, targets)
    assert saved["figures"] == [1]
    assert {"command", "commit", "started", "load_average_before"} <= set(saved["run"])
    assert [v["met"] for v in saved["verdicts"]] == [True, False]
    assert saved["failed"] == ["b: not measured, nothing to judge"]
