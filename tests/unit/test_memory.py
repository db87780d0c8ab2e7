"""The collector paused for a start's catch-up and run again after it; old garbage never frozen."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from zeroscaler.controller.memory import pause_collection, release_free_memory, resume_collection


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    gc.enable() if enabled else gc.disable()


def test_a_paused_collector_leaves_cycles_until_it_is_resumed() -> None:
    pause_collection()
    assert not gc.isenabled()
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    for _ in range(2000):  # enough allocations for many automatic collections, none of which run
        _Node()
    assert gone() is not None
    resume_collection()
    assert gc.isenabled()
    assert gone() is None


def test_resuming_a_collector_that_runs_changes_nothing() -> None:
    gc.enable()
    resume_collection()
    assert gc.isenabled()


def _old_cycle() -> weakref.ref[_Node]:
    """A cycle that survived a collection while in use (promoted to the oldest generation),
    then died."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gc.collect(1)
    return weakref.ref(a)


def test_a_cycle_that_grew_old_before_it_died_is_freed_not_frozen() -> None:
    gc.freeze()  # what the test run holds already: the oldest generation starts empty
    gone = _old_cycle()
    release_free_memory()
    assert gone() is None


def test_an_oldest_generation_filled_by_a_burst_is_left_to_the_full_collection() -> None:
    gc.freeze()
    burst = [[n] for n in range(100)]
    gc.collect(1)
    gone = _old_cycle()
    release_free_memory(oldest_limit=len(burst))  # more than that: only the young are walked
    assert gone() is not None
    release_free_memory(full=True)
    assert gone() is None
