"""The collector's pause at a start follows the start's progress: it lasts while the start sets
records, and ends once the start has set none for the stall bound."""

from __future__ import annotations

import pytest

from zeroscaler.core.start_progress import Pause, Progress, begin, observe, stalled

STALL = 120.0


def _p(workloads: int, objects: int, listed: int, waiting: int) -> Progress:
    return Progress(workloads, objects, listed, waiting)


@pytest.mark.parametrize(
    ("looks", "since"),
    [
        # Each look at (seconds, progress); `since` is when the last record was set.
        ([(1.0, _p(0, 0, 0, 0))], 0.0),  # nothing yet: no record
        ([(1.0, _p(500, 0, 0, 500))], 1.0),  # the workloads' first page
        ([(1.0, _p(500, 0, 0, 500)), (2.0, _p(500, 40_000, 1, 500))], 2.0),  # a type listed
        ([(1.0, _p(500, 0, 0, 500)), (2.0, _p(500, 0, 0, 400))], 2.0),  # reconciles done
        ([(1.0, _p(500, 0, 0, 500)), (2.0, _p(500, 0, 0, 600))], 1.0),  # more waiting: none
        # A relist empties a store and fills it again to where it was: no record.
        ([(1.0, _p(10, 40_000, 1, 0)), (50.0, _p(10, 0, 0, 0)), (90.0, _p(10, 40_000, 1, 0))], 1.0),
        # Keys queued again and again, never fewer than the fewest: no record.
        ([(1.0, _p(10, 0, 0, 0)), (60.0, _p(10, 0, 0, 3)), (90.0, _p(10, 0, 0, 0))], 1.0),
        # New reads queue reconciles: the fewest waiting counts again from there.
        ([(1.0, _p(10, 0, 0, 0)), (2.0, _p(20, 0, 0, 15)), (3.0, _p(20, 0, 0, 14))], 3.0),
        # Fewer workloads (deleted meanwhile) but more objects: a record all the same.
        ([(1.0, _p(10, 100, 1, 0)), (5.0, _p(9, 200, 1, 0))], 5.0),
    ],
)
def test_the_pause_moves_on_only_with_a_record(
    looks: list[tuple[float, Progress]], since: float
) -> None:
    pause = begin(_p(0, 0, 0, 0), 0.0)
    for now, seen in looks:
        pause = observe(pause, seen, now)
    assert pause.since == since


def test_records_are_kept_as_the_most_read_and_the_fewest_waiting() -> None:
    pause = begin(_p(0, 0, 0, 0), 0.0)
    for now, seen in ((1.0, _p(10, 500, 2, 10)), (2.0, _p(8, 300, 3, 12)), (3.0, _p(8, 300, 3, 4))):
        pause = observe(pause, seen, now)
    assert pause == Pause(_p(10, 500, 3, 4), 3.0)


@pytest.mark.parametrize(
    ("since", "now", "expected"),
    [
        (0.0, 119.9, False),
        (0.0, 120.0, True),  # nothing moved since the start: the old fixed bound's case
        (600.0, 719.0, False),  # a start of ten minutes and more that still moves
        (600.0, 720.0, True),
    ],
)
def test_a_start_stalls_once_it_has_set_no_record_for_the_bound(
    since: float, now: float, expected: bool
) -> None:
    assert stalled(Pause(_p(1, 1, 1, 0), since), now, STALL) is expected


def test_a_long_start_that_keeps_moving_never_stalls() -> None:
    pause = begin(_p(0, 0, 0, 0), 0.0)
    for second in range(1, 1_000):  # 1,000 s, a record every second
        pause = observe(pause, _p(second * 100, 0, 0, 0), float(second))
        assert not stalled(pause, float(second), STALL)


def test_a_stuck_start_stalls_at_the_bound_after_its_last_record() -> None:
    pause = observe(begin(_p(0, 0, 0, 0), 0.0), _p(100, 2_000, 1, 50), 30.0)
    stuck = _p(100, 2_000, 1, 50)
    for second in range(31, 150):
        pause = observe(pause, stuck, float(second))
    assert not stalled(pause, 149.0, STALL)
    assert stalled(pause, 150.0, STALL)


@pytest.mark.parametrize("field", ["workloads", "objects", "listed", "waiting"])
def test_a_negative_count_is_refused_by_name(field: str) -> None:
    counts = {"workloads": 0, "objects": 0, "listed": 0, "waiting": 0, field: -1}
    with pytest.raises(ValueError, match=f"{field} is -1; a count, at least 0"):
        Progress(**counts)


@pytest.mark.parametrize("bound", [0.0, -5.0])
def test_a_stall_bound_must_be_positive(bound: float) -> None:
    with pytest.raises(ValueError, match=r"stall: .*more than 0"):
        stalled(begin(_p(0, 0, 0, 0), 0.0), 1.0, bound)
