"""The endpoint-trail benchmark's checker: late rounds fail it, and so does a phase not measured."""

from __future__ import annotations

from bench.bench_endpoints import Trail, summary, targets
from bench.judge import problems


def test_rounds_within_the_settle_in_both_phases_pass() -> None:
    trails = [Trail(False, 0.010, 0), Trail(True, 0.050, 1)]
    assert problems(targets(trails, 0.2)) == []


def test_a_round_over_the_settle_fails_naming_the_worst() -> None:
    trails = [Trail(False, 0.010, 0), Trail(True, 0.31, 4), Trail(True, 0.25, 3)]
    assert problems(targets(trails, 0.2)) == [
        "loaded rounds: the slowest (2 rounds): 0.31 s, target at most 0.20 s: "
        "MISSED by 0.11 s (55% of the target)"
    ]


def test_nothing_measured_fails_for_each_phase() -> None:
    assert problems(targets([], 0.2)) == [
        "quiet rounds: the slowest (0 rounds): not measured, nothing to judge",
        "loaded rounds: the slowest (0 rounds): not measured, nothing to judge",
    ]
    assert len(problems(targets([Trail(False, 0.01, 0)], 0.2))) == 1


def test_the_summary_counts_rounds_that_were_refused_first() -> None:
    s = summary([Trail(True, 0.010, 0), Trail(True, 0.030, 2), Trail(True, 0.020, 0)])
    assert s == {"rounds": 3, "refused_first": 1, "p50_ms": 20.0, "max_ms": 30.0}
